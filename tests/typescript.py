"""The TypeScript client's package (clients/typescript) made ready by the Python suite:
`npm ci` when its node_modules is missing or was installed from another
package-lock.json, then its build (protos -> types, tsc). npm's output is shown when a
step fails. Used by test_typescript_client.py (which then runs `npm test`) and by
test_client_coverage.py (which runs the built client's coverage walk)."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "clients" / "typescript"
STAMP = PACKAGE / "node_modules" / ".morphz-installed-from"  # package-lock.json's hash
STEP_BOUND = 600  # seconds: npm ci from an empty cache, or the tests on a loaded machine


def npm() -> str:
    found, node = shutil.which("npm"), shutil.which("node")
    if not (found and node):
        pytest.fail("Node.js (node and npm) is needed for the TypeScript client's tests and was "
                    "not found on PATH: install Node.js 20 or later", pytrace=False)
    return found


def env() -> dict[str, str]:
    """npm's environment: quiet, and the tests' `morphz serve` is this venv's."""
    return dict(os.environ, MORPHZ_BIN=str(Path(sys.executable).with_name("morphz")),
                npm_config_audit="false", npm_config_fund="false",
                npm_config_update_notifier="false")


def run(npm_path: str, *args: str, environ: dict[str, str]) -> None:
    # In a process group of its own: whatever it started (the tests' `morphz serve`
    # children) ends with it, even when it fails or overruns.
    proc = subprocess.Popen([npm_path, *args], cwd=PACKAGE, env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=STEP_BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"`npm {' '.join(args)}` ran over {STEP_BOUND} s\n--- stdout\n{stdout}"
                    f"\n--- stderr\n{stderr}", pytrace=False)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.returncode != 0:
        pytest.fail(f"`npm {' '.join(args)}` exited {proc.returncode}\n--- stdout\n{stdout}"
                    f"\n--- stderr\n{stderr}", pytrace=False)


def build() -> tuple[str, dict[str, str]]:
    """npm ci (when needed) and npm run build; (npm, its environment)."""
    npm_path, environ = npm(), env()
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text() != lock:
        run(npm_path, "ci", environ=environ)
        STAMP.write_text(lock)
    run(npm_path, "run", "build", environ=environ)
    return npm_path, environ
