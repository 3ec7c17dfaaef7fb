"""The UI extension's view of an implementation's web inspector: plain HTTP GETs to its
page, assets and JSON views (the standard library only), each presenting the caller's
inspector token as `Authorization: Bearer TOKEN` (none: no header). Redirects are not
followed, so a case sees a sign-in redirect as it is."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InspectorReply:
    url: str
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class InspectorClient:
    def __init__(self, url: str, token: str, timeout: float) -> None:
        self.url, self._token, self._timeout = url.rstrip("/"), token, timeout
        self._opener = urllib.request.build_opener(_NoRedirect)

    def get(self, path: str, **params: Any) -> InspectorReply:
        """GET url+path (`params` as its query; empty values left out)."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v not in ("", None)})
        url = f"{self.url}{path}" + (f"?{query}" if query else "")
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        try:
            with self._opener.open(urllib.request.Request(url, headers=headers),
                                   timeout=self._timeout) as r:
                return InspectorReply(url, r.status, _lower(r.headers), r.read())
        except urllib.error.HTTPError as e:
            return InspectorReply(url, e.code, _lower(e.headers), e.read())


def _lower(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}
