"""scripts/demo as a user runs it: a fresh server in a temporary folder, the example
agent loop to its end, the final Mind and the recall walk shown, then the server stopped
and the folder gone."""
from __future__ import annotations

import pathlib
import re
import socket
import subprocess

DEMO = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "demo"


def test_demo_runs_the_release_story_on_a_fresh_server_and_stops_it():
    out = subprocess.run([str(DEMO)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "=== final Mind" in out.stdout
    assert re.search(r"release-procedure r1 \[active\] \(sources release-case-a "
                     r"release-case-b\)", out.stdout)
    assert "=== [main] recall walk from release-procedure" in out.stdout
    assert "the recall walk reached @e5, the raw test report" in out.stdout
    assert "audit release-demo: match" in out.stdout
    found = re.search(r"demo: a fresh server on (\S+):(\d+), data in (\S+)", out.stderr)
    host, port, data = found.group(1), int(found.group(2)), pathlib.Path(found.group(3))
    assert not data.parent.exists()  # the temporary folder is removed
    with socket.socket() as s:  # and nothing serves there any more
        assert s.connect_ex((host, port)) != 0
