"""`morphz context recall ...` and `morphz context recall-index ...` (see EXTENSIONS in
main.py): search, read, frame traversal, and the derived index's inspect/rebuild."""
from __future__ import annotations

import argparse
import sys
import threading
from types import MappingProxyType
from typing import Callable, Optional, TextIO

from morphz.client import Client, Evaluation
from morphz.services.cli import replies
from morphz.services.cli.common import (always_ok, client_auth_options, global_options,
                                        unsigned)
from morphz.services.cli.replies import job, plain

DIRECTIONS = ("ancestors", "descendants", "both")


def _evaluation(args: argparse.Namespace) -> Optional[Evaluation]:
    """The evaluation a call is recorded for; none when neither option is given (the
    service reads an empty one as none)."""
    if not (args.for_session or args.activation):
        return None
    return Evaluation(session=args.for_session, activation=args.activation)


def add_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> list[str]:
    """Add this service's subparsers with add(name, help); return their names."""
    common = argparse.ArgumentParser(add_help=False)
    global_options(common, None)
    client_auth_options(common, None)

    recall = add("recall", "recall events and frames: search, read, frame traversal")
    sub = recall.add_subparsers(dest="recall_action", required=True, metavar="WHAT")

    def evaluation_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--for-session", default="", metavar="SESSION",
                       help="record the result as a recall observation in this session "
                       "(with --activation)")
        p.add_argument("--activation", default="", metavar="ID",
                       help="the evaluation's activation (with --for-session)")

    p = sub.add_parser("search", parents=[common], help="search by words and/or time range")
    p.add_argument("query", nargs="?", default="", help="words (Chinese, English or both)")
    p.add_argument("--since", default="", help="inclusive, ISO 8601 with offset")
    p.add_argument("--until", default="", help="exclusive, ISO 8601 with offset")
    p.add_argument("--limit", type=unsigned(32), default=20, help="1..100 (default 20)")
    p.add_argument("--kind", dest="kinds", action="append", default=[],
                   choices=("event", "frame"), help="only events or only frames")
    p.add_argument("--state", dest="states", action="append", default=[],
                   choices=("active", "retiring", "retired"), help="lifecycle state filter")
    p.add_argument("--session", dest="sessions", action="append", default=[],
                   help="only events of this session")
    p.add_argument("--cursor", default="", help="next_cursor of the previous page")
    p.add_argument("--mode", default="", choices=("lexical", "vector", "hybrid"),
                   help="hybrid (both legs fused, the server's default: lexical hits that "
                   "hold less than half the query abstain), lexical (BM25) or vector "
                   "(embeddings); hits show each leg's rank")
    p.add_argument("--min-commit-seq", type=unsigned(64), default=0,
                   help="read your writes: the context version (commit_seq, as a write's "
                   "reply or `context status` gives it) the index must reach first; the "
                   "reply's unclosed_lag is what a bounded wait could not close")
    evaluation_options(p)

    p = sub.add_parser("read", parents=[common], help="read full content in pages")
    p.add_argument("ref", metavar="REF", help="@eN, a full event id or a frame id")
    p.add_argument("--offset", type=unsigned(64), default=0, help="in characters")
    p.add_argument("--limit", type=unsigned(64), default=0, help="characters (default 16384)")
    evaluation_options(p)

    p = sub.add_parser("frame", parents=[common], help="walk the graph from a frame")
    p.add_argument("frame_id", metavar="FRAME")
    p.add_argument("--depth", type=unsigned(32), default=None, help="0..4 (default 2)")
    p.add_argument("--direction", default="ancestors", choices=DIRECTIONS)
    p.add_argument("--include-events", action="store_true", help="full event text")
    p.add_argument("--include-bodies", action="store_true", help="full frame bodies")
    p.add_argument("--max-nodes", type=unsigned(32), default=0, help="nodes per page, <= 128")
    p.add_argument("--max-bytes", type=unsigned(64), default=0, help="page size in bytes")
    p.add_argument("--cursor", default="", help="next_cursor of the previous page")
    evaluation_options(p)

    index = add("recall-index", "inspect or rebuild the derived recall index")
    isub = index.add_subparsers(dest="index_action", required=True, metavar="WHAT")
    for name, help_ in (("inspect", "documents, terms, position and lag"),
                        ("rebuild", "drop and rebuild from events and frames")):
        p = isub.add_parser(name, parents=[common], help=help_)
        p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")
        if name == "rebuild":
            p.add_argument("--detach", action="store_true",
                           help="run it as a server-side job: print the job at once (its id "
                           "for `morphz job get|cancel ID`) instead of waiting")
    return list(COMMANDS)


# -- calls ------------------------------------------------------------------------------
def call_recall(client: Client, args: argparse.Namespace) -> dict:
    if args.recall_action == "search":
        # min_commit_seq as given: a one-shot command has no writes of its own to wait for
        return replies.search(client.search(
            args.context, args.query, since=args.since, until=args.until, limit=args.limit,
            kinds=args.kinds, states=args.states, sessions=args.sessions, cursor=args.cursor,
            mode=args.mode, evaluation=_evaluation(args),
            min_commit_seq=args.min_commit_seq), args.mode)
    if args.recall_action == "read":
        return plain(client.read(args.context, args.ref, offset=args.offset,
                                 limit=args.limit, evaluation=_evaluation(args)))
    return plain(client.traverse(args.context, args.frame_id, depth=args.depth,
                                 direction=args.direction, include_bodies=args.include_bodies,
                                 include_events=args.include_events, max_nodes=args.max_nodes,
                                 max_bytes=args.max_bytes, cursor=args.cursor,
                                 evaluation=_evaluation(args)))


