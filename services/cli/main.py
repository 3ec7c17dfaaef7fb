"""`morphz`: the command-line interface.

`morphz serve` runs the all-in-one server (or one service: `serve storage|transaction|
recall|encoding`); `morphz context ...` calls a service over gRPC, one client call per
command, at --server, else at $MORPHZ_<SERVICE> or $MORPHZ_SERVER (server_for), as
`morphz backup` calls the storage service; `morphz restore` works offline; `morphz mcp`
serves Morphz to MCP clients (mcp_cmds.py). JSON
output (`--format=json`) is the core's reply dict as is; text output is a readable
rendering of the same dict.

Every failure the caller can act on - a MorphzError from the server, a transport
error (UNAVAILABLE, DEADLINE_EXCEEDED) or a bad local input (missing file, invalid
UTF-8, bad --server) - prints `{"error": {code, reason, message, details}}` as JSON on
stdout in both formats and exits 1. argparse usage errors keep exit status 2.
"""
from __future__ import annotations

import argparse
import os
import sys
from types import MappingProxyType
from typing import Callable, Optional, TextIO

import grpc

from morphz.services.cli import (backup_cmds, encoding_cmds, import_cmds, job_cmds, mcp_cmds,
                                 recall_cmds, space)
from morphz.services.cli.common import (DEFAULT_CONTEXT, always_ok, client_auth_options,
                                        global_options, print_json, seconds_up_to_a_day,
                                        unsigned)
from morphz.services.cli.tracing import command_trace
from morphz.services.server.defaults import DEFAULT_LISTEN, EMBEDDER_ENV, RECALL_IDLE_SECONDS
from morphz.services.storage.space import DEFAULT_MAX_MAP_SIZE
from morphz.services.transaction.client import DEFAULT_TIMEOUT, TransactionClient
from morphz.services.transaction.core.ownership import DEFAULT_TTL as DEFAULT_LEASE_TTL
from morphz.shared.auth import DEFAULT_SERVICE_PRINCIPAL
from morphz.shared.errors import MorphzError
from morphz.shared.grpc_auth import ClientAuth
from morphz.shared.limits import (BYTES_IN_FLIGHT, CONCURRENT_RPCS, EXPENSIVE_CPU,
                                  EXPENSIVE_RPCS, MESSAGE_BYTES, PRINCIPAL_CPU,
                                  PRINCIPAL_RPCS, REPLY_BYTES, REPLY_STALL_SECONDS)

DEFAULT_DATA_DIR = "./data"
EVENT_KINDS = ("user-message", "tool-result", "approval", "external", "message", "action")
MAX_MESSAGE_BYTES = MESSAGE_BYTES.max
STDIN = "-"


ROLES = ("all", "storage", "transaction", "recall", "encoding")


def default_server() -> str:
    """$MORPHZ_SERVER, else the all-in-one server's default address."""
    return os.environ.get("MORPHZ_SERVER") or DEFAULT_LISTEN


def server_for(service: str, given: Optional[str]) -> str:
    """Where a command of `service` goes: --server if given (one server for all), else
    $MORPHZ_<SERVICE> (a split cluster: MORPHZ_TRANSACTION, MORPHZ_RECALL,
    MORPHZ_ENCODING, MORPHZ_STORAGE), else default_server()."""
    if given is not None:
        return given
    return os.environ.get(f"MORPHZ_{service.upper()}") or default_server()


# -- local input -----------------------------------------------------------------------
def input_error(message: str, **details: object) -> MorphzError:
    """A bad local input, in the same shape as the server's CONTEXT_INPUT_INVALID."""
    return MorphzError("CONTEXT_INPUT_INVALID", message, **details)


def read_text(path: str, what: str = "file") -> str:
    """The UTF-8 content of `path` (`-` is stdin), or a CONTEXT_INPUT_INVALID error."""
    try:
        if path == STDIN:
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
    except OSError as e:
        raise input_error(f"cannot read {path}: {e.strerror or e}", field=what, path=path,
                          error=type(e).__name__) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise input_error(f"{'stdin' if path == STDIN else path} is not valid UTF-8 "
                          f"(byte offset {e.start})", field=what, path=path,
                          offset=e.start) from None


def check_server(server: str) -> str:
    """HOST:PORT (or an explicit gRPC target such as unix:/path or dns:///host:port)."""
    if server.startswith("unix:") or "://" in server:
        return server
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise input_error(f"--server must be HOST:PORT, got {server!r}", field="server",
                          value=server[:200])
    return server


