"""How a one-member etcd is started on loopback and asked whether it serves: shared by
scripts/cluster, the cluster benchmark and the tests, which all run Debian's `etcd`
binary (package etcd-server, installed by scripts/bootstrap)."""
from __future__ import annotations

import json
import shutil
import urllib.request

MISSING = "no `etcd` binary: run scripts/bootstrap as root, or apt-get install etcd-server"


def etcd_binary() -> str:
    """The etcd binary on PATH; RuntimeError(MISSING) when there is none."""
    binary = shutil.which("etcd")
    if binary is None:
        raise RuntimeError(MISSING)
    return binary


def member_argv(binary: str, name: str, data_dir: str, client: str, peer: str) -> list[str]:
    """A single-member cluster named `name`, serving clients at `client` (host:port) and
    its own peer traffic at `peer`, plain HTTP: loopback only."""
    return [binary, "--name", name, "--data-dir", data_dir,
            "--listen-client-urls", f"http://{client}",
            "--advertise-client-urls", f"http://{client}",
            "--listen-peer-urls", f"http://{peer}",
            "--initial-advertise-peer-urls", f"http://{peer}",
            "--initial-cluster", f"{name}=http://{peer}"]


def health(address: str, timeout: float = 1.0) -> str:
    """SERVING, NOT_SERVING, or "no answer (...)": etcd's /health endpoint."""
    try:
        with urllib.request.urlopen(f"http://{address}/health", timeout=timeout) as r:
            return "SERVING" if json.load(r).get("health") == "true" else "NOT_SERVING"
    except (OSError, ValueError) as e:
        return f"no answer ({type(e).__name__})"
