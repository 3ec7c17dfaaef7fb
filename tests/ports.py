"""Loopback ports for servers a test starts and names the port of (PostgreSQL, etcd, a
`morphz serve --listen` given in advance).

A port from bind(("127.0.0.1", 0)) is an ephemeral one: between the test choosing it and
the server binding it (or binding it again, restarted on its old port), any outgoing
connection on the machine may be given it, and the server fails to start (seen: "Is
another postmaster already running on port 60861?"). Ports below the kernel's ephemeral
range are never handed out that way, so only another listener can take one; a random one
that binds now is what this gives."""
from __future__ import annotations

import random
import socket

RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST = 10000  # below: the well-known and registered ports services on the machine use


def _ephemeral_low() -> int:
    try:
        with open(RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A loopback TCP port free now and outside the ephemeral range."""
    chooser, high = random.SystemRandom(), _ephemeral_low()
    for _ in range(200):
        port = chooser.randrange(LOWEST, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free loopback port in {LOWEST}-{high - 1}")


def free_address() -> str:
    """127.0.0.1:<free_port()>."""
    return f"127.0.0.1:{free_port()}"
