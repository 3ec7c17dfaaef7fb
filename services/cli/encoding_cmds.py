"""`morphz context ...` subcommands of the encoding service (see EXTENSIONS in main.py).

  morphz context encode --context C --session S [--budget BYTES] [--format=json|text]
  morphz context encoding show|replay|check SNAPSHOT [--context C]

`encode` in text form prints the encoding exactly as the model sees it, followed by
`;` comment lines (the S-expression reader skips them) naming the snapshot and hash;
the JSON form is the whole reply, snapshot id and hash beside the text.
"""
from __future__ import annotations

import argparse
from types import MappingProxyType
from typing import Callable, TextIO

import grpc

from morphz.services.encoding.client import EncodingClient
from morphz.services.cli.common import always_ok, print_json, unsigned


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

    p = add("encoding", "show, replay or check an encoding snapshot")
    p.add_argument("verb", choices=("show", "replay", "check"))
    p.add_argument("snapshot", metavar="SNAPSHOT")
    return list(COMMANDS)


def _client(channel: grpc.Channel, args: argparse.Namespace) -> EncodingClient:
    return EncodingClient(channel, timeout=args.timeout)


def cmd_encode(channel: grpc.Channel, args: argparse.Namespace) -> dict:
    return _client(channel, args).compile(
        args.context, args.session, activation=args.activation, budget_bytes=args.budget,
        budget_tokens=args.token_budget, preview_bytes=args.preview_bytes,
        must_read=args.must_read, parent_snapshot=args.parent, model=args.model,
        evaluation_profile=args.profile, bindings=dict(args.bind),
        capabilities=args.capabilities,
        scope={"kinds": args.scope_kinds, "frames": args.scope_frames, "since": args.since,
               "reveal_secrets": args.reveal_secrets,
               "until": args.until})


def cmd_encoding(channel: grpc.Channel, args: argparse.Namespace) -> dict:
    client = _client(channel, args)
    if args.verb == "show":
        return {"verb": "show", "snapshot": client.show(args.context, args.snapshot)}
    if args.verb == "replay":
        return {"verb": "replay", **client.replay(args.context, args.snapshot)}
    return {"verb": "check", **client.check(args.context, args.snapshot)}


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


def render_encoding(r: dict, out: TextIO) -> None:
    if r["verb"] == "show":
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


def encoding_exit(r: dict) -> int:
    """show: 0; replay: 0 when it reproduced the snapshot; check: 0 when still current."""
    if r["verb"] == "replay":
        return 0 if r["match"] else 1
    if r["verb"] == "check":
        return 0 if r["current"] else 1
    return 0


SERVICE = "encoding"  # the service these commands call (services/cli/connect.py server_for)
# name -> (call(channel, args) -> dict, render(reply, out), exit status of a reply)
COMMANDS: MappingProxyType = MappingProxyType({
    "encode": (cmd_encode, render_encode, always_ok),
    "encoding": (cmd_encoding, render_encoding, encoding_exit),
})
