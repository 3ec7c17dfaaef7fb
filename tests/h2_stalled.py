"""A gRPC call over raw HTTP/2 from a client that never reads its reply (tests of SEC-08):
it announces a stream window of 0 and never sends a WINDOW_UPDATE, so the server can send
nothing of the reply and must hold it, or let it go. gRPC's own clients always read;
this is what a slow or hostile one looks like on the wire (HPACK literals, no Huffman)."""
from __future__ import annotations

import socket
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS = 0x0, 0x1, 0x4
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
INITIAL_WINDOW_SIZE = 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """A header as an HPACK literal without indexing, new name (lengths under 127)."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def _read_frame(sock: socket.socket) -> tuple[int, int]:
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    length = int.from_bytes(head[:3], "big")
    left = length
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise ConnectionError("closed")
        left -= len(chunk)
    return head[3], head[4]


def stalled_call(address: str, path: str, request: bytes) -> socket.socket:
    """Open a connection, send one unary call of `path` with the serialized `request`,
    acknowledge the server's settings, and read nothing more: the returned socket holds
    the call until it is closed."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(PREFACE + _frame(SETTINGS, 0, 0, struct.pack(">HI", INITIAL_WINDOW_SIZE, 0)))
    while _read_frame(sock) != (SETTINGS, 0):  # the server's own settings
        pass
    headers = b"".join(_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", address),
        ("content-type", "application/grpc"), ("te", "trailers")))
    message = b"\x00" + struct.pack(">I", len(request)) + request
    sock.sendall(_frame(SETTINGS, ACK, 0, b"") + _frame(HEADERS, END_HEADERS, 1, headers)
                 + _frame(DATA, END_STREAM, 1, message))
    return sock


def ended_by_server(sock: socket.socket) -> bool:
    """Whether the server has ended the call: answered it with trailers only (a refusal:
    HEADERS ending the stream, which flow control does not hold), reset it, or ended the
    connection (reads what it sent meanwhile)."""
    sock.settimeout(0.01)
    try:
        while True:
            kind, flags = _read_frame(sock)
            if kind in (0x3, 0x7) or (kind == HEADERS and flags & END_STREAM):
                return True  # RST_STREAM, GOAWAY, trailers
    except (TimeoutError, socket.timeout):
        return False
    except (ConnectionError, OSError):
        return True
