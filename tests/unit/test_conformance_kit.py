"""The conformance kit (clients/conformance) on its own: its requirement map against the
CONFORMANCE.md it ships (KIT-01), that copy against the project's design/CONFORMANCE.md,
its independence from the server's code (KIT-01), and its signed reports (KIT-02). The
kit against a real server: tests/integration/test_conformance_run.py."""
from __future__ import annotations

import ast
import base64
import json
import pathlib
import subprocess
import sys

import pytest

from morphz_conformance.driver import Driver, Implementation, Rejected
from morphz_conformance.mapping import (EXTENSIONS, PROFILES, REQUIREMENTS, document, included,
                                       statements)
from morphz_conformance.registry import CaseRun, all_cases, case, collect
from morphz_conformance.report import (REDACTED, VerifyError, canonical, keygen, load_private,
                                       load_public, sign, verify)
from morphz_conformance.runner import FAIL, build_report, now, run
from tests.conformance_paths import (CASE_MISSING, KIT, conformance_ids, conformance_md,
                                     design_conformance_md)

# CONFORMANCE.md: "SC-Core holds CORE-*, RECALL-* and AUDIT-*; SC-Durable adds DUR-*;
# SC-Concurrent adds CONC-*; SC-Distributed adds DIST-*. SEC-*, HYB-*, ASM-*, MCP-*,
# KIT-*, UI-*, SOAK-* and PRIV-* are extensions".
PROFILE_OF_PREFIX = {"CORE": "SC-Core", "RECALL": "SC-Core", "AUDIT": "SC-Core",
                     "DUR": "SC-Durable", "CONC": "SC-Concurrent", "DIST": "SC-Distributed",
                     "SEC": "Security", "HYB": "Hybrid", "ASM": "Assembly", "MCP": "MCP",
                     "UI": "UI", "SOAK": "Soak", "PRIV": "Privacy", "KIT": "Kit"}

# Profiles whose every requirement has a case: no id of theirs may be on the list above.
COMPLETE = ("SC-Core", "SC-Durable", "SC-Concurrent")


def test_kit_01_the_kits_requirement_list_is_exactly_the_documents():
    doc = conformance_ids()
    assert len(doc) == len(set(doc)), "an id appears twice in CONFORMANCE.md"
    assert sorted(REQUIREMENTS) == sorted(doc), (
        f"only in the document: {sorted(set(doc) - set(REQUIREMENTS))}; "
        f"only in the kit: {sorted(set(REQUIREMENTS) - set(doc))}")


def test_kit_01_the_kit_ships_the_document_its_map_is_checked_against():
    """What the installed kit reads (mapping.document(), package data) is the copy the
    tests read, and every id it states is one the kit maps."""
    assert document() == conformance_md().read_text(encoding="utf-8")
    assert list(statements()) == conformance_ids()
    assert all(statements().values())


def test_kit_01_the_shipped_document_is_the_projects_design_conformance_md():
    design = design_conformance_md()
    if design is None:
        pytest.skip("no design/CONFORMANCE.md beside this checkout (../shared) to compare "
                    "the kit's copy with")
    assert conformance_md().read_bytes() == design.read_bytes(), \
        f"the kit's copy is not the project's document: cp {design} {conformance_md()}"


def test_kit_01_every_line_maps_to_the_profile_the_document_gives_it():
    for rid in conformance_ids():
        assert REQUIREMENTS[rid] == PROFILE_OF_PREFIX[rid.split("-")[0]], rid
    assert set(REQUIREMENTS.values()) <= set(PROFILES + EXTENSIONS)


def test_kit_01_every_line_has_a_kit_case_unless_listed_as_missing():
    cases = all_cases()
    assert len({c.name for c in cases}) == len(cases), "two cases share a name"
    covered = {c.id for c in cases}
    doc = set(conformance_ids())
    without = sorted(doc - covered - CASE_MISSING)
    assert not without, f"CONFORMANCE lines without a kit case: {without}"
    now_covered = sorted(CASE_MISSING & covered)
    assert not now_covered, f"these have a case now; take them off CASE_MISSING: {now_covered}"
    assert CASE_MISSING <= doc, sorted(CASE_MISSING - doc)
    for profile in COMPLETE:
        assert not {r for r in CASE_MISSING if REQUIREMENTS[r] == profile}, profile


