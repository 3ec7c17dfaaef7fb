"""`morphz mcp`: Morphz as an MCP server (services/mcp/), over stdio or streamable HTTP,
talking to a Morphz server through morphz.client with the CLI's --server, --timeout,
TLS and token options and their $MORPHZ_* variables."""
from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata
from typing import Mapping

from morphz.services.cli.common import (DEFAULT_CONTEXT, option_or_env, positive_seconds,
                                        print_json, unsigned)
from morphz.services.mcp.settings import (DEFAULT_HTTP_LISTEN, DEFAULT_MAX_OUTPUT_BYTES,
                                          DEFAULT_SESSION)

TRANSPORTS = ("stdio", "http")


def add_command(top, credentials: argparse.ArgumentParser) -> None:
    p = top.add_parser(
        "mcp", parents=[credentials],
        help="serve Morphz to MCP clients (agent hosts) over stdio or streamable HTTP",
        description="Serve Morphz as a Model Context Protocol server: tools to observe, "
        "recall, read the Mind, transact and compile encodings, acting as the principal "
        "of --token/--tls-* (stdio) or of each HTTP client's bearer token (http).")
    p.add_argument("--transport", choices=TRANSPORTS, default="stdio",
                   help="stdio (default: the host starts this command) or http "
                   "(streamable HTTP at http://LISTEN/mcp; each client presents a bearer "
                   "token, forwarded to Morphz as its credentials)")
    p.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_HTTP_LISTEN,
                   help=f"http: the address to serve on (default: {DEFAULT_HTTP_LISTEN}, "
                   "loopback; port 0: any free port, printed on start)")
    p.add_argument("--server", metavar="HOST:PORT", default=None,
                   help="the Morphz server (default: $MORPHZ_TRANSACTION/$MORPHZ_RECALL/"
                   "$MORPHZ_ENCODING per service, else $MORPHZ_SERVER, else "
                   "127.0.0.1:7070)")
    p.add_argument("--timeout", dest="mcp_timeout", metavar="SECONDS", type=positive_seconds,
                   default=None, help="the deadline of every Morphz call (default: the "
                   "client's, 30)")
    p.add_argument("--context", dest="mcp_context", metavar="CONTEXT", default=None,
                   help="bind every tool to this context (default: none; each tool then "
                   "takes a `context` argument)")
    p.add_argument("--session", dest="mcp_session", metavar="SESSION",
                   default=DEFAULT_SESSION,
                   help="the session observations, encodings and transactions belong to "
                   f"(default: {DEFAULT_SESSION})")
    p.add_argument("--max-output-bytes", metavar="N", type=unsigned(32),
                   default=DEFAULT_MAX_OUTPUT_BYTES,
                   help="the most bytes one tool output's JSON takes; longer ones come in "
                   f"pages with a cursor (default: {DEFAULT_MAX_OUTPUT_BYTES})")


def run(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> int:
    from morphz.client import Credentials, MorphzError
    from morphz.client.options import DEFAULT_TIMEOUT
    from morphz.client.errors import input_error
    from morphz.services.mcp import server as mcp_server, transports
    from morphz.services.mcp.callers import BearerPrincipals, Connection, OwnPrincipal
    from morphz.services.mcp.settings import Binding
    # stdout carries the protocol over stdio: a failure to start goes to stderr there.
    out = sys.stderr if args.transport == "stdio" else sys.stdout
    try:
        over_http = args.transport == "http"
        tls_cert = option_or_env(args, "tls_cert", env)
        if over_http and tls_cert:
            raise input_error("--transport http forwards each MCP client's bearer token; a "
                              "client certificate would act for all of them alike: use "
                              "tokens (--tls-ca alone verifies the server)", field="tls_cert")
        credentials = Credentials(
            tls_ca=option_or_env(args, "tls_ca", env) or None, tls_cert=tls_cert or None,
            tls_key=option_or_env(args, "tls_key", env) or None,
            token="" if over_http else option_or_env(args, "token", env))
        context = args.mcp_context
        if context is None and args.context != DEFAULT_CONTEXT:
            context = args.context  # `morphz --context NAME mcp`
        binding = Binding(context=context or "", session=args.mcp_session,
                          max_output_bytes=args.max_output_bytes)
        connection = Connection(args.server, None, None, credentials,
                                args.mcp_timeout or DEFAULT_TIMEOUT)
        callers = BearerPrincipals(connection) if over_http else OwnPrincipal(connection)
        server = mcp_server.build(binding, callers, version=_version())
        if over_http:
            sock = transports.bind(args.listen)
            transports.run(lambda: transports.serve_http(server, sock, callers.close))
        else:
            transports.run(lambda: transports.serve_stdio(server, callers.close))
        return 0
    except MorphzError as e:
        print_json({"error": e.to_dict()}, out)
        return 1
    except KeyboardInterrupt:
        return 0


def _version() -> str:
    try:
        return metadata.version("morphz")
    except metadata.PackageNotFoundError:
        return ""
