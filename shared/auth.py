"""Who calls: the principal a request was authenticated as, in a form the cores take
(a `Caller`), and the bearer tokens a server knows. Transport-neutral: the gRPC side
(establishing the principal from a client certificate or a token) is
shared/grpc/auth.py.

A token file maps tokens to principal names, as a JSON object {"TOKEN": "principal"} or
as lines `TOKEN PRINCIPAL` (blank lines and lines starting with # are skipped). A token
may be given as `sha256:HEX` (its SHA-256 digest in hex), so the file need not hold the
secret itself. Only digests are kept in memory: a token is looked up by its digest."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Mapping, Optional

from morphz.shared.errors import MorphzError
from morphz.shared.limits import echo

DEFAULT_SERVICE_PRINCIPAL = "morphz-service"
# How a caller was established: a client certificate, a bearer token, no authentication
# configured on the server (development mode), or a call inside this process.
MTLS, TOKEN, OPEN, IN_PROCESS = "mtls", "token", "open", "in-process"
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
_PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:/+-]{0,199}")
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class Caller:
    """The principal a request comes from, passed to the cores' entry points, which
    authorize it against the context's policy (shared/policy.py). `principal` is empty
    when the server runs without authentication (OPEN) and for calls made inside this
    process (IN_PROCESS: start-up checks, tools and tests holding the core itself).
    `service`: the services' own principal (they call each other with it, after checking
    the user's rights where the user's call arrived). `admin`: a server-wide
    administrator (`morphz serve --admin`). `namespace`: where its bare context names
    live ("": the default namespace; shared/namespaces.py)."""
    principal: str
    via: str
    service: bool = False
    admin: bool = False
    namespace: str = ""

    @property
    def authenticated(self) -> bool:
        return self.via in (MTLS, TOKEN)

    @property
    def unrestricted(self) -> bool:
        """No policy applies: development mode, in-process code, the services' own
        principal and server-wide administrators may do anything."""
        return not self.authenticated or self.service or self.admin


OPEN_CALLER = Caller("", OPEN)
IN_PROCESS_CALLER = Caller("", IN_PROCESS)
# What recall and encoding pass to the transaction service once they have authorized the
# user themselves: the services' own standing, as their principal has over the wire.
SERVICE_CALLER = Caller("", IN_PROCESS, service=True)


def check_principal(name: str, field: str = "principal") -> str:
    """A principal name as tokens, certificates and policies give it."""
    if not isinstance(name, str) or not _PRINCIPAL.fullmatch(name):
        raise _invalid(f"invalid principal name {echo(str(name))!r}", field)
    return name


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Tokens:
    """Bearer tokens -> principal names, kept as SHA-256 digests only."""

    def __init__(self, principals: Mapping[str, str]) -> None:
        """`principals`: token (or `sha256:HEX`) -> principal name."""
        self._by_digest: dict[str, str] = {}
        for token, principal in principals.items():
            if not isinstance(token, str) or not isinstance(principal, str):
                raise _invalid("token and principal must be strings")
            check_principal(principal, "tokens")
            known = _DIGEST.fullmatch(token)
            if known is None and len(token) < MIN_TOKEN_CHARS:
                raise _invalid(f"a token must have at least {MIN_TOKEN_CHARS} characters "
                               f"(the one for {principal!r} has {len(token)})")
            if known is None and any(c.isspace() for c in token):
                raise _invalid(f"the token for {principal!r} contains whitespace")
            self._by_digest[known.group(1) if known else _digest(token)] = principal
        if not self._by_digest:
            raise _invalid("no tokens")

    def principal(self, token: str) -> Optional[str]:
        """The principal `token` stands for, or None."""
        return self._by_digest.get(_digest(token))

    def __len__(self) -> int:
        return len(self._by_digest)

    def __repr__(self) -> str:  # never the digests
        return f"Tokens({len(self)} tokens)"

    @classmethod
    def parse(cls, text: str) -> "Tokens":
        """A token file's content: a JSON object, or `TOKEN PRINCIPAL` lines."""
        if text.lstrip().startswith(("{", "[")):
            try:
                table = json.loads(text)
            except ValueError as e:
                raise _invalid(f"token file is not valid JSON: {e.msg} (line {e.lineno})") \
                    from None
            if not isinstance(table, dict):
                raise _invalid("a JSON token file must be an object {token: principal}")
            return cls(table)
        table = {}
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2:
                raise _invalid(f"token file line {number}: expected `TOKEN PRINCIPAL`",
                               line=number)
            if parts[0] in table:
                raise _invalid(f"token file line {number}: a token given twice", line=number)
            table[parts[0]] = parts[1]
        return cls(table)

    @classmethod
    def load(cls, path: str) -> "Tokens":
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise _invalid(f"cannot read token file {path}: {e}", path=path) from None
        return cls.parse(text)


def read_secret(path: str, field: str) -> str:
    """A token kept in a file (its first line, stripped); `field` names the option."""
    try:
        with open(path, encoding="utf-8") as f:
            value = f.readline().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise _invalid(f"cannot read {path}: {e}", field, path=path) from None
    if not value:
        raise _invalid(f"{path} holds no token", field, path=path)
    return value


def _invalid(message: str, field: str = "tokens", **details: object) -> MorphzError:
    return MorphzError("CONTEXT_INPUT_INVALID", message, field=field, **details)
