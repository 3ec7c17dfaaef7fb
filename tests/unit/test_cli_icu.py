"""`morphz` where PyICU cannot be imported (not installed, or built against an ICU library
the system no longer has): one JSON error saying what the system needs, exit 1, before
anything is served or written. The real `morphz` script of this venv runs with a PyICU
that fails as a vanished libicu makes it fail, put first on its path."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LOST = "libicuuc.so.72: cannot open shared object file: No such file or directory"


def serve_without_icu(morphz: Path, tmp_path: Path) -> dict:
    """`morphz serve` run with a PyICU that cannot load its ICU library: the JSON error
    it printed, once checked that it exited 1 before serving or writing anything."""
    (tmp_path / "icu").mkdir()
    (tmp_path / "icu" / "__init__.py").write_text(f"raise ImportError({LOST!r})\n")
    done = subprocess.run([str(morphz), "serve", "--listen", "127.0.0.1:0",
                           "--data", str(tmp_path / "data")],
                          env=dict(os.environ, PYTHONPATH=str(tmp_path)),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()
    return json.loads(done.stdout)["error"]


def test_serve_without_icu_says_what_the_system_needs(tmp_path):
    error = serve_without_icu(Path(sys.executable).with_name("morphz"), tmp_path)
    assert (error["reason"], error["code"]) == ("ICU_UNAVAILABLE", "FAILED_PRECONDITION")
    assert error["details"]["cause"] == LOST
    for needed in ("libicu-dev", "pkg-config", "--no-binary pyicu"):
        assert needed in error["message"], needed
