"""Addresses given on the command line (--server, --listen): a bad one is a structured
CONTEXT_INPUT_INVALID naming its field, whose message echoes a bounded part of it (SEC-03)."""
from __future__ import annotations

import pytest

from morphz.client.errors import MorphzError as ClientError
from morphz.client.options import listen_address
from morphz.services.cli.connect import check_server
from morphz.shared.errors import MorphzError

LONG = "h" * 100_000


@pytest.mark.parametrize("check, field", [(check_server, "server"), (listen_address, "listen")])
def test_sec_03_a_bad_address_is_refused_with_a_bounded_message(check, field):
    for bad in ("no-port", "host:", ":7070", "host:port", "host:99999", LONG):
        with pytest.raises((MorphzError, ClientError)) as e:
            check(bad)
        assert e.value.reason == "CONTEXT_INPUT_INVALID", bad
        assert e.value.details["field"] == field
        assert len(str(e.value)) < 400, bad[:20]


def test_listen_address_takes_port_0_and_bracketed_ipv6():
    assert listen_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert listen_address("[::1]:8080") == ("::1", 8080)
    assert check_server("127.0.0.1:7070") == "127.0.0.1:7070"