def check_encodable(args: argparse.Namespace) -> None:
    """Reject arguments that are not valid Unicode (undecodable bytes in argv)."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise input_error(f"--{name.replace('_', '-')} is not valid UTF-8",
                                      field=name) from None


# -- argument types --------------------------------------------------------------------
# -- commands: each calls one client method and returns its reply dict ----------------------
def cmd_create(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.create_context(args.context_name, args.window)


def cmd_status(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.status(args.context if args.context_name is None else args.context_name)


def cmd_event(client: TransactionClient, args: argparse.Namespace) -> dict:
    text = args.text if args.text is not None else read_text(args.file)
    reply = client.append_event(args.context, args.session, args.kind, text,
                                request_id=args.request_id, actor=args.actor,
                                causal_refs=args.causal_refs, activation=args.activation,
                                target_session=args.to, secret=args.secret,
                                occurred_at=args.occurred_at)
    # The receipt as it always was: commit_seq serves a client's later searches (a
    # one-shot command has none), and `context status` shows the context's.
    reply.pop("commit_seq", None)
    return reply


def cmd_activate(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.activate(args.context, args.session)


def cmd_deliver(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.deliver(args.context, args.activation)


def cmd_tx(client: TransactionClient, args: argparse.Namespace) -> dict:
    text = read_text(args.file if args.file is not None else STDIN)
    return client.commit(args.context, text, session=args.session,
                         request_id=args.request_id, activation=args.activation)


def cmd_frame(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.get_frame(args.context, args.frame_id, args.at_revision,
                            reveal_secrets=args.reveal_secrets)


def cmd_frames(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.list_frames(args.context, reveal_secrets=args.reveal_secrets,
                              max_bytes=args.max_bytes, cursor=args.cursor)


def cmd_read(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.get_event(args.context, args.ref, reveal_secrets=args.reveal_secrets)


def cmd_audit(client: TransactionClient, args: argparse.Namespace) -> dict:
    context = args.context if args.context_name is None else args.context_name
    return client.start_job(context, "audit") if args.detach else client.audit(context)


def cmd_rebuild(client: TransactionClient, args: argparse.Namespace) -> dict:
    context = args.context if args.context_name is None else args.context_name
    return client.start_job(context, "rebuild-projections") if args.detach \
        else client.rebuild_projections(context)


def cmd_policy(client: TransactionClient, args: argparse.Namespace) -> dict:
    if args.policy_op == "show":
        return client.get_policy(args.context)
    if not args.principal or not args.rights:
        raise input_error(f"policy {args.policy_op} needs PRINCIPAL and at least one RIGHT",
                          field="rights" if args.principal else "principal")
    return client.set_policy(args.context, args.policy_op, args.principal, args.rights,
                             args.session)


def cmd_list(client: TransactionClient, args: argparse.Namespace) -> dict:
    return client.list_contexts()


# -- text rendering ------------------------------------------------------------------------
def _line(out: TextIO, key: str, value: object) -> None:
    if isinstance(value, bool):
        value = "yes" if value else "no"
    elif isinstance(value, list):
        value = ", ".join(map(str, value)) or "-"
    elif value is None or value == "":
        value = "-"
    print(f"{key}: {value}", file=out)


def render_status(r: dict, out: TextIO) -> None:
    _line(out, "context", r["context"])
    _line(out, "revision", r["revision"])
    _line(out, "cognitive_tick", r["cognitive_tick"])
    _line(out, "window", r["window"])
    frames = dict(r.get("frames_by_state") or {})
    order = [k for k in ("active", "retiring", "retired") if k in frames]
    order += sorted(set(frames) - set(order))
    _line(out, "frames", " ".join(f"{k}={frames[k]}" for k in order))
    _line(out, "event_count", r["event_count"])
    _line(out, "commit_seq", r.get("commit_seq", 0))
    for key in ("owner", "owner_address", "fencing_token", "shard"):
        if r.get(key):  # only where etcd places and owns contexts
            _line(out, key, r[key])
    if r.get("storage_space"):
        state = r["storage_space"]
        _line(out, "storage_space", f"{state}: {space.NOTE[state]}" if state in space.NOTE
              else state)
    _line(out, "sessions", len(r.get("sessions") or []))
    for s in r.get("sessions") or []:
        print(f"  {s['id']} state={s['state']} level={s['level']} pending={s['pending']}"
              f" messages_waiting={s.get('messages_waiting', 0)}"
              f" outstanding_calls={s.get('outstanding_calls', 0)}", file=out)


def render_event_receipt(r: dict, out: TextIO) -> None:
    for key in ("ref", "seq", "id", "replayed"):
        _line(out, key, r[key])
    # Where an action, a call's result or a message went (absent for other inputs).
    for key in ("session", "activation", "call", "returned_to", "target_session"):
        if r.get(key):
            _line(out, key, r[key])


def render_activation(r: dict, out: TextIO) -> None:
    _line(out, "activation", r["id"])
    _line(out, "session", r["session"])
    _line(out, "claimed", r["claimed"])
    _line(out, "root", r["root"])
    _line(out, "tick", f"{r['tick']}{' (advanced)' if r['tick_advanced'] else ''}")
    _line(out, "retired_frames", r["retired_frames"])
    _line(out, "delivered", r["delivered"])
    if r.get("results"):  # results of its calls that came while it was open
        _line(out, "results", r["results"])


def render_receipt(r: dict, out: TextIO) -> None:
    print(f"revision {r['revision']}", file=out)
    for res in r["results"]:
        extra = []
        if res.get("frame_revision"):
            extra.append(f"frame revision {res['frame_revision']}")
        if res.get("due_tick"):
            extra.append(f"due tick {res['due_tick']}")
        suffix = f" ({', '.join(extra)})" if extra else ""
        print(f"#{res['index']} {res['op']} {res['target']} -> {res['outcome']}{suffix}",
              file=out)
    _line(out, "base_version", r["base_version"])
    _line(out, "cognitive_tick", r["cognitive_tick"])
    _line(out, "event_ref", r["event_ref"])
    cap = r.get("capacity") or {}
    if cap:
        _line(out, "released_now", f"{cap['released_now_bytes']} bytes "
              f"[{', '.join(cap['released_now'])}]")
        _line(out, "released_after_window", f"{cap['released_after_window_bytes']} bytes "
              f"[{', '.join(cap['released_after_window'])}]")
    if r.get("replayed"):
        _line(out, "replayed", True)


def render_frame(r: dict, out: TextIO) -> None:
    _line(out, "id", r["id"])
    _line(out, "revision", r["revision"])
    _line(out, "state", r["state"])
    _line(out, "protected", r["protected"])
    _line(out, "sources", r["sources"])
    retire = r.get("retire")
    if retire:
        _line(out, "retire", f"due tick {retire['due_tick']} "
              f"({retire['remaining_ticks']} ticks remaining)")
        _line(out, "retire_reason", retire["reason"])
    _line(out, "changed_at", r["changed_at"])
    _line(out, "as_of_revision", r["as_of_revision"])
    for rel in r.get("relations") or []:  # when the server reports the frame's edges
        _line(out, "relation", f"{rel['subject']} {rel['name']} {rel['object']}")
    if r.get("secret"):
        _line(out, "secret", "yes: (secret ...) parts")
    print(file=out)
    print(r["body"], file=out)


def render_frames(r: dict, out: TextIO) -> None:
    """A frame a line: id, state, revision and the body's first 100 characters."""
    for f in r["frames"]:
        body = " ".join(f["body"].split())
        print(f"{f['id']} [{f['state']}] rev {f['revision']}  "
              f"{body[:100]}{'…' if len(body) > 100 else ''}", file=out)
    if r.get("next_cursor"):
        print(f"next_cursor: {r['next_cursor']}", file=out)


