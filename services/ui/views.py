"""The inspector's JSON views, each composed from Python-client reads of one principal
(Reader). Nothing here writes to Morphz but `compile` for an existing activation, which
records a snapshot and changes neither the Mind nor the history."""
from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from typing import Any, Optional

from google.protobuf.json_format import MessageToDict

from morphz.client import Client
from morphz.client.errors import MorphzError, NotFoundError, input_error
from morphz.services.ui import mind as M
from morphz.services.ui.history import Commits, read_events

PREVIEW_CHARS = 160
TIMELINE_PAGE = 50
FRAME_PAGE = 100
GRAPH_CAP = 120          # frames drawn at once
GRAPH_ALL_UP_TO = 80     # Minds up to this size are drawn whole by default
EVENT_LEAVES = 60        # raw events drawn as leaves at most
RECEIPT_OPS = 20         # receipt lines reconstructed per transaction
MINDS_KEPT = 4           # composed current Minds cached per principal
OUTCOMES = {"create": "created", "derive": "derived", "revise": "revised",
            "retire": "retired", "restore": "restored", "protect": "protected",
            "unprotect": "unprotected", "relate": "related", "unrelate": "unrelated",
            "place": "placed", "checkpoint": "checkpointed", "rollback": "rolled back",
            "drop-checkpoint": "dropped", "retire-session": "retired",
            "restore-session": "restored"}


def _plain(message) -> dict:
    return MessageToDict(message, preserving_proto_field_name=True,
                         always_print_fields_with_no_presence=True)


def preview(text: str) -> dict:
    return {"preview": text[:PREVIEW_CHARS], "truncated": len(text) > PREVIEW_CHARS}


def _int(value: Optional[str], name: str, default: int = 0) -> int:
    if value in (None, ""):
        return default
    if not value.isdigit():
        raise input_error(f"{name} must be a non-negative integer, got {value[:40]!r}",
                          field=name)
    return int(value)


def body_items(body: str) -> list[str]:
    """The top-level items of a canonical body, e.g. ['(goal x)', '(stage y)']."""
    items, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(body):
        if quoted:
            quoted = ch != '"' or body[i - 1] == "\\"
        elif ch == '"':
            quoted = True
        elif ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                items.append(body[start:i + 1])
    return items or ([body] if body else [])


def body_diff(old: str, new: str) -> list[dict]:
    a, b = body_items(old), body_items(new)
    lines = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b).get_opcodes():
        if tag == "equal":
            lines += [{"op": "same", "text": t} for t in a[i1:i2]]
            continue
        lines += [{"op": "removed", "text": t} for t in a[i1:i2]]
        lines += [{"op": "added", "text": t} for t in b[j1:j2]]
    return lines


