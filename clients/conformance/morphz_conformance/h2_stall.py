"""A gRPC call over raw HTTP/2 from a client that never reads its reply (SEC-08): it
announces a stream window of 0 and never sends a WINDOW_UPDATE, so the target can send
nothing of the reply and must hold it, or let it go. gRPC's own clients always read; this
is what a slow or hostile one looks like on the wire (plaintext, HPACK literals, no
Huffman)."""
from __future__ import annotations

import socket
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, RST_STREAM, GOAWAY = 0x0, 0x1, 0x4, 0x3, 0x7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
INITIAL_WINDOW_SIZE = 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """A header as an HPACK literal without indexing, new name (lengths under 127)."""
    n, v = name.encode(), value.encode()
    if len(n) >= 127 or len(v) >= 127:
        raise ValueError("a header too long for this minimal encoder")
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def _read_frame(sock: socket.socket) -> tuple[int, int]:
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    left = int.from_bytes(head[:3], "big")
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise ConnectionError("closed")
        left -= len(chunk)
    return head[3], head[4]


class StalledCall:
    """One unary call of `path` with the serialized `request`, whose reply is never read;
    `metadata`: headers to send (authorization)."""

    def __init__(self, address: str, path: str, request: bytes,
                 metadata: tuple[tuple[str, str], ...] = ()) -> None:
        host, port = address.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=30)
        self.answered = self.ended = False
        try:
            self._sock.sendall(PREFACE + _frame(SETTINGS, 0, 0, struct.pack(
                ">HI", INITIAL_WINDOW_SIZE, 0)))
            while _read_frame(self._sock) != (SETTINGS, 0):  # the target's own settings
                pass
            headers = b"".join(_literal(k, v) for k, v in (
                (":method", "POST"), (":scheme", "http"), (":path", path),
                (":authority", address), ("content-type", "application/grpc"),
                ("te", "trailers"), *metadata))
            message = b"\x00" + struct.pack(">I", len(request)) + request
            self._sock.sendall(_frame(SETTINGS, ACK, 0, b"") +
                               _frame(HEADERS, END_HEADERS, 1, headers) +
                               _frame(DATA, END_STREAM, 1, message))
        except BaseException:
            self._sock.close()
            raise

    def poll(self) -> None:
        """Read what the target sent meanwhile: its reply's headers (`answered`: the reply
        is made, held for want of window) or the call's end (`ended`: trailers only, a
        reset, the connection closed)."""
        self._sock.settimeout(0.01)
        try:
            while not self.ended:
                kind, flags = _read_frame(self._sock)
                if kind in (RST_STREAM, GOAWAY) or (kind == HEADERS and flags & END_STREAM):
                    self.answered = self.ended = True
                elif kind == HEADERS:
                    self.answered = True
        except (TimeoutError, socket.timeout):
            pass
        except (ConnectionError, OSError):
            self.answered = self.ended = True

    def close(self) -> None:
        self._sock.close()