def render_event(r: dict, out: TextIO) -> None:
    for key in ("ref", "id", "seq", "kind", "session", "actor", "time", "state",
                "protected", "causal_refs", "request_id", "context"):
        _line(out, key, r.get(key))
    for key in ("activation", "call", "target_session", "secret", "occurred_at"):
        if r.get(key):
            _line(out, key, r[key])
    print(file=out)
    print(r.get("text", ""), file=out)


def render_audit(r: dict, out: TextIO) -> None:
    verdict = "match" if r["match"] else "MISMATCH"
    print(f"audit {r['context']}: {verdict} ({r['events_replayed']} events replayed)",
          file=out)
    for p in r["projections"]:
        print(f"{'ok' if p['match'] else 'MISMATCH'} {p['projection']}", file=out)
        for d in p["differences"]:
            print(f"  {d}", file=out)
    if r.get("replay_error"):
        print(f"REPLAY FAILED: {r['replay_error']}", file=out)
    links = r.get("chain") or {}
    if links.get("match", True):
        print(f"ok event chain ({links.get('checked', 0)} links)", file=out)
    else:
        print(f"BROKEN event chain at {links['first_broken']}: {links['problem']}", file=out)


def render_rebuild(r: dict, out: TextIO) -> None:
    print(f"rebuilt {r['context']} from {r['events_replayed']} events", file=out)
    for table, n in sorted(r["rewritten"].items()):
        print(f"rewritten {table}: {n} row(s)", file=out)
    if not r["rewritten"]:
        print("every projection already matched", file=out)
    for table in r["unrepairable"]:
        print(f"UNREPAIRABLE {table} (append-only)", file=out)
    for row in r.get("quarantined", []):
        print(f"quarantined {row} (a stray row past the history, kept aside)", file=out)


def render_policy(r: dict, out: TextIO) -> None:
    _line(out, "context", r["context"])
    if r.get("event_ref"):
        _line(out, "event_ref", r["event_ref"])
    for g in r.get("grants") or []:
        print(f"  {g['principal']} {g['right']}"
              f"{' session ' + g['session'] if g.get('session') else ''}", file=out)


