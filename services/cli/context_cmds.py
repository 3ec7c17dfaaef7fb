"""The `morphz context` commands the transaction service answers: each one's arguments,
and its call: one method of morphz.client's Client, its reply as the dict printed."""
from __future__ import annotations

import argparse
from types import MappingProxyType
from typing import Callable, TextIO

from morphz.client import Client
from morphz.services.cli.common import always_ok, unsigned
from morphz.services.cli.context_text import (
    audit_exit, render_activation, render_audit, render_event, render_event_receipt,
    render_frame, render_frames, render_list, render_policy, render_rebuild, render_receipt,
    render_status)
from morphz.services.cli.inputs import STDIN, input_error, read_text
from morphz.services.cli.replies import job, plain

SERVICE = "transaction"  # the service these commands call (connect.py server_for)
EVENT_KINDS = ("user-message", "tool-result", "approval", "external", "message", "action")


# -- commands: each calls one client method and returns its reply as a dict ----------------
def cmd_create(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.create_context(args.context_name, window=args.window))


def cmd_status(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.status(args.context if args.context_name is None
                               else args.context_name))


def cmd_event(client: Client, args: argparse.Namespace) -> dict:
    text = args.text if args.text is not None else read_text(args.file)
    reply = plain(client.append_event(
        args.context, session=args.session, kind=args.kind, text=text,
        request_id=args.request_id, actor=args.actor, causal_refs=args.causal_refs,
        activation=args.activation, target_session=args.to, secret=args.secret,
        occurred_at=args.occurred_at))
    # The receipt as it always was: commit_seq serves a client's later searches (a
    # one-shot command has none), and `context status` shows the context's.
    reply.pop("commit_seq", None)
    return reply


def cmd_activate(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.activate(args.context, session=args.session))


def cmd_deliver(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.deliver(args.context, args.activation))


def cmd_tx(client: Client, args: argparse.Namespace) -> dict:
    text = read_text(args.file if args.file is not None else STDIN)
    return plain(client.commit(args.context, text, session=args.session,
                               request_id=args.request_id, activation=args.activation))


def cmd_frame(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.frame(args.context, args.frame_id, at_revision=args.at_revision,
                              reveal_secrets=args.reveal_secrets))


def cmd_frames(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.frames(args.context, reveal_secrets=args.reveal_secrets,
                               max_bytes=args.max_bytes, cursor=args.cursor))


def cmd_read(client: Client, args: argparse.Namespace) -> dict:
    return plain(client.event(args.context, args.ref, reveal_secrets=args.reveal_secrets))


def cmd_audit(client: Client, args: argparse.Namespace) -> dict:
    context = args.context if args.context_name is None else args.context_name
    return job(client.start_job(context, "audit")) if args.detach \
        else plain(client.audit(context))


def cmd_rebuild(client: Client, args: argparse.Namespace) -> dict:
    context = args.context if args.context_name is None else args.context_name
    if args.detach:
        return job(client.start_job(context, "rebuild-projections"))
    return plain(client.rebuild_projections(context, timeout=args.timeout))


def cmd_policy(client: Client, args: argparse.Namespace) -> dict:
    if args.policy_op == "show":
        return plain(client.policy(args.context))
    if args.policy_op == "retention":  # the policy's words, however the shell split them
        text = " ".join([args.principal, *args.rights]).strip()
        if not text:
            raise input_error("policy retention needs the policy, e.g. '(retention (kinds "
                              "tool-result external) (days 30))', or none", field="retention")
        return plain(client.set_retention(args.context, text))
    if not args.principal or not args.rights:
        raise input_error(f"policy {args.policy_op} needs PRINCIPAL and at least one RIGHT",
                          field="rights" if args.principal else "principal")
    change = client.grant if args.policy_op == "grant" else client.revoke
    return plain(change(args.context, args.principal, args.rights, session=args.session))


def cmd_list(client: Client, args: argparse.Namespace) -> dict:
    return {"contexts": client.contexts()}


# command name -> (call, text renderer, exit status of a reply)
Command = tuple[Callable[[Client, argparse.Namespace], dict],
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


def add_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> list[str]:
    """Each command's arguments (add(name, help) returns its subparser); the names added."""
    # In the order `morphz context --help` lists them.
    _context_commands(add)
    _input_commands(add)
    _mind_commands(add)
    _admin_commands(add)
    return list(COMMANDS)


def _context_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """create and status: a context as a whole."""
    p = add("create", "create a context")
    p.add_argument("context_name", metavar="CONTEXT")
    p.add_argument("--window", metavar="N", type=unsigned(32), default=0,
                   help="organizing window in cognitive ticks (0: the default, 8)")

    p = add("status", "show a context's status")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")


def _input_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """event, activate and deliver: a session's inputs and evaluations."""
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


def _mind_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """tx, frame, frames and read: the Mind changed and read, the history read."""
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


def _admin_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """audit, rebuild-projections, policy and list: administering contexts."""
    p = add("audit", "replay events and verify the projections")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")
    detach_option(p)

    p = add("rebuild-projections", "rebuild every projection from the events")
    p.add_argument("context_name", metavar="CONTEXT", nargs="?", help="default: --context")
    detach_option(p)

    p = add("policy", "show or change who may read, write, recall, encode or administer "
            "the context (--context), or its retention policy; administrators only")
    p.add_argument("policy_op", metavar="show|grant|revoke|retention",
                   choices=("show", "grant", "revoke", "retention"))
    p.add_argument("principal", metavar="PRINCIPAL", nargs="?", default="",
                   help="grant/revoke: a principal, or * for every authenticated one; "
                   "retention: the policy, '(retention (kinds KIND...) (days N))', or none "
                   "(docs/privacy.md)")
    p.add_argument("rights", metavar="RIGHT", nargs="*", default=[],
                   help="grant/revoke: read, write, recall, encode, admin")
    p.add_argument("--session", default="",
                   help="the rights hold for this session only (default: the whole context)")

    add("list", "list the contexts you may read")


def detach_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--detach", action="store_true",
                   help="run it as a server-side job: print the job at once (its id for "
                   "`morphz job get|cancel ID`) instead of waiting for the result")

