"""SEC-01: token files (shared/auth.py) and `morphz serve`'s authentication options."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from morphz.shared.auth import Tokens
from morphz.shared.errors import MorphzError

ALICE, BOB = "alice-token-0123456789", "bob-token-abcdefghijkl"


def test_sec_01_token_file_maps_tokens_to_principals_as_json_or_lines():
    as_json = Tokens.parse(json.dumps({ALICE: "alice", BOB: "bob"}))
    as_lines = Tokens.parse(f"# principals\n{ALICE} alice\n\n  {BOB}   bob  \n")
    for tokens in (as_json, as_lines):
        assert tokens.principal(ALICE) == "alice" and tokens.principal(BOB) == "bob"
        assert tokens.principal("alice") is None and tokens.principal("") is None
        assert len(tokens) == 2


def test_sec_01_token_file_may_hold_digests_and_only_digests_are_kept():
    digest = hashlib.sha256(ALICE.encode()).hexdigest()
    tokens = Tokens.parse(f"sha256:{digest} alice\n{BOB} bob\n")
    assert tokens.principal(ALICE) == "alice" and tokens.principal(BOB) == "bob"
    kept = repr(vars(tokens)) + repr(tokens)
    assert ALICE not in kept and BOB not in kept and "bob" in kept


@pytest.mark.parametrize("text, says", [
    ("short alice\n", "at least 16 characters"),
    (f"{ALICE} alice\n{ALICE} bob\n", "line 2: a token given twice"),
    (f"{ALICE}\n", "line 1: expected `TOKEN PRINCIPAL`"),
    ("[1, 2]", "must be an object"),
    ("{not json", "not valid JSON"),
    (json.dumps({ALICE: "has space"}), "invalid principal name"),
    ("# nothing\n", "no tokens"),
])
def test_sec_01_a_bad_token_file_is_a_structured_error(text, says):
    with pytest.raises(MorphzError) as info:
        Tokens.parse(text)
    assert info.value.reason == "CONTEXT_INPUT_INVALID" and says in info.value.message
    assert info.value.details["field"] == "tokens"


def _serve(tmp_path, *flags: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "serve",
                          "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data"), *flags],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1, run.stdout + run.stderr
    return json.loads(run.stdout)["error"]


@pytest.mark.parametrize("flags, field", [
    (["--tls-client-ca", "ca.crt"], "tls_cert"),
    (["--tls-cert", "server.crt"], "tls_key"),
    (["--tls-cert", "missing.crt", "--tls-key", "missing.key"], "tls_cert"),
    (["--tokens", "missing-tokens"], "tokens"),
    (["storage", "--storage-listen", "127.0.0.1:0"], "storage_listen"),
    (["--admin", "root"], "admin"),  # admins without authentication: everyone is one
    (["--tokens", "missing-tokens", "--admin", "bad name"], "admin"),
])
def test_sec_01_serve_refuses_incomplete_or_unreadable_credentials(tmp_path, flags, field):
    error = _serve(tmp_path, *flags)
    assert error["reason"] == "CONTEXT_INPUT_INVALID" and error["details"]["field"] == field
    assert not (tmp_path / "data" / "store").exists()  # refused before the store opened
