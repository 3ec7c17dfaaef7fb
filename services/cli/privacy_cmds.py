"""`morphz context erase` and `morphz context delete` (docs/privacy.md): remove content,
or a whole context, from every copy the service holds, and show what went."""
from __future__ import annotations

import argparse
import json
import sys
import time
from types import MappingProxyType
from typing import Callable, TextIO

from morphz.client import Client
from morphz.services.cli.connect import check_server, server_for
from morphz.services.cli.inputs import input_error
from morphz.services.cli.replies import plain

SERVICE = "transaction"
ERASABLE = ("user-message", "tool-result", "approval", "external", "message", "continuation",
            "recall", "action")
RECALL_POLL_SECONDS = 0.2
SHOWN = 20  # refs a text rendering lists of each kind (JSON lists them all)


def cmd_erase(client: Client, args: argparse.Namespace) -> dict:
    """The erasure, then (unless --no-wait) the recall index's: until it holds the
    erasure and has rewritten its files (its erasure_pending back to 0), or --timeout."""
    context = args.context_name or args.context
    if not args.dry_run and not args.reason.strip():
        raise input_error("an erasure needs --reason", field="reason")
    reply = plain(client.erase(
        context, refs=args.refs, session=args.session, actor=args.actor, kinds=args.kinds,
        phrase=args.phrase, since=args.since, until=args.until, reason=args.reason,
        dry_run=args.dry_run, timeout=args.timeout))
    if args.dry_run or not reply.get("erasures") or args.no_wait:
        return reply
    return dict(reply, recall=_recall_caught_up(client, args, context,
                                                reply.get("commit_seq", 0)))


def _recall_caught_up(client: Client, args: argparse.Namespace, context: str,
                      commit_seq: int) -> dict:
    """The recall index's state once it applied the erasure and rewrote its files (or
    where it stood at the deadline: `purged` False)."""
    check_server(server_for("recall", args.server))  # the erasure's service was checked
    give_up = time.monotonic() + args.timeout
    while True:
        status = client.inspect_index(context)
        done = status.position >= commit_seq and not status.erasure_pending
        if done or time.monotonic() >= give_up:
            return {"purged": done, "position": status.position,
                    "erasure_pending": status.erasure_pending}
        time.sleep(RECALL_POLL_SECONDS)


def render_erase(r: dict, out: TextIO) -> None:
    what = (f"{len(r.get('events', []))} events, {len(r.get('transactions', []))} "
            f"transactions' frame bodies, {len(r.get('frames', []))} frames "
            f"({len(r.get('frame_versions', []))} versions), {len(r.get('checkpoints', []))} "
            f"checkpoints; {len(r.get('snapshots', []))} encoding snapshots showed them")
    if r.get("dry_run"):
        print(f"would erase in {r['context']}: {what}", file=out)
    elif not r.get("erasures"):
        print(f"nothing to erase in {r['context']}", file=out)
        return
    else:
        print(f"erased in {r['context']} ({' '.join(r['erasures'])}): {what}", file=out)
    for key in ("events", "transactions", "frame_versions", "checkpoints", "snapshots"):
        items = r.get(key, [])
        if items:
            more = f" ... (+{len(items) - SHOWN})" if len(items) > SHOWN else ""
            print(f"  {key}: {' '.join(items[:SHOWN])}{more}", file=out)
    done = r.get("reclaimed")
    if done:
        print(f"store rewritten ({done['engine']}): {done['bytes_before']} -> "
              f"{done['bytes_after']} bytes in {done['duration_ms']} ms", file=out)
    recall = r.get("recall")
    if recall:
        print("recall index rewritten" if recall["purged"] else
              f"recall index NOT rewritten yet (erasure_pending {recall['erasure_pending']})",
              file=out)


def erase_exit(r: dict) -> int:
    """Non-zero when the recall index was not rewritten before the deadline."""
    return 0 if (r.get("recall") or {}).get("purged", True) else 1


def cmd_delete(client: Client, args: argparse.Namespace) -> dict:
    if not args.reason.strip():
        raise input_error("a deletion needs --reason", field="reason")
    return plain(client.delete_context(args.context_name, reason=args.reason,
                                       timeout=args.timeout))


