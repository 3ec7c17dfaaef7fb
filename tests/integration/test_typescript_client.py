"""The TypeScript client (clients/typescript) under the Python suite: `npm ci` when its
node_modules is missing or was installed from another package-lock.json, then its build
(protos -> types, tsc) and `npm test`, which starts real `morphz serve` processes of its
own (this venv's) and runs the client, the release agent example and the retry tests
against them. npm's output is shown when a step fails."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
STAMP = PACKAGE / "node_modules" / ".morphz-installed-from"  # package-lock.json's hash
STEP_BOUND = 600  # seconds: npm ci from an empty cache, or the tests on a loaded machine


def _npm() -> str:
    npm, node = shutil.which("npm"), shutil.which("node")
    if not (npm and node):
        pytest.fail("Node.js (node and npm) is needed for the TypeScript client's tests and was "
                    "not found on PATH: install Node.js 20 or later", pytrace=False)
    return npm


def _run(npm: str, *args: str, env: dict[str, str]) -> None:
    # In a process group of its own: whatever it started (the tests' `morphz serve`
    # children) ends with it, even when it fails or overruns.
    proc = subprocess.Popen([npm, *args], cwd=PACKAGE, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
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


@pytest.mark.all_in_one(reason="npm test starts all-in-one `morphz serve` processes of its own")
def test_typescript_client_builds_and_passes_its_tests_against_a_real_server():
    npm = _npm()
    env = dict(os.environ, MORPHZ_BIN=str(Path(sys.executable).with_name("morphz")),
               npm_config_audit="false", npm_config_fund="false", npm_config_update_notifier="false")
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text() != lock:
        _run(npm, "ci", env=env)
        STAMP.write_text(lock)
    _run(npm, "run", "build", env=env)
    _run(npm, "test", env=env)
