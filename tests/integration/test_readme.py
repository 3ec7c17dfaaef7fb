"""The README's walk-through works as printed: its shell block runs against a fresh server."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

from morphz.services.server.app import AllInOne, ServerConfig

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _walkthrough() -> str:
    text = README.read_text()
    section = text.split("## Walk-through", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def test_readme_walkthrough_runs_as_printed(tmp_path):
    app = AllInOne(ServerConfig(str(tmp_path / "data"), "127.0.0.1:0")).start()
    try:
        bindir = os.path.dirname(sys.executable)
        env = dict(os.environ, MORPHZ_SERVER=f"127.0.0.1:{app.port}",
                   PATH=f"{bindir}:{os.environ['PATH']}")
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", _walkthrough()], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        receipt = re.search(r"```text\n(.*?)```", README.read_text(), re.S).group(1)
        assert receipt in out.stdout
        frames = out.stdout.split("id: release")
        assert "(goal ship-v1) (stage packaging)" in frames[1]
        assert "(goal ship-v1) (stage waiting-tests)" in frames[2]
        assert "regression suite: 120 passed, 0 failed" in out.stdout
        assert "state: retired" in out.stdout
        assert "audit context-default: match (7 events replayed)" in out.stdout
    finally:
        app.stop(grace=1)