def render_list(r: dict, out: TextIO) -> None:
    for name in r.get("contexts") or []:
        print(name, file=out)


def audit_exit(r: dict) -> int:
    return 0 if r.get("match") else 1


# command name -> (call, text renderer, exit status of a reply)
Command = tuple[Callable[[TransactionClient, argparse.Namespace], dict],
                Callable[[dict, TextIO], None], Callable[[dict], int]]
COMMANDS: "MappingProxyType[str, Command]" = MappingProxyType({
    "create": (cmd_create, render_status, always_ok),
    "status": (cmd_status, render_status, always_ok),
    "event": (cmd_event, render_event_receipt, always_ok),
    "activate": (cmd_activate, render_activation, always_ok),
    "deliver": (cmd_deliver, render_activation, always_ok),
    "tx": (cmd_tx, render_receipt, always_ok),
    "frame": (cmd_frame, render_frame, always_ok),
    "frames": (cmd_frames, render_frames, always_ok),
    "read": (cmd_read, render_event, always_ok),
    "audit": (cmd_audit, render_audit, audit_exit),
    "rebuild-projections": (cmd_rebuild, render_rebuild, always_ok),
    "policy": (cmd_policy, render_policy, always_ok),
    "list": (cmd_list, render_list, always_ok),
})


# Modules adding `context` subcommands of other services. Each has
# SERVICE (the service its commands call), add_commands(add) -> names it added
# (add(name, help) returns a subparser) and
# COMMANDS: name -> (call(channel, args) -> dict, text renderer, exit status of a reply).
EXTENSIONS = (recall_cmds, encoding_cmds, import_cmds)


