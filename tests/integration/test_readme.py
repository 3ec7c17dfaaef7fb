"""The README's shell examples work as printed: each block runs against fresh servers of
the session's topology (split: the CLI finds each service through its MORPHZ_* variable)."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    return README.read_text().split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _block(section: str, lang: str) -> str:
    return re.search(rf"```{lang}\n(.*?)```", section, re.S).group(1)


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
    receipt = re.search(r"```text\n(.*?)```", README.read_text(), re.S).group(1)
    assert receipt in out
    frames = out.split("id: release")
    assert "(goal ship-v1) (stage packaging)" in frames[1]
    assert "(goal ship-v1) (stage waiting-tests)" in frames[2]
    assert "regression suite: 120 passed, 0 failed" in out
    assert "state: retired" in out
    assert "audit context-default: match (7 events replayed)" in out


def test_readme_sessions_example_runs_as_printed(tmp_path, fresh_servers):
    section = _section("Sessions, causal scopes and messages")
    out = _run(_block(section, "sh"), tmp_path, fresh_servers)
    for line in _block(section, "text").splitlines():  # the key outputs, as printed
        assert line.strip() in out, line
    # main's evaluation holds the late result and the message, never ops's question.
    encoding = out.split("(protocol", 1)[1].split("; snapshot", 1)[0]
    assert "staging is live" in encoding and "Disk is fine; go ahead." in encoding
    assert "(kind message) (from ops) (to main)" in encoding
    assert "Is the disk full?" not in encoding


def test_readme_python_client_example_runs_as_printed(endpoints):
    section = _section("Use it from your agent runtime")
    env = dict(os.environ, **endpoints.cli_env())
    out = subprocess.run([sys.executable, "-c", _block(section, "python")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(protocol" in out.stdout and "(evaluate (runtime (session main) (activation a1)))" \
        in out.stdout
    assert "1 [('create', 'release', 'created')]" in out.stdout
    assert "TX_CONFLICT ['frame:release'" in out.stdout
