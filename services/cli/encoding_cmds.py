"""`morphz context ...` subcommands of the encoding service (see EXTENSIONS in main.py).

  morphz context encode --context C --session S [--budget BYTES] [--format=json|text]
  morphz context encoding show|replay|check SNAPSHOT [--context C]
  morphz context encoding list [--session S] [--activation A] [--since T] [--until T]
                               [--limit N] [--cursor C]
  morphz context evaluation show ACTIVATION

`encode` in text form prints the encoding exactly as the model sees it, followed by
`;` comment lines (the S-expression reader skips them) naming the snapshot and hash;
the JSON form is the whole reply, snapshot id and hash beside the text.
"""
from __future__ import annotations

import argparse
from types import MappingProxyType
from typing import Callable, TextIO

from morphz.client import Client
from morphz.services.cli.common import always_ok, print_json, unsigned
from morphz.services.cli.inputs import input_error
from morphz.services.cli.replies import plain


def _binding(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def add_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> list[str]:
    """Add this service's subparsers with add(name, help); return their names."""
    p = add("encode", "compile the Context Encoding for one evaluation of a session")
    p.add_argument("--session", required=True)
    p.add_argument("--activation", default="",
                   help="compile again for this activation (default: claim a new one)")
    p.add_argument("--budget", metavar="BYTES", type=unsigned(63), default=0,
                   help="byte budget of the encoding (default: 1 MiB)")
    p.add_argument("--token-budget", metavar="TOKENS", type=unsigned(63), default=0,
                   help="token-estimate budget (default: none)")
    p.add_argument("--preview-bytes", metavar="BYTES", type=unsigned(63), default=0,
                   help="observations larger than this show as previews (default: 4096)")
    p.add_argument("--must-read", metavar="REF", action="extend", nargs="+", default=[],
                   help="@eN refs or frame ids that must appear whole")
    p.add_argument("--model", default="")
    p.add_argument("--profile", default="", help="the bound harness definition")
    p.add_argument("--bind", metavar="NAME=VALUE", type=_binding, action="append", default=[],
                   help="a dynamic binding of the evaluation environment")
    p.add_argument("--capabilities", action="store_true",
                   help="include the cognitive-capabilities region")
    p.add_argument("--parent", default="", help="narrow this snapshot's scope")
    p.add_argument("--scope-kind", dest="scope_kinds", action="append", default=[])
    p.add_argument("--scope-frame", dest="scope_frames", action="append", default=[])
    p.add_argument("--since", default="", help="scope: inclusive, with an explicit offset")
    p.add_argument("--until", default="", help="scope: exclusive, with an explicit offset")
    p.add_argument("--reveal-secrets", action="store_true",
                   help="scope: render secrets as stored (default: [secret REF])")

    p = add("encoding", "show, replay or check an encoding snapshot, or list a context's "
            "snapshots newest first")
    p.add_argument("verb", choices=("show", "replay", "check", "list"))
    p.add_argument("snapshot", metavar="SNAPSHOT", nargs="?", default="",
                   help="the snapshot to show, replay or check (not with list)")
    p.add_argument("--session", default="", help="list: this session's snapshots")
    p.add_argument("--activation", default="", help="list: this activation's snapshots")
    p.add_argument("--since", default="", help="list: frozen at or after (ISO 8601, offset)")
    p.add_argument("--until", default="", help="list: frozen before (ISO 8601, offset)")
    p.add_argument("--limit", type=unsigned(32), default=0, help="list: a page's size "
                   "(1..100; default 20)")
    p.add_argument("--cursor", default="", help="list: next_cursor of the page before")

    p = add("evaluation", "show one evaluation (an activation) step by step: its inputs, "
            "snapshots, recall calls, actions, transactions and the Mind's change")
    p.add_argument("verb", choices=("show",))
    p.add_argument("activation", metavar="ACTIVATION")
    return list(COMMANDS)


def cmd_encode(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.compile(
        args.context, session=args.session, activation=args.activation,
        budget_bytes=args.budget,
        budget_tokens=args.token_budget, preview_bytes=args.preview_bytes,
        must_read=args.must_read, parent_snapshot=args.parent, model=args.model,
        evaluation_profile=args.profile, bindings=dict(args.bind),
        capabilities=args.capabilities,
        scope={"kinds": args.scope_kinds, "frames": args.scope_frames, "since": args.since,
               "reveal_secrets": args.reveal_secrets,
               "until": args.until}))


def cmd_encoding(client: Client, args: argparse.Namespace) -> dict:
    if args.verb == "list":
        if args.snapshot:
            raise input_error("encoding list takes no SNAPSHOT: filter with --session, "
                              "--activation, --since, --until", field="snapshot")
        return {"verb": "list", **plain(client.list_snapshots(
            args.context, session=args.session, activation=args.activation,
            since=args.since, until=args.until, limit=args.limit, cursor=args.cursor))}
    if not args.snapshot:
        raise input_error(f"encoding {args.verb} needs a SNAPSHOT (encoding list names "
                          "them)", field="snapshot")
    listing_only = [f for f in ("session", "activation", "since", "until", "cursor")
                    if getattr(args, f)] + (["limit"] if args.limit else [])
    if listing_only:
        raise input_error(f"--{listing_only[0]} goes with encoding list only",
                          field=listing_only[0])
    if args.verb == "show":
        return {"verb": "show", "snapshot": client.show_snapshot(args.context, args.snapshot)}
    if args.verb == "replay":
        return {"verb": "replay", **plain(client.replay_snapshot(args.context, args.snapshot))}
    return {"verb": "check", **plain(client.check_snapshot(args.context, args.snapshot))}


def cmd_evaluation(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.evaluation(args.context, args.activation))


def render_encode(r: dict, out: TextIO) -> None:
    print(r["text"], file=out)
    p = r["pressure"]
    print(f"; snapshot {r['snapshot']} {r['hash']}", file=out)
    print(f"; {r['bytes']} bytes of {p['limit_bytes']} ({p['level']}), activation "
          f"{r['activation']}, revision {r['revision']}, tick {r['tick']}", file=out)


def _render_check(r: dict, out: TextIO) -> None:
    verdict = "current" if r["current"] else "CHANGED: invalid for new use"
    print(f"snapshot {r['snapshot']} (revision {r['snapshot_revision']}) checked at revision "
          f"{r['checked_revision']}: {verdict} ({r['inputs_checked']} inputs)", file=out)
    for d in r["changed"]:
        revs = (f" (revision {d['recorded_revision']} -> {d['current_revision']})"
                if d["recorded_revision"] or d["current_revision"] else "")
        print(f"  {d['kind']} {d['key']}: {d['reason']}{revs}", file=out)


def _render_list(r: dict, out: TextIO) -> None:
    for e in r["snapshots"]:
        print(f"{e['time']}  {e['snapshot']}  {e['session']} {e['activation']}  "
              f"{e['bytes']}/{e['limit_bytes']} B  {e['tokens']} tok  {e['level']}  "
              f"r{e['revision']}  {e['hash']}" +
              (f"  parent {e['parent']}" if e["parent"] else ""), file=out)
    if not r["snapshots"]:
        print("no snapshots", file=out)
    if r["next_cursor"]:
        print(f"next page: --cursor {r['next_cursor']}", file=out)


def render_encoding(r: dict, out: TextIO) -> None:
    if r["verb"] == "list":
        _render_list(r, out)
    elif r["verb"] == "show":
        print_json(r["snapshot"], out)
    elif r["verb"] == "replay":
        verdict = "same bytes and hash" if r["match"] else "MISMATCH"
        print(f"replay {r['snapshot']}: {verdict}", file=out)
        print(f"hash:   {r['hash']}", file=out)
        print(f"replay: {r['replay_hash']}", file=out)
        for p in r.get("problems") or []:
            print(f"problem: {p}", file=out)
        _render_check(r["dependencies"], out)
    else:
        _render_check(r, out)


def render_evaluation(r: dict, out: TextIO) -> None:
    state = "delivered" if r["delivered"] else "open"
    print(f"evaluation {r['activation']} of session {r['session']} ({state}), tick "
          f"{r['tick']}, at {r['time'] or '?'}; previous {r['previous'] or '-'}, next "
          f"{r['next'] or '-'}", file=out)
    for e in r["inputs"]:
        print(f"  input {e['ref']} {e['kind']}: {e['preview'][:100]}", file=out)
    for e in r["snapshots"]:
        print(f"  snapshot {e['snapshot']} {e['hash']} {e['bytes']}/{e['limit_bytes']} B "
              f"{e['level']} (revision {e['revision']})", file=out)
    for c in r["recalls"]:
        print(f"  recall {c['ref']} {c['op']} {c['query']!r}: {c['hit_count']} found "
              f"{' '.join(c['hits'][:8])}", file=out)
    for a in r["actions"]:
        print(f"  action {a['ref']}: {a['preview'][:80]} -> {a['result'] or 'no result'}",
              file=out)
    for t in r["transactions"]:
        print(f"  transaction {t['ref']} revision {t['revision'] or '?'} (base "
              f"{t['base_version']}){' reason: ' + t['reason'] if t['reason'] else ''}",
              file=out)
    mind = r["mind"]
    print(f"  mind r{mind['from_revision']} -> r{mind['to_revision']}", file=out)
    for c in mind["changes"]:
        print(f"    {c['change']} {c['kind']} {c['key']}", file=out)
    if not r["complete"]:
        print(f"  (history read up to @e{r['scanned_to']} only)", file=out)


def encoding_exit(r: dict) -> int:
    """show: 0; replay: 0 when it reproduced the snapshot; check: 0 when still current."""
    if r["verb"] == "replay":
        return 0 if r["match"] else 1
    if r["verb"] == "check":
        return 0 if r["current"] else 1
    return 0


SERVICE = "encoding"  # the service these commands call (services/cli/connect.py server_for)
# name -> (call(client, args) -> dict, render(reply, out), exit status of a reply)
COMMANDS: MappingProxyType = MappingProxyType({
    "encode": (cmd_encode, render_encode, always_ok),
    "encoding": (cmd_encoding, render_encoding, encoding_exit),
    "evaluation": (cmd_evaluation, render_evaluation, always_ok),
})