# -- the parser ------------------------------------------------------------------------------
_UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def byte_size(text: str) -> int:
    """A number of bytes: digits, optionally followed by KiB, MiB, GiB or TiB."""
    digits = text.rstrip("KMGTiB")
    unit = text[len(digits):]
    if not digits.isdigit() or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected bytes (e.g. 1048576 or 64MiB), got "
                                         f"{text[:40]!r}")
    return int(digits) * _UNITS[unit]


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text[:40]!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="morphz", description="Morphz: a context store for AI agents.")
    global_options(parser, {"format": "text",
                             "server": None,  # resolved by default_server()
                             "timeout": None,  # resolved by main(): a backup's is longer
                             "context": DEFAULT_CONTEXT})
    client_auth_options(parser, {"tls_ca": None, "tls_cert": None, "tls_key": None,
                                 "token": None})  # resolved by client_auth()
    common = argparse.ArgumentParser(add_help=False)
    global_options(common, None)
    credentials = argparse.ArgumentParser(add_help=False)
    client_auth_options(credentials, None)

    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = top.add_parser("serve", parents=[common],
                           help="run the all-in-one server, or one service of a split cluster")
    serve.add_argument("role", nargs="?", default="all", choices=ROLES,
                       help="all (default): every service in one process; else one service")
    serve.add_argument("--listen", metavar="HOST:PORT", default=None,
                       help="address to listen on (default: the server's default listen "
                       "address)")
    serve.add_argument("--data", metavar="DIR", default=DEFAULT_DATA_DIR,
                       help=f"data directory (default: {DEFAULT_DATA_DIR}); the store's, or "
                       "recall's index")
    serve.add_argument("--storage", metavar="HOST:PORT", default="",
                       help="transaction, recall, encoding: the storage service's address")
    serve.add_argument("--transaction", metavar="HOST:PORT", default="",
                       help="recall, encoding: the transaction service's address")
    serve.add_argument("--store", choices=("lmdb", "postgres"), default="lmdb",
                       help="all, storage: where the store keeps its data: lmdb (in the data "
                       "directory, the default) or postgres (a PostgreSQL 15 database at "
                       "--dsn; README: The PostgreSQL store)")
    serve.add_argument("--dsn", metavar="DSN", default="",
                       help="with --store postgres: the libpq connection string or URI "
                       "(a password is better kept in PGPASSWORD or ~/.pgpass than here)")
    serve.add_argument("--etcd", metavar="HOST:PORT", default="",
                       help="transaction: own contexts through this etcd (leases, fencing "
                       "tokens), so several transaction instances can share storage; "
                       "storage (with --shard): register as a shard there; transaction, "
                       "recall, encoding without --storage: reach every shard registered "
                       "there, each context on the shard its placement names")
    serve.add_argument("--shard", metavar="NAME", default="",
                       help="storage, with --etcd: the shard this store is, registered in "
                       "etcd with its address (--advertise, default: the bound address)")
    serve.add_argument("--instance", metavar="ID", default="",
                       help="with --etcd: this instance's unique id (default: its address)")
    serve.add_argument("--advertise", metavar="HOST:PORT", default="",
                       help="with --etcd: the address clients reach this instance at, named "
                       "to them when another instance owns their context, or a shard's "
                       "address registered in etcd (default: the "
                       "bound listen address)")
    serve.add_argument("--lease-ttl", metavar="SECONDS", type=int, default=DEFAULT_LEASE_TTL,
                       help="with --etcd: the ownership lease's TTL: how soon another "
                       f"instance takes over a dead one's contexts (default: {DEFAULT_LEASE_TTL})")
    serve.add_argument("--storage-listen", metavar="HOST:PORT", default="",
                       help="all: also serve the internal storage API, on this address only "
                       "(default: not served; the public --listen never serves it)")
    serve.add_argument("--embedder", metavar="NAME", default="",
                       help="all, recall: the vector leg's embedder: default (e5, or USE "
                       "where the CPU lacks AVX2), e5 (multilingual-e5-small), use (USE "
                       "multilingual v3), lsa (learned from each context's own text), "
                       "hashing[:DIMENSION] (feature hashing, nothing learned), onnx:PATH or "
                       "none (no vector leg: vector search is refused, hybrid answers "
                       "from the lexical leg); an "
                       "index built by another embedder needs `recall-index rebuild` before "
                       f"vector/hybrid search (default: ${EMBEDDER_ENV} or default)")
    serve.add_argument("--recall-idle", metavar="SECONDS", type=seconds_up_to_a_day,
                       default=RECALL_IDLE_SECONDS,
                       help="all, recall: a context no search has asked for in this long has "
                       "its index brought up to date at its next search or inspection, or "
                       f"this long after its first change waiting (default: {RECALL_IDLE_SECONDS:g}; "
                       "0: index every change as it comes)")
    security_options(serve)
    serve.add_argument("--max-concurrent-rpcs", metavar="N", type=_positive,
                       default=CONCURRENT_RPCS.max,
                       help="RPCs this process holds at once; more are refused "
                       f"CONCURRENT_RPC_LIMIT (default: {CONCURRENT_RPCS.max}; README: Limits)")
    serve.add_argument("--max-bytes-in-flight", metavar="BYTES", type=_positive,
                       default=BYTES_IN_FLIGHT.max,
                       help="request bytes this process processes at once; a request that "
                       f"does not fit is refused BYTES_IN_FLIGHT_LIMIT (default: "
                       f"{BYTES_IN_FLIGHT.max}; README: Limits)")
    serve.add_argument("--max-reply-bytes", metavar="BYTES", type=_positive,
                       default=REPLY_BYTES.max,
                       help="bytes of one reply message; a larger one is refused "
                       f"{REPLY_BYTES.reason}: ask for it in pages (default: "
                       f"{REPLY_BYTES.max}; README: Limits)")
    serve.add_argument("--reply-stall-seconds", metavar="S", type=float,
                       default=REPLY_STALL_SECONDS,
                       help="a reply its client has not read this long after it was ready is "
                       "cancelled, and the memory it held freed (default: "
                       f"{REPLY_STALL_SECONDS})")
    # Expensive calls: audits, rebuilds, compiles, traversals, listings, large writes.
    serve.add_argument("--max-expensive-rpcs", metavar="N", type=_positive,
                       default=EXPENSIVE_RPCS.max,
                       help="expensive calls this process runs at once (the other workers "
                       f"are kept for cheap calls); more are refused {EXPENSIVE_RPCS.reason} "
                       f"(default: {EXPENSIVE_RPCS.max}; README: Limits)")
    serve.add_argument("--max-principal-rpcs", metavar="N", type=_positive,
                       default=PRINCIPAL_RPCS.max,
                       help="expensive calls one authenticated principal runs at once; more "
                       f"are refused {PRINCIPAL_RPCS.reason} (default: {PRINCIPAL_RPCS.max})")
    serve.add_argument("--expensive-cpu-seconds", metavar="S", type=_positive,
                       default=EXPENSIVE_CPU.max,
                       help="CPU-seconds per minute this process's expensive calls may use; "
                       f"past it they are refused {EXPENSIVE_CPU.reason} "
                       f"(default: {EXPENSIVE_CPU.max})")
    serve.add_argument("--principal-cpu-seconds", metavar="S", type=_positive,
                       default=PRINCIPAL_CPU.max,
                       help="CPU-seconds per minute one authenticated principal's expensive "
                       f"calls may use; past it they are refused {PRINCIPAL_CPU.reason} "
                       f"(default: {PRINCIPAL_CPU.max})")
    serve.add_argument("--expensive-share", metavar="FRACTION", type=float, default=0.25,
                       help="the share of a core the expensive calls may use together while "
                       "cheap calls are being served; they pause to keep to it (default: "
                       "0.25; 1: no pacing)")

    serve.add_argument("--storage-quota", metavar="BYTES", type=byte_size, default=0,
                       help="all, storage: the bytes the store's data may take; past it (or "
                       "when the disk is full) every write is refused STORAGE_FULL until "
                       "space is freed, reads go on (default: 0, the disk's size; suffixes "
                       "KiB, MiB, GiB, TiB)")
    serve.add_argument("--rules-version", metavar="N", type=int, default=0,
                       help="all, transaction: decide new transactions under this version of "
                       "the rules (default: 0, the current one); history decided under any "
                       "version replays under its own (DUR-05)")
    serve.add_argument("--map-size", metavar="BYTES", type=byte_size,
                       default=DEFAULT_MAX_MAP_SIZE,
                       help="all, storage: the most the LMDB map (the store's address "
                       f"space) may grow to (default: {DEFAULT_MAX_MAP_SIZE >> 30} GiB; the "
                       "file grows only as data is written)")

    backup_cmds.add_commands(top, common, credentials)
    mcp_cmds.add_command(top, credentials)
    job_cmds.add_commands(top, common, credentials)

    context = top.add_parser("context", parents=[common, credentials],
                             help="work with a context")
    sub = context.add_subparsers(dest="action", required=True, metavar="ACTION")

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common, credentials], help=help_,
                              description=help_)

    p = add("create", "create a context")
    p.add_argument("context_name", metavar="CONTEXT")
    p.add_argument("--window", metavar="N", type=unsigned(32), default=0,
                   help="organizing window in cognitive ticks (0: the default, 8)")

    p = add("status", "show a context's status")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")

    p = add("event", "append an input event, an action or a message")
    p.add_argument("--session", default="",
                   help="the event's session (a message's source); a tool result naming its "
                   "call (--causal-ref @eN of the action) may leave it to the call")
    p.add_argument("--kind", required=True, choices=EVENT_KINDS)
    p.add_argument("--activation", default="", metavar="ID",
                   help="action: the open activation of --session that issued the call")
    p.add_argument("--to", default="", metavar="SESSION",
                   help="message: the other session it is addressed to")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the event text")
    src.add_argument("--file", metavar="FILE", help="read the event text from FILE (- = stdin)")
    p.add_argument("--request-id", default="", help="idempotency key")
    p.add_argument("--actor", default="")
    p.add_argument("--causal-ref", dest="causal_refs", metavar="@eN", action="extend",
                   nargs="+", default=[], help="events this one was caused by")
    p.add_argument("--secret", action="store_true",
                   help="the text is secret: shown as [secret @eN] unless revealed")
    p.add_argument("--occurred-at", default="", metavar="TIME",
                   help="when it happened at its source: ISO 8601 with an offset "
                   "(default: when it is recorded)")

    p = add("activate", "claim a session's pending inputs")
    p.add_argument("--session", required=True)

    p = add("deliver", "mark an activation delivered")
    p.add_argument("--activation", required=True)

    p = add("tx", "commit a context-tx transaction")
    p.add_argument("--session", default="", help="the session whose evaluation made it")
    p.add_argument("--activation", default="",
                   help="the activation that read the Mind (its tick is the read tick)")
    p.add_argument("--request-id", default="", help="idempotency key")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--file", metavar="FILE", help="read the transaction from FILE (- = stdin)")
    src.add_argument("stdin", nargs="?", choices=(STDIN,), metavar="-",
                     help="read the transaction from stdin")

    p = add("frame", "show a cognitive frame")
    p.add_argument("frame_id", metavar="ID")
    p.add_argument("--at-revision", metavar="N", type=unsigned(64), default=0,
                   help="the frame as of context revision N (0: current)")
    p.add_argument("--reveal-secrets", action="store_true",
                   help="show (secret ...) parts as stored (default: [secret ID])")

    p = add("frames", "list the cognitive frames in projection order")
    p.add_argument("--max-bytes", metavar="N", type=unsigned(64), default=0,
                   help="a page of about N bytes of frames, and its next_cursor (0: every "
                   "frame, refused REPLY_TOO_LARGE past one message)")
    p.add_argument("--cursor", default="", help="next_cursor of the previous page")
    p.add_argument("--reveal-secrets", action="store_true",
                   help="show (secret ...) parts as stored (default: [secret ID])")

    p = add("read", "read an event by @eN ref or id")
    p.add_argument("ref", metavar="REF")
    p.add_argument("--reveal-secrets", action="store_true",
                   help="show a secret text as stored (default: [secret @eN])")

    p = add("audit", "replay events and verify the projections")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")
    detach_option(p)

    p = add("rebuild-projections", "rebuild every projection from the events")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")
    detach_option(p)

    p = add("policy", "show or change who may read, write, recall, encode or administer "
            "the context (--context); administrators only")
    p.add_argument("policy_op", metavar="show|grant|revoke", choices=("show", "grant", "revoke"))
    p.add_argument("principal", metavar="PRINCIPAL", nargs="?", default="",
                   help="grant/revoke: a principal, or * for every authenticated one")
    p.add_argument("rights", metavar="RIGHT", nargs="*", default=[],
                   help="grant/revoke: read, write, recall, encode, admin")
    p.add_argument("--session", default="",
                   help="the rights hold for this session only (default: the whole context)")

    add("list", "list the contexts you may read")

    for ext in EXTENSIONS:
        for name in ext.add_commands(add):
            if name in COMMANDS:
                raise RuntimeError(f"CLI command {name} defined twice")
    return parser