def render_delete(r: dict, out: TextIO) -> None:
    print(f"deleted {r['context']} ({r['event_count']} events): its name is free", file=out)
    done = r.get("reclaimed")
    if done:
        print(f"store rewritten ({done['engine']}): {done['bytes_before']} -> "
              f"{done['bytes_after']} bytes in {done['duration_ms']} ms", file=out)


EXPORT_TIMEOUT = 3600.0  # the whole stream's deadline, at least (a large context)


def cmd_export(client: Client, args: argparse.Namespace) -> dict:
    """The lines on stdout as they come (import's format), a progress line on stderr; the
    reply (a summary) goes to stderr too, so stdout is the file."""
    lines, skipped, out = 0, {}, sys.stdout
    pages = client.export(args.context_name or args.context, since=args.since,
                          until=args.until, reveal_secrets=args.reveal_secrets,
                          timeout=max(args.timeout, EXPORT_TIMEOUT))
    for page in map(plain, pages):
        for e in page.get("events", []):
            line = {"kind": e["kind"], "session": e.get("session", ""),
                    "actor": e.get("actor", ""), "text": e.get("text", ""),
                    "occurred_at": e.get("occurred_at", "")}
            line.update({k: True for k in ("secret", "erased") if e.get(k)})
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            lines += 1
        skipped = page.get("skipped") or skipped
        if not args.no_progress:
            sys.stderr.write(f"\rexport {page.get('done', 0)}/{page.get('total', 0)} events, "
                             f"{lines} lines")
            sys.stderr.flush()
    out.flush()
    if not args.no_progress:
        sys.stderr.write("\n")
    return {"context": args.context_name or args.context, "lines": lines,
            "skipped": {k: int(v) for k, v in skipped.items()}}


def render_export(r: dict, out: TextIO) -> None:
    skipped = ", ".join(f"{n} {k}" for k, n in sorted(r["skipped"].items()))
    print(f"exported {r['lines']} lines of {r['context']}"
          + (f" (no import line for: {skipped})" if skipped else ""), file=out)


COMMANDS = MappingProxyType({"erase": (cmd_erase, render_erase, erase_exit),
                             "delete": (cmd_delete, render_delete, lambda _: 0),
                             "export": (cmd_export, render_export, lambda _: 0)})


def add_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> list[str]:
    p = add("erase", "remove content (events, and what was derived only from them) from "
            "every copy the server holds; administrators (the erase right), with a reason")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")
    p.add_argument("--ref", dest="refs", metavar="@eN", action="extend", nargs="+",
                   default=[], help="these events")
    p.add_argument("--session", default="", help="the events of this session")
    p.add_argument("--actor", default="", help="the events of this actor")
    p.add_argument("--phrase", default="", help="the events whose text holds this phrase "
                   "(case and width folded); never recorded by the erasure")
    p.add_argument("--kind", dest="kinds", action="append", default=[], choices=ERASABLE,
                   help="only events of this kind (repeatable)")
    p.add_argument("--since", default="", metavar="TIME",
                   help="occurred at or after (ISO 8601 with an offset)")
    p.add_argument("--until", default="", metavar="TIME", help="occurred before")
    p.add_argument("--reason", default="", help="why (required; recorded with the erasure)")
    p.add_argument("--dry-run", action="store_true",
                   help="show what it would take: events, transactions' frame bodies, "
                   "frames and versions derived only from them, snapshots that showed them")
    p.add_argument("--no-wait", action="store_true",
                   help="do not wait for the recall index to rewrite its files")

    p = add("export", "write a context's events as the lines `morphz context import` "
            "reads (JSONL on stdout; progress and a summary on stderr)")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")
    p.add_argument("--since", default="", metavar="TIME", help="occurred at or after")
    p.add_argument("--until", default="", metavar="TIME", help="occurred before")
    p.add_argument("--reveal-secrets", action="store_true",
                   help="secret events' text as stored (the reveal right); else their "
                   "[secret @eN] marker")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")

    p = add("delete", "remove a context whole (events, Mind, snapshots, index, vectors, "
            "jobs); its name is free again; administrators, with a reason")
    p.add_argument("context_name", metavar="CONTEXT")
    p.add_argument("--reason", default="", help="why (required; written to the server's "
                   "admin log)")
    return list(COMMANDS)
