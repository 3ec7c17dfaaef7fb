"""Whom an inspector request acts as in Morphz.

Development mode (no --users): the process's own credentials (--token, --tls-*,
$MORPHZ_*) for every request, served on loopback only, and the page says so.

--users FILE: a JSON object mapping each inspector user's token to the Morphz bearer
token it acts with, e.g. {"ui-7f3a...": "erin-token-..."}. A user signs in at /login
with the inspector token (the reply sets an HttpOnly session cookie) or sends
`Authorization: Bearer UI-TOKEN` with each request. The Morphz token stays in this
process: no page or reply carries it. Morphz authorizes every call as that principal,
so a user sees only what its principal may read."""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from http.cookies import SimpleCookie
from typing import Callable, Mapping, Optional

from morphz.client import Client, Credentials
from morphz.client.errors import input_error
from morphz.services.ui.views import Reader

COOKIE = "morphz_ui"
MAX_SESSIONS = 1024
MAX_READERS = 64


@dataclass(frozen=True)
class Connection:
    """Where Morphz is, the credentials every client starts from and each call's deadline."""
    server: Optional[str]
    credentials: Credentials
    timeout: float

    def reader(self, credentials: Credentials) -> Reader:
        return Reader(Client(self.server, credentials=credentials, timeout=self.timeout))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class OwnPrincipal:
    """Development mode: every request acts as this process's credentials."""
    mode = "development"

    def __init__(self, connection: Connection) -> None:
        self._reader = connection.reader(connection.credentials)

    def reader_for(self, headers: Mapping[str, str]) -> Optional[Reader]:
        return self._reader

    def login(self, token: str) -> Optional[str]:
        return None

    def close(self) -> None:
        self._reader.close()


def load_users(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            users = json.load(f)
    except (OSError, ValueError) as e:
        raise input_error(f"--users {path}: {e}", field="users") from None
    if not isinstance(users, dict) or not users or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in users.items()):
        raise input_error("--users must hold a JSON object mapping each inspector token to "
                          "a Morphz token (non-empty strings)", field="users")
    return users


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class UserTokens:
    """--users: each request acts as the Morphz token its user's inspector token maps to."""
    mode = "users"

    def __init__(self, connection: Connection, users: Mapping[str, str],
                 new_session: Callable[[], str] = lambda: secrets.token_urlsafe(32)) -> None:
        self._connection = connection
        self._morphz = {_digest(k): v for k, v in users.items()}
        self._new_session = new_session
        self._lock = threading.Lock()
        self._sessions: "OrderedDict[str, str]" = OrderedDict()  # session -> user digest
        self._readers: "OrderedDict[str, Reader]" = OrderedDict()

    def _user(self, token: str) -> Optional[str]:
        digest = _digest(token)
        for known in self._morphz:  # constant time per comparison
            if hmac.compare_digest(known, digest):
                return known
        return None

    def login(self, token: str) -> Optional[str]:
        user = self._user(token.strip())
        if user is None:
            return None
        session = self._new_session()
        with self._lock:
            self._sessions[session] = user
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def reader_for(self, headers: Mapping[str, str]) -> Optional[Reader]:
        user = None
        scheme, _, token = (headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            user = self._user(token.strip())
        else:
            cookie = SimpleCookie(headers.get("Cookie") or "")
            if COOKIE in cookie:
                with self._lock:
                    user = self._sessions.get(cookie[COOKIE].value)
        if user is None:
            return None
        with self._lock:
            reader = self._readers.pop(user, None)
            if reader is None:
                reader = self._connection.reader(
                    replace(self._connection.credentials, token=self._morphz[user]))
            self._readers[user] = reader
            while len(self._readers) > MAX_READERS:
                self._readers.popitem(last=False)[1].close()
        return reader

    def close(self) -> None:
        with self._lock:
            while self._readers:
                self._readers.popitem()[1].close()
