"""SEC-09 name resolution (shared/namespaces.py): a bare name lives in its caller's
namespace, a full name `~NAMESPACE/N` is itself, and only a namespace's own principals
(or unrestricted callers) create full names in it."""
from __future__ import annotations

import pytest

from morphz.shared.auth import OPEN_CALLER, TOKEN, Caller
from morphz.shared.errors import MorphzError
from morphz.shared.namespaces import (Namespaces, check_create, in_namespace,
                                      namespace_of_name)


def test_sec_09_bare_names_resolve_in_the_callers_namespace():
    assert in_namespace("plans", "acme") == "~acme/plans"
    assert in_namespace("plans", "") == "plans"  # the default namespace: unchanged
    assert in_namespace("~other/plans", "acme") == "~other/plans"
    assert namespace_of_name("~acme/plans") == "acme"
    assert namespace_of_name("plans") is None and namespace_of_name("~nothing") is None


def test_sec_09_tenants_and_private_namespaces():
    ns = Namespaces.parse(["alice=acme", "bob=acme"], private=True)
    assert ns.of("alice") == ns.of("bob") == "acme"
    assert ns.of("team/carol") == "team%2Fcarol"  # a namespace ends at the first /
    assert Namespaces.parse(["alice=acme"]).of("carol") == ""
    with pytest.raises(MorphzError) as info:
        Namespaces.parse(["alice=a/b"])
    assert info.value.reason == "CONTEXT_INPUT_INVALID"
    with pytest.raises(MorphzError):
        Namespaces.parse(["alice"])


def test_sec_09_full_names_are_created_only_in_ones_own_namespace():
    carol = Caller("carol", TOKEN, namespace="carol")
    check_create("~carol/x", carol)
    check_create("x", carol)
    for name in ("~alice/x", "~alice/absent"):
        with pytest.raises(MorphzError) as info:
            check_create(name, carol)
        assert info.value.reason == "FORBIDDEN"
    check_create("~alice/x", Caller("root", TOKEN, admin=True))
    check_create("~alice/x", OPEN_CALLER)  # development mode: one namespace, any name
