"""DIST-05: one description of a server process (services/server/deployment.py) says
what the all-in-one server and each `morphz serve ROLE` run here, call elsewhere (at
which address) and serve on the public port; node.py builds whatever it says."""
from __future__ import annotations

import pytest

from morphz.services.server.config import ServerConfig
from morphz.services.server.deployment import ALL, PARTS, Deployment, Remote
from morphz.shared.errors import MorphzError

S, T = "10.0.0.1:7071", "10.0.0.2:7072"


def describe(role: str, **options) -> Deployment:
    return Deployment.of(role, ServerConfig("data", "127.0.0.1:0", **options))


def test_dist_05_the_all_in_one_runs_every_part_and_keeps_storage_off_the_public_port():
    d = describe(ALL, storage_listen="127.0.0.1:0")
    assert (d.here, d.remote) == (PARTS, ())
    assert d.public == ("transaction", "recall", "encoding")
    assert d.storage_listen == "127.0.0.1:0" and d.service_name == "morphz-all-in-one"
    assert describe(ALL).storage_listen == ""  # the storage API served nowhere


def test_dist_05_each_role_runs_its_part_and_calls_the_others_at_their_addresses():
    assert describe("storage") == Deployment("storage", ("storage",), (), ("storage",), "",
                                             describe("storage").options)
    tx = describe("transaction", storage=S)
    assert (tx.here, tx.public, tx.remote) == (("transaction",), ("transaction",),
                                               (Remote("storage", S),))
    for role in ("recall", "encoding"):
        d = describe(role, storage=S, transaction=T)
        assert (d.here, d.public) == ((role,), (role,)), role
        assert d.remote == (Remote("storage", S), Remote("transaction", T)), role
        assert (d.address_of("storage"), d.address_of("transaction")) == (S, T)
        assert d.service_name == f"morphz-{role}" and not d.runs("storage")


def test_dist_05_the_all_in_one_and_storage_may_keep_the_store_in_postgresql():
    for role in (ALL, "storage"):
        d = describe(role, store="postgres", dsn="host=db")
        assert d.runs("storage") and d.options.dsn == "host=db"


def test_dist_05_with_etcd_and_no_storage_address_storage_is_every_registered_shard():
    d = describe("recall", etcd="127.0.0.1:2379", transaction=T)
    assert d.address_of("storage") == ""


@pytest.mark.parametrize("role, options, field", [
    ("transaction", {}, "storage"),  # calls storage: needs its address
    ("storage", {"storage": S}, "storage"),  # calls nothing
    (ALL, {"transaction": T}, "transaction"),  # runs it here
    ("recall", {"storage": S, "transaction": T, "storage_listen": "127.0.0.1:0"},
     "storage_listen"),
    # --store postgres goes with --dsn, and only where storage runs
    ("storage", {"store": "postgres"}, "dsn"),
    (ALL, {"dsn": "host=db"}, "dsn"),
    ("transaction", {"storage": S, "store": "postgres", "dsn": "host=db"}, "store"),
    ("storage", {"store": "sqlite"}, "store"),
])
def test_dist_05_a_description_whose_options_do_not_go_with_the_role_is_refused(
        role, options, field):
    with pytest.raises(MorphzError) as refused:
        describe(role, **options)
    assert refused.value.reason == "CONTEXT_INPUT_INVALID"
    assert refused.value.details["field"] == field
