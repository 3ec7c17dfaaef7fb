"""The README's and the docs' shell examples work as printed: each block runs against fresh
servers of the session's topology (split: the CLI finds each service through its MORPHZ_*
variable), and the README's quick start runs its two commands."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import grpc
import pytest

from tests.docs import DOCS, README, ROOT, block, section


def _section(title: str, page=README) -> str:
    return section(page, title)


def _block(text: str, lang: str) -> str:
    return block(text, lang)


def _run(script: str, tmp_path, fresh_servers) -> str:
    """stdout of `script` (bash -euo pipefail) with `morphz` on PATH and fresh servers."""
    servers = fresh_servers("data").start()
    try:
        bindir = os.path.dirname(sys.executable)
        env = dict(os.environ, **servers.endpoints.cli_env(),
                   PATH=f"{bindir}:{os.environ['PATH']}")
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout
    finally:
        servers.stop()


def test_readme_walkthrough_runs_as_printed(tmp_path, fresh_servers):
    out = _run(_block(_section("Walk-through"), "sh"), tmp_path, fresh_servers)
    receipt = _block(_section("Walk-through"), "text")
    assert receipt in out
    frames = out.split("id: release")
    assert "(goal ship-v1) (stage packaging)" in frames[1]
    assert "(goal ship-v1) (stage waiting-tests)" in frames[2]
    assert "regression suite: 120 passed, 0 failed" in out
    assert "state: retired" in out
    assert "audit context-default: match (7 events replayed)" in out


def test_readme_sessions_example_runs_as_printed(tmp_path, fresh_servers):
    section = _section("Sessions, causal scopes and messages", DOCS / "sessions.md")
    out = _run(_block(section, "sh"), tmp_path, fresh_servers)
    for line in _block(section, "text").splitlines():  # the key outputs, as printed
        assert line.strip() in out, line
    # main's evaluation holds the late result and the message, never ops's question.
    encoding = out.split("(protocol", 1)[1].split("; snapshot", 1)[0]
    assert "staging is live" in encoding and "Disk is fine; go ahead." in encoding
    assert "(kind message) (from ops) (to main)" in encoding
    assert "Is the disk full?" not in encoding


def test_readme_python_client_example_runs_as_printed(endpoints):
    section = _section("Python")
    env = dict(os.environ, **endpoints.cli_env())
    out = subprocess.run([sys.executable, "-c", _block(section, "python")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(protocol" in out.stdout and "(evaluate (runtime (session main) (activation a1)))" \
        in out.stdout
    assert "1 [('create', 'release', 'created')]" in out.stdout
    assert "TX_CONFLICT ['frame:release'" in out.stdout


@pytest.mark.split_processes
def test_readme_quick_start_commands_run_as_printed(tmp_path):
    """The quick start's two commands, run in this checkout as printed. `scripts/serve`
    sets up and serves (given a free port and a data folder of the test's own: its
    arguments go to `morphz serve`), and the CLI it installed creates a context there;
    SIGTERM stops it cleanly. `scripts/test` sets up, lints and runs pytest, here on one
    small file: the whole suite is the run this test is part of."""
    commands = [line.partition("#")[0].strip()
                for line in _block(_section("Quick start"), "sh").splitlines()]
    assert [c for c in commands if c] == ["scripts/serve", "scripts/test"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    with open(tmp_path / "serve.stderr", "w") as log:
        server = subprocess.Popen([str(ROOT / "scripts" / "serve"), "--listen", "127.0.0.1:0",
                                   "--data", str(tmp_path / "data")], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = server.stdout.readline()  # after the set-up, once it listens
        assert line.startswith("morphz: serving on"), (tmp_path / "serve.stderr").read_text()
        address = line.split()[3]
        created = subprocess.run([str(ROOT / ".venv" / "bin" / "morphz"), "--server", address,
                                  "context", "create", "quick-start"], capture_output=True,
                                 text=True, timeout=60)
        assert created.returncode == 0 and "context: quick-start" in created.stdout, \
            created.stdout + created.stderr
        with grpc.insecure_channel(address) as ch:  # it serves from the test's folder
            grpc.channel_ready_future(ch).result(timeout=10)
        assert (tmp_path / "data" / "store").exists()
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0, (tmp_path / "serve.stderr").read_text()[-4000:]
    tested = subprocess.run([str(ROOT / "scripts" / "test"), "-q", "tests/unit/test_cli_seconds.py"],
                            cwd=ROOT, env=dict(env, MORPHZ_TEST_WORKERS="0"),
                            capture_output=True, text=True, timeout=600)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-4000:]
    assert re.search(r"^\d+ passed", tested.stdout.splitlines()[-1]), tested.stdout[-2000:]