def detach_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--detach", action="store_true",
                   help="run it as a server-side job: print the job at once (its id for "
                   "`morphz job get|cancel ID`) instead of waiting for the result")


def security_options(serve: argparse.ArgumentParser) -> None:
    """`morphz serve`'s authentication (services/server/security.py)."""
    g = serve.add_argument_group(
        "authentication", "mutual TLS (--tls-cert, --tls-key, --tls-client-ca) and/or bearer "
        "tokens (--tokens); neither: every caller is served (development mode)")
    g.add_argument("--tls-cert", dest="server_tls_cert", metavar="PEM", default="",
                   help="this server's certificate (TLS); it is also the client certificate "
                   "presented to the services it calls")
    g.add_argument("--tls-key", dest="server_tls_key", metavar="PEM", default="",
                   help="the private key of --tls-cert")
    g.add_argument("--tls-client-ca", metavar="PEM", default="",
                   help="mutual TLS: require a client certificate issued by this CA (its "
                   "subject CN, else SAN, is the caller's principal)")
    g.add_argument("--tls-ca", dest="server_tls_ca", metavar="PEM", default="",
                   help="the CA verifying the services this one calls (default: "
                   "--tls-client-ca)")
    g.add_argument("--tokens", metavar="FILE", default="",
                   help="bearer tokens: a JSON object {token: principal} or `TOKEN PRINCIPAL` "
                   "lines (a token may be given as sha256:HEX)")
    g.add_argument("--service-token-file", metavar="FILE", default="",
                   help="the token this service presents to the services it calls (default: "
                   "$MORPHZ_SERVICE_TOKEN)")
    g.add_argument("--admin", dest="admins", metavar="PRINCIPAL", action="append", default=[],
                   help="a server-wide administrator: may do anything in every context and "
                   "list them all (repeatable; everyone else is bound by each context's "
                   "policy: `morphz context policy`)")
    g.add_argument("--namespace", dest="namespaces", metavar="PRINCIPAL=NAMESPACE",
                   action="append", default=[],
                   help="the namespace (a tenant) PRINCIPAL's context names live in: its "
                   "name N means ~NAMESPACE/N (repeatable; needs authentication)")
    g.add_argument("--private-namespaces", action="store_true",
                   help="every principal without --namespace gets a namespace of its own, "
                   "named after it")
    g.add_argument("--service-principal", metavar="NAME", default=DEFAULT_SERVICE_PRINCIPAL,
                   help="the services' own principal: the only one the storage API serves "
                   f"(default: {DEFAULT_SERVICE_PRINCIPAL})")