def call_index(client: Client, args: argparse.Namespace) -> dict:
    context = args.context if args.context_name is None else args.context_name
    if args.index_action == "inspect":
        return plain(client.inspect_index(context))
    if args.detach:
        return job(client.start_job(context, "rebuild-index"))
    if not sys.stderr.isatty():
        return plain(client.rebuild_index(context))
    done = threading.Event()
    bar = threading.Thread(target=_progress, args=(client, context, done, sys.stderr),
                           daemon=True)
    bar.start()
    try:
        return plain(client.rebuild_index(context))
    finally:
        done.set()
        bar.join(2)


def _progress(client: Client, context: str, done: threading.Event, out: TextIO) -> None:
    """Draw the rebuild's progress (polled from inspect) until it ends."""
    while not done.wait(0.25):
        try:
            p = plain(client.inspect_index(context))["rebuild"]
        except Exception:  # noqa: BLE001 - the bar is cosmetic
            continue
        if p and p["total"]:
            filled = int(30 * p["done"] / p["total"])
            out.write(f"\rrebuilding {context} [{'#' * filled}{'.' * (30 - filled)}] "
                      f"{p['done']}/{p['total']}")
            out.flush()
    out.write("\n")


# -- text rendering ------------------------------------------------------------------------
def occurred(h: dict) -> str:
    """A hit's source time, where it has one (since/until compared that one)."""
    return f" (occurred {h['occurred_at']})" if h.get("occurred_at") else ""


def render_recall(r: dict, out: TextIO) -> None:
    if "results" in r:
        for h in r["results"]:
            legs = (f" (lexical #{h['lexical_rank'] or '-'}, vector #{h['vector_rank'] or '-'})"
                    if "vector_rank" in h else "")
            print(f"{h['score']:8.3f} {h['kind']:5} {h['ref'] or h['id']} [{h['state'] or '-'}] "
                  f"{h['time']}{occurred(h)}{legs}", file=out)
            print(f"         {h['preview']}", file=out)
        if not r["results"]:
            print(f"no results ({r.get('empty') or 'end of results'})", file=out)
    elif "nodes" in r:
        print(f"{r['root']} {r['direction']} depth {r['depth']} (version {r['version']})",
              file=out)
        for n in r["nodes"]:
            label = n["ref"] or n["id"]
            print(f"{'  ' * n['depth']}{n['kind']} {label} [{n['state'] or '-'}]"
                  f"{' rev ' + str(n['revision']) if n['kind'] == 'frame' else ''}", file=out)
            content = n["body"] or n["text"] or n["preview"]
            if content:
                print(f"{'  ' * n['depth']}  {content}", file=out)
        for e in r["edges"]:
            print(f"edge {e['from']} -{e['name']}-> {e['to']}", file=out)
    else:
        print(f"{r['kind']} {r['ref'] or r['id']} [{r['state'] or '-'}] chars "
              f"{r['offset']}..{r['next_offset']} of {r['total_chars']}", file=out)
        print(r["text"], file=out)
    if r.get("next_cursor"):
        print(f"next_cursor: {r['next_cursor']}", file=out)
    if r.get("observation_ref"):
        print(f"recorded as {r['observation_ref']}", file=out)


def render_index(r: dict, out: TextIO) -> None:
    for key in ("context", "documents", "events", "frames", "terms", "position",
                "head", "lag", "feed_position", "feed_head", "feed_lag", "feed_held", "index_bytes",
                "path"):
        print(f"{key}: {r.get(key, 0)}", file=out)
    vec = r.get("vectors") or {}
    print(f"embedder: {r.get('embedder', '')}", file=out)
    print(f"vectors: {vec.get('count', 0)} built by {vec.get('built_by') or '-'}"
          f"{'' if vec.get('current') else ' (stale: rebuild)'}, fingerprint "
          f"{(vec.get('fingerprint') or '-')[:16]}", file=out)
    pace = vec.get("documents_per_second") or 0
    print(f"vector leg: position {vec.get('position', 0)}, lag {vec.get('lag', 0)}; "
          f"{vec.get('embed_workers', 0)} embedding workers"
          + (f", {pace:.1f} documents/s lately" if pace else "")
          + (f", about {vec['eta_seconds']:.0f} s to go" if vec.get("eta_seconds") else ""),
          file=out)
    last = r.get("last_rebuild")
    if last:
        print(f"last_rebuild: {last['at']} ({last['duration_ms']} ms, "
              f"{last['documents']} documents)", file=out)
    else:
        print("last_rebuild: -", file=out)


SERVICE = "recall"  # the service these commands call (services/cli/connect.py server_for)
# name -> (call(client, args) -> dict, render(reply, out), exit status of a reply)
COMMANDS: MappingProxyType = MappingProxyType({
    "recall": (call_recall, render_recall, always_ok),
    "recall-index": (call_index, render_index, always_ok),
})
