"""`morphz ui`: the read-only web inspector (services/ui/), talking to a Morphz server
through morphz.client with the CLI's --server, --timeout, TLS and token options and their
$MORPHZ_* variables."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Mapping

from morphz.services.cli.common import option_or_env, positive_seconds, print_json

DEFAULT_LISTEN = "127.0.0.1:7090"


def add_command(top, credentials: argparse.ArgumentParser) -> None:
    p = top.add_parser(
        "ui", parents=[credentials],
        help="serve the read-only web inspector (contexts, Mind graph, timeline, "
        "encodings, diffs)",
        description="Serve a read-only web inspector of Morphz. Without --users it runs in "
        "development mode: loopback only, every request acting as this command's "
        "credentials. With --users each user signs in with an inspector token that maps "
        "to a Morphz token, and sees what that principal may read.")
    p.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                   help=f"the address to serve on (default: {DEFAULT_LISTEN}; port 0: any "
                   "free port, printed on start)")
    p.add_argument("--server", metavar="HOST:PORT", default=None,
                   help="the Morphz server (default: $MORPHZ_SERVER, else 127.0.0.1:7070)")
    p.add_argument("--timeout", dest="ui_timeout", metavar="SECONDS", type=positive_seconds,
                   default=None, help="the deadline of every Morphz call (default: the "
                   "client's, 30)")
    p.add_argument("--users", metavar="FILE", default=None,
                   help="a JSON object mapping each inspector token to the Morphz token it "
                   "acts with; without it: development mode, loopback only")


def run(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> int:
    from morphz.client import Credentials, MorphzError
    from morphz.client.errors import input_error
    from morphz.client.options import DEFAULT_TIMEOUT, listen_address
    from morphz.services.ui.access import (Connection, OwnPrincipal, UserTokens,
                                           is_loopback, load_users)
    from morphz.services.ui.http_app import Inspector
    try:
        host, port = listen_address(args.listen)
        users = load_users(args.users) if args.users else None
        if users is None and not is_loopback(host):
            raise input_error("development mode (no --users) serves loopback only: give "
                              "--users FILE to serve other hosts", field="listen")
        tls_cert = option_or_env(args, "tls_cert", env)
        if users is not None and tls_cert:
            raise input_error("--users acts as each user's Morphz token; a client "
                              "certificate would act for all of them alike",
                              field="tls_cert")
        credentials = Credentials(
            tls_ca=option_or_env(args, "tls_ca", env) or None, tls_cert=tls_cert or None,
            tls_key=option_or_env(args, "tls_key", env) or None,
            token="" if users is not None else option_or_env(args, "token", env))
        connection = Connection(args.server, credentials, args.ui_timeout or DEFAULT_TIMEOUT)
        if users is None:
            principals = OwnPrincipal(connection)
            banner = ("development mode: loopback only, every request acts as this "
                      "inspector's own Morphz credentials")
        else:
            principals = UserTokens(connection, users)
            banner = "signed in: you see what your Morphz principal may read"
        try:
            httpd = Inspector((host, port), principals, banner)
        except OSError as e:
            raise MorphzError("UNAVAILABLE", f"cannot listen on {args.listen}: {e}",
                              code="UNAVAILABLE", details={"listen": args.listen}) from None
        bound_host, bound_port = httpd.server_address[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        print(f"morphz ui: serving on http://{shown}:{bound_port}/ ({principals.mode} mode)",
              flush=True)
        try:
            httpd.serve_forever()
        finally:
            httpd.server_close()
            principals.close()
        return 0
    except MorphzError as e:
        print_json({"error": e.to_dict()}, sys.stdout)
        return 1
    except KeyboardInterrupt:
        return 0
