"""`morphz job start|get|list|cancel`: server-side jobs (shared/jobs.py), started by
`morphz job start KIND CONTEXT` or with `--detach` (`morphz context audit|rebuild-projections
--detach`, `morphz context recall-index rebuild --detach`). A job id names its service
(tx-..., recall-...), which the command asks; a kind, the service that runs it."""
from __future__ import annotations

import argparse
import json
from typing import TextIO

from morphz.client import Client
from morphz.services.cli.common import print_json
from morphz.services.cli.connect import open_client
from morphz.services.cli.replies import job
from morphz.services.cli.tracing import command_trace

SERVICES = ("transaction", "recall")
# Each kind of job, by the service that runs it (shared/jobs.py runners of each).
KINDS = {"audit": "transaction", "rebuild-projections": "transaction",
         "retention": "transaction", "rebuild-index": "recall"}


def add_commands(top, common, credentials) -> None:
    job = top.add_parser("job", parents=[common, credentials],
                         help="poll or cancel server-side jobs (started with --detach)")
    sub = job.add_subparsers(dest="job_action", required=True, metavar="ACTION")
    p = sub.add_parser("start", parents=[common, credentials],
                       help="start a job on a context and print it at once (its id for get "
                       "and cancel): " + ", ".join(KINDS))
    p.add_argument("kind", metavar="KIND", choices=tuple(KINDS),
                   help="audit, rebuild-projections, retention (apply the context's "
                   "retention policy now: docs/privacy.md) or rebuild-index (recall)")
    p.add_argument("job_context", metavar="CONTEXT", nargs="?", default=None,
                   help="default: --context")
    for name, help_ in (("get", "a job's state, progress and (finished) result or error"),
                        ("cancel", "stop a job at its next check; nothing is left half-done")):
        p = sub.add_parser(name, parents=[common, credentials], help=help_, description=help_)
        p.add_argument("job_id", metavar="ID")
    p = sub.add_parser("list", parents=[common, credentials],
                       help="the jobs you may see, of both services (of one context with --of)")
    p.add_argument("--of", dest="job_context", metavar="CONTEXT", default="",
                   help="only this context's jobs")


def service_of(job_id: str) -> str:
    return "recall" if job_id.startswith("recall-") else "transaction"


def services_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The services a job command calls: the one running the kind, or the job (its id
    names it); both for a listing."""
    if args.job_action == "start":
        return (KINDS[args.kind],)
    return SERVICES if args.job_action == "list" else (service_of(args.job_id),)


def run(args: argparse.Namespace, client: Client) -> dict:
    if args.job_action == "start":
        return job(client.start_job(args.job_context or args.context, args.kind))
    if args.job_action == "get":
        return job(client.job(args.job_id))
    if args.job_action == "cancel":
        return job(client.cancel_job(args.job_id))
    return {"jobs": [job(j) for j in client.jobs(args.job_context)]}  # both services'


def render_job(j: dict, out: TextIO) -> None:
    total = f"{j.get('done', 0)}/{j.get('total', 0)}"
    line = f"{j.get('id')}  {j.get('kind')} {j.get('context')}  {j.get('state')}  {total}"
    if j.get("cancel_requested") and j.get("state") in ("queued", "running"):
        line += "  (cancel requested)"
    print(line, file=out)
    if j.get("error_reason"):
        print(f"  {j['error_reason']}: {j.get('error_message', '')}", file=out)
    if j.get("result") is not None:
        print("  " + json.dumps(j["result"], ensure_ascii=False), file=out)


def render(reply: dict, out: TextIO) -> None:
    for j in reply["jobs"] if "jobs" in reply else [reply]:
        render_job(j, out)


def run_command(args: argparse.Namespace, out: TextIO) -> int:
    """`morphz job get|list|cancel`: the reply printed as text or JSON."""
    with command_trace(f"job {args.job_action}", "", name="morphz job") as traced:
        with open_client(args, services_of(args), traced) as client:
            reply = run(args, client)
    if args.format == "json":
        print_json(reply, out)
    else:
        render(reply, out)
    return 0

