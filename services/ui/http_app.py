"""The inspector's HTTP side (standard library: ThreadingHTTPServer): the page and its
assets from static/ (nothing from anywhere else: the Content-Security-Policy allows
only this origin), a JSON API per view (views.Reader), and /login in --users mode.
A Morphz error is answered as {"error": {code, reason, message, details}} with the
HTTP status its gRPC code maps to."""
from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Callable, Optional
from urllib.parse import parse_qsl, urlsplit

from morphz.client.errors import MorphzError, input_error
from morphz.services.ui import steps
from morphz.services.ui.access import COOKIE

ASSETS = {"app.js": "text/javascript; charset=utf-8", "steps.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8",
          "index.html": "text/html; charset=utf-8", "login.html": "text/html; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HTTP_OF = {"INVALID_ARGUMENT": 400, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403,
           "NOT_FOUND": 404, "FAILED_PRECONDITION": 409, "ABORTED": 409,
           "RESOURCE_EXHAUSTED": 429, "DEADLINE_EXCEEDED": 504, "UNAVAILABLE": 503}
GET_VIEWS = {"contexts": lambda r, ctx, q: r.contexts(),
             "context": lambda r, ctx, q: r.context(ctx, q.get("audit") == "1"),
             "mind": lambda r, ctx, q: r.mind(ctx, q),
             "frame": lambda r, ctx, q: r.frame(ctx, q),
             "timeline": lambda r, ctx, q: r.timeline(ctx, q),
             "search": lambda r, ctx, q: r.search(ctx, q),
             "encoding": lambda r, ctx, q: r.encoding(ctx, q),
             "activations": lambda r, ctx, q: r.activations(ctx),
             "diff": lambda r, ctx, q: r.diff(ctx, q),
             "evaluations": steps.evaluations,
             "evaluation": steps.evaluation,
             "encoding_diff": steps.encoding_diff}
POST_VIEWS = {"compile": lambda r, ctx, q: r.compile(ctx, q)}
MAX_BODY = 65536


def asset(name: str) -> bytes:
    return resources.files("morphz.services.ui").joinpath("static", name).read_bytes()


class Inspector(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], principals, banner: str) -> None:
        super().__init__(address, Handler)
        self.principals = principals
        self.banner = banner  # how this inspector acts, shown on every page


class Handler(BaseHTTPRequestHandler):
    server: Inspector
    server_version = "morphz-ui"
    sys_version = ""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base's name)
        sys.stderr.write("morphz ui: %s %s\n" % (self.address_string(), format % args))

    # -- replies ----------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str, extra: Optional[dict] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: object) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False).encode(),
                   "application/json; charset=utf-8")

    def _error(self, e: MorphzError) -> None:
        self._json(HTTP_OF.get(e.code, 502), {"error": e.to_dict()})

    def _unauthenticated(self) -> None:
        self._json(401, {"error": {"code": "UNAUTHENTICATED", "reason": "UNAUTHENTICATED",
                                   "message": "sign in at /login, or send Authorization: "
                                   "Bearer with your inspector token", "details": {}}})

    # -- routes -----------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        if url.path.startswith("/static/"):
            name = url.path[len("/static/"):]
            if name in ASSETS and name.endswith((".js", ".css")):
                return self._send(200, asset(name), ASSETS[name])
            return self._send(404, b"not found", "text/plain")
        if url.path == "/login":
            return self._send(200, asset("login.html"), ASSETS["login.html"])
        if url.path == "/":
            if self.server.principals.reader_for(self.headers) is None:
                return self._send(303, b"", "text/plain", {"Location": "/login"})
            return self._send(200, asset("index.html"), ASSETS["index.html"])
        if url.path.startswith("/api/"):
            return self._api(url.path[5:], dict(parse_qsl(url.query)), GET_VIEWS)
        self._send(404, b"not found", "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._error(input_error("request body too large", field="body"))
        body = self.rfile.read(length).decode("utf-8", "replace")
        if url.path == "/login":
            session = self.server.principals.login(dict(parse_qsl(body)).get("token", ""))
            if session is None:
                return self._send(303, b"", "text/plain", {"Location": "/login?failed=1"})
            return self._send(303, b"", "text/plain", {
                "Location": "/",
                "Set-Cookie": f"{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/"})
        if url.path.startswith("/api/"):
            if self.headers.get("X-Morphz-UI") != "1":  # not from this page's script
                return self._error(input_error("POST needs the header X-Morphz-UI: 1",
                                               field="X-Morphz-UI"))
            try:
                q = {k: str(v) for k, v in json.loads(body or "{}").items()}
            except (ValueError, AttributeError):
                return self._error(input_error("the body must be a JSON object",
                                               field="body"))
            return self._api(url.path[5:], q, POST_VIEWS)
        self._send(404, b"not found", "text/plain")

    def _api(self, view: str, q: dict, views: dict[str, Callable]) -> None:
        reader = self.server.principals.reader_for(self.headers)
        if reader is None:
            return self._unauthenticated()
        if view == "whoami":
            return self._json(200, {"mode": self.server.principals.mode,
                                    "banner": self.server.banner})
        if view not in views:
            return self._json(404, {"error": {"code": "NOT_FOUND", "reason": "NOT_FOUND",
                                              "message": f"no view {view!r}", "details": {}}})
        try:
            context = q.get("context", "")
            if view != "contexts" and not context:
                raise input_error("context is required", field="context")
            self._json(200, views[view](reader, context, q))
        except MorphzError as e:
            self._error(e)