def test_kit_01_a_profile_includes_the_ones_below_it():
    assert included("SC-Core") == ("SC-Core",)
    assert included("SC-Concurrent") == ("SC-Core", "SC-Durable", "SC-Concurrent")
    assert included("Security") == ("Security",)
    with pytest.raises(ValueError):
        included("SC-Everything")


def test_kit_01_the_kit_imports_nothing_from_the_servers_code():
    """No import statement of the kit names the server's package (`morphz`, whose
    generated stubs the kit does not use either: it makes its own), and importing every
    module of the kit in a fresh interpreter loads no `morphz` module."""
    package = KIT / "morphz_conformance"
    sources = [p for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    assert any("stubs" in p.parts for p in sources), \
        "the kit's generated stubs are missing: run clients/conformance/scripts/gen.py"
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name != "morphz" and not name.startswith("morphz."), \
                    f"{path.relative_to(KIT)} imports {name}"
    modules = sorted({".".join(p.relative_to(KIT).with_suffix("").parts).removesuffix(".__init__")
                      for p in sources})
    probe = ("import importlib, sys\n"
             f"for m in {modules!r}: importlib.import_module(m)\n"
             "print([m for m in sys.modules if m == 'morphz' or m.startswith('morphz.')])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=KIT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


# -- KIT-02: signed reports --------------------------------------------------------------------------
def _report() -> dict:
    return {"format": "morphz-conformance-report/1", "profile": "SC-Core",
            "cases": [{"id": "CORE-01", "outcome": "pass", "reason": "", "ms": 3},
                      {"id": "CORE-02", "outcome": "fail", "reason": "时间 offset", "ms": 5}],
            "verdict": "fail"}


@pytest.fixture
def keys(tmp_path):
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    keygen(str(private), str(public))
    return private, public


def test_kit_02_a_signed_report_verifies_and_every_changed_byte_fails(keys):
    private, public = keys
    signed = sign(_report(), load_private(str(private)))
    verify(signed, load_public(str(public)))
    verify(json.loads(json.dumps(signed, indent=4)), load_public(str(public)))  # layout free
    body = canonical(signed)
    for i in range(len(body)):
        for flip in (1, 0x20):
            changed = bytearray(body)
            changed[i] ^= flip
            try:
                tampered = json.loads(changed.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                continue  # not a report any more: nothing to verify
            if canonical(tampered) == body:
                continue  # the same report (the flip undid itself under parsing)
            tampered["signature"] = signed["signature"]
            with pytest.raises(VerifyError):
                verify(tampered, load_public(str(public)))


def test_kit_02_a_report_signed_by_another_key_or_unsigned_fails(keys, tmp_path):
    private, public = keys
    other_private, other_public = tmp_path / "o.pem", tmp_path / "o.pub"
    keygen(str(other_private), str(other_public))
    signed = sign(_report(), load_private(str(other_private)))
    with pytest.raises(VerifyError, match="another key"):
        verify(signed, load_public(str(public)))
    with pytest.raises(VerifyError, match="not signed"):
        verify(_report(), load_public(str(public)))


def test_kit_02_keys_and_signatures_are_openssls(keys, tmp_path):
    """A key openssl made signs; the kit's own keys read in openssl; openssl verifies the
    kit's signature over the canonical encoding: the format is no private one."""
    private, public = keys
    assert subprocess.run(["openssl", "pkey", "-in", str(private), "-noout"]).returncode == 0
    derived = subprocess.run(["openssl", "pkey", "-in", str(private), "-pubout"],
                             capture_output=True, check=True).stdout
    assert derived == public.read_bytes()
    o_key, o_pub = tmp_path / "openssl.pem", tmp_path / "openssl.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(o_key)],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(o_key), "-pubout", "-out", str(o_pub)],
                   check=True, capture_output=True)
    signed = sign(_report(), load_private(str(o_key)))
    verify(signed, load_public(str(o_pub)))
    (tmp_path / "body").write_bytes(canonical(signed))
    (tmp_path / "sig").write_bytes(base64.b64decode(signed["signature"]["value"]))
    checked = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(o_pub),
                              "-rawin", "-in", str(tmp_path / "body"), "-sigfile",
                              str(tmp_path / "sig")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_kit_02_the_private_key_is_its_owners_alone(keys):
    private, _ = keys
    assert private.stat().st_mode & 0o077 == 0


class _Echoing(Driver):
    """A stand-in implementation that echoes its caller's credentials in its errors (the
    worst case a report must survive): not a real server, because the point is a target
    that misbehaves this way."""

    def __init__(self, token: str) -> None:
        self.token = token

    def implementation(self) -> Implementation:
        return Implementation("echoing", "1")

    def create_context(self, context, *, window=0):
        raise Rejected("UNAUTHENTICATED", f"token {self.token} is not known")


@case("CORE-01", "a case that meets the echoing error")
def _meets_the_echo(t: CaseRun):
    t.context()


@case("CORE-02", "a case that plants a secret text and fails on it")
def _plants_a_secret(t: CaseRun):
    t.check(False, f"saw {t.secret('the launch code is 0000-SECRET')} in the encoding")


def test_kit_02_no_credential_or_secret_text_reaches_the_report_or_its_log(capsys):
    token = "tok-3f1c9e7a-PLANTED"
    import types
    cases = collect([types.SimpleNamespace(a=_meets_the_echo, b=_plants_a_secret)])
    secrets = {token}
    results = run(_Echoing(token), cases, sys.stdout, secrets)
    report = build_report(results, profile="SC-Core", extensions=[], driver=_Echoing(token),
                          target="127.0.0.1:1", started=now(), ms=1, partial=True,
                          secrets=secrets, case_ids={"CORE-01", "CORE-02"})
    logged = capsys.readouterr().out
    text = json.dumps(report, ensure_ascii=False)
    assert [r.outcome for r in results] == [FAIL, FAIL]
    for leaked in (token, "0000-SECRET"):
        assert leaked not in text and leaked not in logged
    assert REDACTED in report["cases"][0]["reason"] and REDACTED in report["cases"][1]["reason"]


def test_kit_a_target_that_does_not_start_is_a_json_error_not_a_traceback(tmp_path):
    kit = pathlib.Path(sys.executable).with_name("morphz-conformance")
    done = subprocess.run([str(kit), "run", "--profile", "SC-Core", "--target", "127.0.0.1:9",
                           "--start-cmd", "false", "--report", str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert json.loads(done.stderr)["error"]["reason"] == "TARGET_CONTROL_FAILED"
    assert not (tmp_path / "r.json").exists()


class _NoHooks(Driver):
    def implementation(self) -> Implementation:
        return Implementation("none", "0")


def test_kit_01_a_conditional_requirement_declared_not_offered_does_not_block_the_verdict():
    """DUR-08 holds "with replicated storage": declared not offered, its case is reported
    not-offered and the verdict can pass; undeclared, a driver without the hook makes it
    not-applicable and the verdict fails. The declaration covers no other case."""
    by_id = {c.id: c for c in all_cases()}
    declared = frozenset({"replicated-storage"})
    lacking = run(_NoHooks(), [by_id["DUR-08"]], None, set())
    offered = run(_NoHooks(), [by_id["DUR-08"]], None, set(), declared)
    other = run(_NoHooks(), [by_id["DUR-01"]], None, set(), declared)
    assert [r.outcome for r in lacking + offered + other] == [
        "not-applicable", "not-offered", "not-applicable"]

    def verdict(results, not_offered=frozenset()) -> dict:
        return build_report(results, profile="SC-Durable", extensions=[], driver=_NoHooks(),
                            target="127.0.0.1:1", started=now(), ms=1, partial=False,
                            secrets=set(), case_ids=set(REQUIREMENTS), not_offered=not_offered)
    passed = verdict(offered, declared)
    assert (passed["verdict"], passed["not_offered"]) == ("pass", ["replicated-storage"])
    assert passed["summary"]["not-offered"] == 1
    assert verdict(lacking)["verdict"] == FAIL
    assert verdict(offered + other, declared)["verdict"] == FAIL