def client_auth(args: argparse.Namespace, env=os.environ) -> ClientAuth:
    """The credentials of a `context` command: its options, else $MORPHZ_TLS_*/$MORPHZ_TOKEN."""
    def pick(name: str) -> str:
        given = getattr(args, name, None)
        return given if given is not None else env.get(f"MORPHZ_{name.upper()}", "")
    return ClientAuth.from_files(ca=pick("tls_ca"), cert=pick("tls_cert"),
                                 key=pick("tls_key"), token=pick("token"))


# -- running ---------------------------------------------------------------------------------
def run_serve(args: argparse.Namespace) -> int:
    from morphz.services.server.main import serve  # the server stack loads only here
    from morphz.services.server.security import Security
    from morphz.shared.admission import Budgets
    from morphz.shared.auth import read_secret
    listen = DEFAULT_LISTEN if args.listen is None else args.listen
    service_token = read_secret(args.service_token_file, "service_token_file") \
        if args.service_token_file else os.environ.get("MORPHZ_SERVICE_TOKEN", "")
    security = Security(tls_cert=args.server_tls_cert, tls_key=args.server_tls_key,
                        tls_client_ca=args.tls_client_ca, tls_ca=args.server_tls_ca,
                        tokens=args.tokens, service_token=service_token,
                        service_principal=args.service_principal,
                        admins=tuple(args.admins), namespaces=tuple(args.namespaces),
                        private_namespaces=args.private_namespaces)
    try:
        return serve(listen, args.data, args.role, args.storage, args.transaction,
                     etcd=args.etcd, instance=args.instance, advertise=args.advertise,
                     lease_ttl=args.lease_ttl, shard=args.shard,
                     storage_listen=args.storage_listen, embedder=args.embedder,
                     recall_idle_seconds=args.recall_idle,
                     security=security, max_concurrent_rpcs=args.max_concurrent_rpcs,
                     max_bytes_in_flight=args.max_bytes_in_flight,
                     storage_quota=args.storage_quota, max_map_size=args.map_size,
                     store=args.store, dsn=args.dsn,
                     **({"rules_version": args.rules_version} if args.rules_version else {}),
                     max_reply_bytes=args.max_reply_bytes,
                     reply_stall_seconds=args.reply_stall_seconds,
                     budgets=Budgets(expensive_rpcs=args.max_expensive_rpcs,
                                     principal_rpcs=args.max_principal_rpcs,
                                     expensive_cpu_seconds=args.expensive_cpu_seconds,
                                     principal_cpu_seconds=args.principal_cpu_seconds,
                                     expensive_share=args.expensive_share))
    except OSError as e:
        raise input_error(f"cannot serve on {listen}: {e}", field="listen",
                          value=listen) from None


