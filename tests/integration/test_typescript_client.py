"""The TypeScript client (clients/typescript) under the Python suite: its build
(tests/typescript.py: `npm ci` when needed, protos -> types, tsc), then `npm test`, which
starts real `morphz serve` processes of its own (this venv's) and runs the client, the
release agent example and the retry tests against them. npm's output is shown when a
step fails."""
from __future__ import annotations

import pytest

from tests.typescript import build, run


@pytest.mark.all_in_one(reason="npm test starts all-in-one `morphz serve` processes of its own")
def test_typescript_client_builds_and_passes_its_tests_against_a_real_server():
    npm, environ = build()
    run(npm, "test", environ=environ)
