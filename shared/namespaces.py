"""Context names in namespaces (SEC-09): with authentication on, a server may place
principals in namespaces (`morphz serve --namespace PRINCIPAL=NAMESPACE`, a tenant
several principals share, and `--private-namespaces`, one of its own for every principal
not given one). A principal's bare context name `N` then means `~NAMESPACE/N`, so the
same name taken in another namespace is another context and creating it tells nothing
about the first. The full name `~NAMESPACE/N` addresses a context from anywhere (an
administrator, or a principal granted rights in it); the policy decides, as for any name.

Principals without a namespace (every one when none is configured, development mode,
server-wide administrators, the services' own principal) use bare names as they are: the
default namespace. A name starting with `~` is a full name; only a context's own
namespace, or an unrestricted caller, may create one. Within one namespace names are
shared: creating a taken name is CONTEXT_EXISTS, as before."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

from morphz.shared.auth import Caller, check_principal
from morphz.shared.errors import MorphzError

QUALIFIED = "~"  # a full name: ~NAMESPACE/NAME
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:+%-]{0,199}")


def check_namespace(name: str) -> str:
    if not isinstance(name, str) or not _NAMESPACE.fullmatch(name):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"invalid namespace {name[:80]!r}: "
                          "letters, digits and ._@:+%- (no /), at most 200",
                          field="namespace")
    return name


def namespace_of_name(context: str) -> Optional[str]:
    """The namespace a full name `~NAMESPACE/N` names; None for a bare name."""
    if not context.startswith(QUALIFIED):
        return None
    namespace, slash, _ = context[1:].partition("/")
    return namespace if slash else None


def in_namespace(context: str, namespace: str) -> str:
    """The name a caller of `namespace` means by `context` ("" : the default namespace)."""
    if not namespace or context.startswith(QUALIFIED):
        return context
    return f"{QUALIFIED}{namespace}/{context}"


def check_create(context: str, caller: Caller) -> None:
    """A full name is created only in the caller's own namespace (unrestricted callers:
    anywhere). FORBIDDEN otherwise, whether or not the context exists."""
    named = namespace_of_name(context)
    if named is None or caller.unrestricted or named == caller.namespace:
        return
    raise MorphzError("FORBIDDEN", f"principal {caller.principal} may not create contexts in "
                      f"namespace {named[:80]}", principal=caller.principal,
                      context=context, right="create")


def private_namespace(principal: str) -> str:
    """A principal's own namespace: its name, `/` and `%` escaped (a full name's
    namespace ends at its first `/`)."""
    return principal.replace("%", "%25").replace("/", "%2F")


@dataclass(frozen=True)
class Namespaces:
    """Which namespace each principal's names live in. `assigned`: principal ->
    namespace; `private`: principals not assigned one get their own."""
    assigned: Mapping[str, str] = field(default_factory=dict)
    private: bool = False

    def of(self, principal: str) -> str:
        """The principal's namespace ("": the default one)."""
        return self.assigned.get(principal) or (private_namespace(principal)
                                                if self.private else "")

    @classmethod
    def parse(cls, pairs: Iterable[str], private: bool = False) -> "Namespaces":
        """`PRINCIPAL=NAMESPACE` pairs, as `morphz serve --namespace` takes them."""
        assigned: dict[str, str] = {}
        for pair in pairs:
            principal, eq, namespace = pair.partition("=")
            if not eq:
                raise MorphzError("CONTEXT_INPUT_INVALID", f"--namespace {pair[:80]!r}: "
                                  "expected PRINCIPAL=NAMESPACE", field="namespace")
            assigned[check_principal(principal, "namespace")] = check_namespace(namespace)
        return cls(assigned, private)