def run_context(args: argparse.Namespace, out: TextIO) -> int:
    ext = next((e for e in EXTENSIONS if args.action in e.COMMANDS), None)
    server = server_for(ext.SERVICE if ext else "transaction", args.server)
    context = getattr(args, "context_name", None) or args.context
    auth = client_auth(args)
    with command_trace(args.action, context[:200]) as traced:
        def connect(address: str) -> grpc.Channel:
            return traced(auth.channel(check_server(address), options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]))
        channel = connect(server)
        try:
            if args.action in COMMANDS:
                call, render, exit_status = COMMANDS[args.action]
                client = TransactionClient(channel, timeout=args.timeout, connect=connect)
                try:
                    reply = call(client, args)
                finally:
                    client.close()
                if args.action == "status":  # and the store's space alarm (DUR-07)
                    reply = dict(reply, storage_space=_space(args, connect))
            else:  # recall/encoding commands: they build their own client on the channel
                call, render, exit_status = ext.COMMANDS[args.action]
                reply = call(channel, args)
        finally:
            channel.close()
    if getattr(args, "detach", False):  # a job's first look, whatever the command
        render, exit_status = job_cmds.render, always_ok
    if args.format == "json":
        print_json(reply, out)
    else:
        render(reply, out)
    return exit_status(reply)


SPACE_TIMEOUT = 5.0  # seconds for the space alarm's health check beside a status


def _space(args: argparse.Namespace, connect: Callable[[str], grpc.Channel]) -> str:
    channel = connect(server_for("storage", args.server))
    try:
        return space.storage_space(channel, min(args.timeout, SPACE_TIMEOUT))
    finally:
        channel.close()


def run_job(args: argparse.Namespace, out: TextIO) -> int:
    """`morphz job get|list|cancel` (services/cli/job_cmds.py)."""
    auth = client_auth(args)
    with command_trace(f"job {args.job_action}", "", name="morphz job") as traced:
        reply = job_cmds.run(args, lambda service: traced(auth.channel(
            check_server(server_for(service, args.server)), options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])))
    if args.format == "json":
        print_json(reply, out)
    else:
        job_cmds.render(reply, out)
    return 0


def run_admin(args: argparse.Namespace, out: TextIO) -> int:
    """`morphz backup` (over gRPC, to the storage service) and `morphz restore` (local)."""
    if args.command == "restore":
        reply = backup_cmds.run_restore(args)
    else:
        server = server_for("storage", args.server)
        with command_trace("backup", "", name="morphz backup") as traced:
            channel = traced(client_auth(args).channel(check_server(server), options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]))
            try:
                reply = backup_cmds.run_backup(channel, args)
            finally:
                channel.close()
    if args.format == "json":
        print_json(reply, out)
    else:
        backup_cmds.RENDER[args.command](reply, out)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.timeout is None:
        args.timeout = backup_cmds.BACKUP_TIMEOUT if args.command == "backup" \
            else DEFAULT_TIMEOUT
    out = sys.stdout
    try:
        check_encodable(args)
        if args.command == "serve":
            return run_serve(args)
        if args.command in ("backup", "restore"):
            return run_admin(args, out)
        if args.command == "mcp":
            return mcp_cmds.run(args)
        if args.command == "job":
            return run_job(args, out)
        return run_context(args, out)
    except MorphzError as e:
        print_json({"error": e.to_dict()}, out)
        return 1


if __name__ == "__main__":
    sys.exit(main())
