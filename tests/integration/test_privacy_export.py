"""`morphz context export` (PRIV-05; docs/privacy.md): a context's events as the lines
`morphz context import` reads, which round-trip: a 20,000-event context exported and
imported into a new one has the same events, times and search hits."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from morphz.services.recall.client import RecallClient
from morphz.services.transaction.core.erase_select import Selector
from tests.integration.test_cli import _env
from tests.polling import until
from tests.topology import ServerProcess

pytestmark = pytest.mark.split_processes  # servers of its own: the same in either topology
WORDS = ("amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor")


def morphz(srv, *args: str, stdout=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "morphz.services.cli.main", *args,
                           "--server", srv.address], stdout=stdout or subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=_env(), timeout=600)


def export_to(srv, context: str, path: Path, *flags: str) -> dict:
    with open(path, "w") as f:
        proc = morphz(srv, "context", "export", context, "--no-progress", "--format=json",
                      *flags, stdout=f)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr)


def test_priv_05_a_20000_event_context_exports_and_imports_the_same(tmp_path):
    srv = ServerProcess(tmp_path / "data", {"MORPHZ_EMBEDDER": "hashing"}).start()
    try:
        c = srv.client(timeout=120)
        c.create_context("source")
        for start in range(0, 20_000, 2_000):
            c.append_events("source", [{
                "session": f"s{i % 3}", "kind": ("user-message", "tool-result")[i % 2],
                "actor": f"actor{i % 5}", "text": f"line {i} {WORDS[i % 8]} {WORDS[i % 7]}",
                "occurred_at": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:{i % 60:02d}:00+02:00"}
                for i in range(start, start + 2_000)])
        exported = tmp_path / "source.jsonl"
        summary = export_to(srv, "source", exported)
        assert summary == {"context": "source", "lines": 20_000,
                           "skipped": {"context-created": 1}}
        c.create_context("copy")
        proc = morphz(srv, "context", "import", str(exported), "--context", "copy",
                      "--no-progress", "--format=json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert json.loads(proc.stdout)["applied"] == 20_000
        again = tmp_path / "copy.jsonl"
        export_to(srv, "copy", again)
        assert again.read_bytes() == exported.read_bytes()  # same events and times
        recall = RecallClient(srv.channel(), timeout=120)
        for context in ("source", "copy"):
            until(lambda c=context: recall.inspect(c)["lag"] == 0, 300, f"{context} indexed")
        for query in ("amber", "basalt cobalt", "line 1234", "fjord harbor"):
            hits = [[h["ref"] for h in recall.search(ctx, query, mode="lexical", limit=50,
                                                      since="2026-03-01T00:00:00+00:00")
                     ["results"]] for ctx in ("source", "copy")]
            assert hits[0] == hits[1] and hits[0], query
        c.close()
    finally:
        assert srv.stop() == 0


def test_priv_05_export_keeps_secrets_back_marks_erasures_and_says_what_it_skipped(tmp_path):
    srv = ServerProcess(tmp_path / "data", {"MORPHZ_EMBEDDER": "hashing"}).start()
    try:
        c = srv.client()
        c.create_context("mixed")
        c.append_event("mixed", "s1", "user-message", "hello",
                       occurred_at="2026-01-05T08:00:00+00:00")
        secret = c.append_event("mixed", "s1", "external", "api key sk-999",
                                secret=True)["ref"]
        gone = c.append_event("mixed", "s1", "tool-result", "temporary output")["ref"]
        c.append_event("mixed", "s2", "user-message", "s2 is here")
        c.append_event("mixed", "s1", "message", "to s2", target_session="s2")
        c.erase("mixed", Selector(refs=(gone,)), "cleanup")
        kept = tmp_path / "kept.jsonl"
        summary = export_to(srv, "mixed", kept)
        lines = [json.loads(line) for line in kept.read_text().splitlines()]
        assert [ln["text"] for ln in lines] == ["hello", f"[secret {secret}]",
                                                 lines[2]["text"], "s2 is here"]
        assert lines[1]["secret"] and lines[2]["erased"] and "temporary" not in kept.read_text()
        assert summary["skipped"] == {"context-created": 1, "message": 1, "erasure": 1}
        revealed = tmp_path / "revealed.jsonl"
        export_to(srv, "mixed", revealed, "--reveal-secrets")
        assert "sk-999" in revealed.read_text()
        window = tmp_path / "window.jsonl"
        export_to(srv, "mixed", window, "--until", "2026-02-01T00:00:00+00:00")
        assert [json.loads(ln)["text"] for ln in window.read_text().splitlines()] == ["hello"]
        c.create_context("reimported")  # the placeholder imports as it reads
        proc = morphz(srv, "context", "import", str(kept), "--context", "reimported",
                      "--no-progress")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        c.close()
    finally:
        assert srv.stop() == 0