class Reader:
    """One principal's view of Morphz: its client and what it has composed so far."""

    def __init__(self, client: Client) -> None:
        self.mz = client
        self._lock = threading.Lock()
        self._commits: dict[str, Commits] = {}
        self._minds: "OrderedDict[tuple, tuple]" = OrderedDict()

    def close(self) -> None:
        self.mz.close()

    # -- shared compositions ----------------------------------------------------------------
    def commits(self, context: str) -> Commits:
        with self._lock:
            c = self._commits.setdefault(context, Commits())
        return c.refresh(self.mz, context)

    def _current(self, context: str, reveal: bool):
        seq = self.mz.status(context).commit_seq
        key = (context, seq, reveal)
        with self._lock:
            if key in self._minds:
                self._minds.move_to_end(key)
                return self._minds[key]
        now = M.current(self.mz, context, reveal)
        with self._lock:
            self._minds[key] = now
            while len(self._minds) > MINDS_KEPT:
                self._minds.popitem(last=False)
        return now

    def mind_at(self, context: str, revision: int, reveal: bool) -> M.MindAt:
        now = self._current(context, reveal)
        commits = self.commits(context) if 0 < revision < now[0] else None
        return M.at_revision(self.mz, context, now, commits, revision, reveal)

    def _events(self, context: str, refs: list[str], reveal: bool) -> dict[str, dict]:
        seqs = [int(r[2:]) for r in refs if r.startswith("@e") and r[2:].isdigit()]
        found = read_events(self.mz, context, seqs, reveal=reveal)
        return {e.ref: self._event_json(e) for e in found if e is not None}

    @staticmethod
    def _event_json(e) -> dict:
        return {"ref": e.ref, "seq": e.seq, "event_kind": e.kind, "session": e.session,
                "actor": e.actor, "state": e.state, "time": e.time,
                "occurred_at": e.occurred_at, "secret": e.secret,
                "protected": e.protected,
                # the erasure that took its content (its text is the erased marker)
                "erased": e.erased.erasure if e.HasField("erased") else "",
                **preview(e.text)}

    # -- views ------------------------------------------------------------------------------
    def contexts(self) -> dict:
        rows = []
        for name in self.mz.contexts():
            try:
                st = self.mz.status(name)
            except MorphzError as e:
                rows.append({"context": name, "error": e.to_dict()})
                continue
            rows.append({"context": name, "revision": st.revision,
                         "tick": st.cognitive_tick, "events": st.event_count,
                         "frames_by_state": dict(st.frames_by_state),
                         "sessions": [s.id for s in st.sessions],
                         "commit_seq": st.commit_seq})
        return {"contexts": rows}

    def context(self, context: str, audit: bool) -> dict:
        st = self.mz.status(context)
        out = {"status": _plain(st)}
        try:
            ix = self.mz.inspect_index(context)
            out["index"] = {"lag": ix.lag, "documents": ix.documents,
                            "position": ix.position, "head": ix.head}
        except MorphzError as e:
            out["index"] = {"error": e.to_dict()}
        if audit:
            report = self.mz.audit(context)
            out["audit"] = {"match": report.match, "events_replayed": report.events_replayed,
                            "chain": report.chain.match, "replay_error": report.replay_error,
                            "differences": [p.projection for p in report.projections
                                            if not p.match]}
        return out

    def mind(self, context: str, q: dict) -> dict:
        reveal = q.get("reveal") == "1"
        m = self.mind_at(context, _int(q.get("revision"), "revision"), reveal)
        ids = list(m.frames)
        needle = q.get("find", "")
        listed = [i for i in ids if needle in i] if needle else ids
        page = _int(q.get("page"), "page")
        pages = max(1, -(-len(listed) // FRAME_PAGE))
        page_ids = listed[page * FRAME_PAGE:(page + 1) * FRAME_PAGE]
        focus = q.get("focus", "")
        if focus and focus not in m.frames:
            raise NotFoundError("FRAME_NOT_FOUND", f"frame {focus} does not exist at "
                                f"revision {m.revision}", code="NOT_FOUND",
                                details={"frame": focus, "revision": m.revision})
        depth = min(_int(q.get("depth"), "depth", 2), 4)
        if not focus and len(ids) <= GRAPH_ALL_UP_TO:
            drawn = ids
        else:
            focus = focus or (page_ids[0] if page_ids else "")
            drawn = M.neighbourhood(m, focus, depth, GRAPH_CAP) if focus else []
        refs = []
        for i in drawn:
            refs += [s for s in m.frames[i].sources if s.startswith("@e") and s not in refs]
        events = self._events(context, refs[:EVENT_LEAVES], reveal)
        return {"context": context, "revision": m.revision,
                "current_revision": m.current_revision, "frames_total": len(ids),
                "listed_total": len(listed), "page": page, "pages": pages,
                "page_frames": [{"id": i, "state": m.frames[i].state} for i in page_ids],
                "focus": focus, "depth": depth, "exact_relations": m.exact_relations,
                "graph": M.graph(m, drawn, events)}

    def frame(self, context: str, q: dict) -> dict:
        reveal = q.get("reveal") == "1"
        frame_id = q.get("id", "")
        revision = _int(q.get("revision"), "revision")
        f = self.mz.frame(context, frame_id, at_revision=revision, reveal_secrets=reveal)
        revisions, cur = [], f
        while len(revisions) < 50:
            revisions.append({"revision": cur.revision, "changed_at": cur.changed_at,
                              "state": cur.state, "body": cur.body})
            if cur.changed_at <= 1:
                break
            try:
                cur = self.mz.frame(context, frame_id, at_revision=cur.changed_at - 1,
                                    reveal_secrets=reveal)
            except NotFoundError:
                break
        commit = self.commits(context).at(f.changed_at)
        m = self.mind_at(context, revision, reveal)
        sources = self._events(context, list(f.sources), reveal)
        return {"frame": M.frame_view(f).to_json(), "as_of_revision": f.as_of_revision,
                "revisions": revisions,
                "sources": [sources.get(s, {"ref": s, "frame": s in m.frames})
                            for s in f.sources],
                "relations": [{"subject": s, "name": n, "object": o}
                              for s, n, o in sorted(m.relations) if frame_id in (s, o)],
                "last_transaction": _commit_json(commit) if commit else None}

    def timeline(self, context: str, q: dict) -> dict:
        reveal = q.get("reveal") == "1"
        st = self.mz.status(context)
        commits = self.commits(context)
        by_seq = commits.by_seq()
        last = max([c.seq for c in commits.all] + [st.event_count])
        revision = _int(q.get("revision"), "revision")
        following = commits.at(revision + 1) if revision else None
        if following is not None:  # the history as it stood at that revision
            last = following.seq - 1
        else:
            revision = 0
        page = _int(q.get("page"), "page")
        first = page * TIMELINE_PAGE + 1
        seqs = list(range(first, min(first + TIMELINE_PAGE, last + 1)))
        rows = []
        for e in read_events(self.mz, context, seqs, reveal=reveal):
            if e is None:
                continue
            row = self._event_json(e)
            if e.HasField("activation"):
                row["activation"] = e.activation
            commit = by_seq.get(e.seq)
            if commit is not None:
                row["transaction"] = self._receipt(context, commit, reveal)
            rows.append(row)
        return {"context": context, "page": page, "revision": revision,
                "pages": max(1, -(-last // TIMELINE_PAGE)), "events": rows,
                "activations": commits.activations}

    def _receipt(self, context: str, commit, reveal: bool) -> dict:
        """The commit's receipt as far as the history tells it: each op's outcome, with
        the frame revision an as-of read at the commit's revision gives."""
        lines = []
        for i, op in enumerate(commit.ops[:RECEIPT_OPS]):
            line = {"index": i, "op": op.op, "target": op.target,
                    "outcome": OUTCOMES.get(op.op, op.op)}
            if op.name:
                line["target"] = f"{op.target} {op.name} {op.object}"
            elif op.op in ("create", "derive", "revise", "retire", "restore") \
                    and not op.target.startswith("@e"):
                try:
                    f = self.mz.frame(context, op.target, at_revision=commit.revision,
                                      reveal_secrets=reveal)
                    line["frame_revision"] = f.revision
                    if op.op == "retire":
                        line["outcome"] = f.state
                except NotFoundError:
                    pass
            lines.append(line)
        return {**_commit_json(commit), "results": lines,
                "more_ops": max(0, len(commit.ops) - RECEIPT_OPS)}

    def search(self, context: str, q: dict) -> dict:
        reply = self.mz.search(context, q.get("q", ""), since=q.get("since", ""),
                               until=q.get("until", ""), mode=q.get("mode", ""),
                               limit=_int(q.get("limit"), "limit", 20),
                               cursor=q.get("cursor", ""), min_commit_seq=0)
        return {"hits": [_plain(h) for h in reply.results], "next_cursor": reply.next_cursor,
                "lag": reply.lag, "empty": reply.empty}

    def encoding(self, context: str, q: dict) -> dict:
        snapshot = q.get("snapshot", "")
        record = self.mz.show_snapshot(context, snapshot)
        if record.get("scope", {}).get("reveal_secrets") and q.get("reveal") != "1":
            raise MorphzError("FORBIDDEN", f"snapshot {snapshot} was compiled revealing "
                              "secrets: ask to reveal them to see its text",
                              code="PERMISSION_DENIED",
                              details={"snapshot": snapshot, "right": "reveal"})
        replay = self.mz.replay_snapshot(context, snapshot)
        return _encoding_json(record, replay.text, snapshot,
                              {"match": replay.match, "hash": replay.hash,
                               "problems": list(replay.problems)})

    def activations(self, context: str) -> dict:
        """How many activations the history holds: the latest is a<count> (the ids count
        up from a1), what the encoding view offers to compile again for."""
        count = self.commits(context).activations
        return {"count": count, "latest": f"a{count}" if count else ""}

    def compile(self, context: str, q: dict) -> dict:
        activation = q.get("activation", "")
        if not activation:  # an empty one would claim the session's pending inputs
            raise input_error("compile needs an existing activation (aN): the inspector "
                              "claims no inputs", field="activation")
        session = q.get("session", "")
        if not session:
            raise input_error("compile needs the activation's session", field="session")
        enc = self.mz.compile(context, session=session, activation=activation,
                              budget_bytes=_int(q.get("budget_bytes"), "budget_bytes"))
        record = self.mz.show_snapshot(context, enc.snapshot)
        return _encoding_json(record, enc.text, enc.snapshot, None)

    def diff(self, context: str, q: dict) -> dict:
        reveal = q.get("reveal") == "1"
        a = _int(q.get("from"), "from")
        b = _int(q.get("to"), "to")
        if not 0 < a < b:
            raise input_error(f"from must be below to, both revisions from 1 (got {a}, "
                              f"{b})", field="from")
        before = self.mind_at(context, a, reveal)
        after = self.mind_at(context, b, reveal)
        created, revised, retired, restored = [], [], [], []
        for fid, f in after.frames.items():
            old = before.frames.get(fid)
            if old is None:
                created.append(f.to_json())
                continue
            if old.revision != f.revision:
                revised.append({"id": fid, "from_revision": old.revision,
                                "to_revision": f.revision, "state": f.state,
                                "body_diff": body_diff(old.body, f.body)})
            if old.state == "active" and f.state != "active":
                retired.append({"id": fid, "state": f.state, "due_tick": f.due_tick})
            elif old.state != "active" and f.state == "active":
                restored.append({"id": fid})
        rel = [{"subject": s, "name": n, "object": o}
               for s, n, o in sorted(after.relations - before.relations)]
        unrel = [{"subject": s, "name": n, "object": o}
                 for s, n, o in sorted(before.relations - after.relations)]
        commits = self.commits(context)
        return {"context": context, "from": before.revision, "to": after.revision,
                "current_revision": after.current_revision, "created": created,
                "revised": revised, "retired": retired, "restored": restored,
                "relations_added": rel, "relations_removed": unrel,
                "exact_relations": before.exact_relations and after.exact_relations,
                "transactions": [_commit_json(c) for c in commits.all[a:b]]}


def _commit_json(c) -> dict:
    return {"revision": c.revision, "ref": c.ref, "time": c.time, "session": c.session,
            "activation": c.activation, "reason": c.reason, "ops": len(c.ops)}


def _encoding_json(record: dict, text: str, snapshot: str,
                   replay: Optional[dict]) -> dict[str, Any]:
    items = [{k: i.get(k) for k in ("region", "kind", "key", "start", "end", "bytes",
                                     "residency", "shown_bytes", "total_bytes", "state")}
             for i in record.get("items", [])]
    regions = []
    for r in record.get("regions", []):
        body = text[r["start"]:r["end"]]
        regions.append({"name": r["name"], "start": r["start"], "end": r["end"],
                        "bytes": len(body.encode("utf-8")), "text": body,
                        "previews": sum(1 for i in items if i["region"] == r["name"]
                                        and i["residency"] == "preview")})
    return {"snapshot": snapshot, "revision": record.get("revision"),
            "tick": record.get("tick"), "activation": record.get("activation", {}),
            "session": record.get("session"), "budget": record.get("budget", {}),
            "pressure": record.get("pressure", {}), "bytes": record.get("bytes"),
            "hash": record.get("hash"), "regions": regions, "items": items,
            "omitted": record.get("omitted", []), "replay": replay}
