"""The Coordinator over etcd v3, through its gRPC gateway (HTTP/JSON) with etcd3gw.

etcd3gw was chosen over the gRPC clients because it brings no generated protobuf code
of its own (the `etcd3` package's stubs do not load with this project's protobuf), it is
maintained (OpenStack), and against Debian's etcd 3.4 it does what ownership needs:
leases with keep-alive, transactions comparing create_revision, and watches. It is thin,
so this module is the only one that imports it. Every request carries a timeout.
"""
from __future__ import annotations

import base64
import json
import threading

import etcd3gw
import requests
from etcd3gw import exceptions as etcd_errors

from morphz.shared.coord.api import CoordinationUnavailable, Coordinator, Holder

API_PATH = "/v3/"  # etcd >= 3.4 (Debian 12 ships 3.4.23): no discovery round trip
_NOT_FOUND = 5  # the gRPC code the gateway reports for an unknown lease
# etcd3gw wraps timeouts and refused connections; other transport errors and a reply
# that is not JSON come through as they are.
_FAILURES = (etcd_errors.Etcd3Exception, requests.RequestException, ValueError)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _holder(kv: dict) -> Holder:
    # The gateway's JSON gives 64-bit integers as strings and omits zero values.
    return Holder(base64.b64decode(kv.get("value", "")), int(kv["create_revision"]),
                  int(kv.get("lease", 0)))


class EtcdCoordinator(Coordinator):
    def __init__(self, address: str, *, timeout: float) -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"etcd address must be HOST:PORT, got {address!r}")
        self._host, self._port, self._timeout = host.strip("[]"), int(port), timeout
        # One HTTP session per thread: the lease keeper's renewal waiting on a slow etcd
        # must not hold up a commit thread taking a context, nor the other way round.
        self._local = threading.local()
        self._clients: list[etcd3gw.Etcd3Client] = []
        self._clients_lock = threading.Lock()

    def _client(self) -> etcd3gw.Etcd3Client:
        c = getattr(self._local, "client", None)
        if c is None:
            c = etcd3gw.client(host=self._host, port=self._port, timeout=self._timeout,
                               api_path=API_PATH)
            self._local.client = c
            with self._clients_lock:
                self._clients.append(c)
        return c

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except _FAILURES as e:
            raise CoordinationUnavailable(_describe(e)) from None

    def _post(self, path: str, payload: dict) -> dict:
        return self._call(lambda: self._client().post(self._client().get_url(path),
                                                      json=payload))

    def grant(self, ttl: int) -> int:
        return self._call(lambda: self._client().lease(ttl).id)

    def keep_alive(self, lease: int) -> int:
        return self._call(lambda: etcd3gw.Lease(lease, self._client()).refresh())

    def revoke(self, lease: int) -> None:
        try:
            etcd3gw.Lease(lease, self._client()).revoke()
        except _FAILURES as e:
            if _code(e) != _NOT_FOUND:  # expired or revoked already: what we wanted
                raise CoordinationUnavailable(_describe(e)) from None

    def create(self, key: str, value: bytes, lease: int) -> tuple[bool, Holder]:
        k = _b64(key.encode("utf-8"))
        read = {"request_range": {"key": k}}
        txn = {"compare": [{"key": k, "result": "EQUAL", "target": "CREATE",
                            "create_revision": 0}],
               "success": [{"request_put": {"key": k, "value": _b64(value), "lease": lease}},
                           read],
               "failure": [read]}
        reply = self._call(self._client().transaction, txn)
        created = bool(reply.get("succeeded"))
        kvs = reply["responses"][-1]["response_range"].get("kvs") or []
        if not kvs:  # cannot be: the read sees the txn's put, or the key that failed it
            raise CoordinationUnavailable(f"etcd answered the create of {key} without it")
        return created, _holder(kvs[0])

    def get(self, key: str) -> Holder | None:
        reply = self._post("/kv/range", {"key": _b64(key.encode("utf-8"))})
        kvs = reply.get("kvs") or []
        return _holder(kvs[0]) if kvs else None

    def put(self, key: str, value: bytes) -> None:
        self._post("/kv/put", {"key": _b64(key.encode("utf-8")), "value": _b64(value)})

    def list(self, prefix: str) -> dict[str, bytes]:
        raw = prefix.encode("utf-8")
        end = raw[:-1] + bytes([raw[-1] + 1])  # the first key past the prefix
        reply = self._post("/kv/range", {"key": _b64(raw), "range_end": _b64(end)})
        return {base64.b64decode(kv["key"]).decode("utf-8")[len(prefix):]:
                base64.b64decode(kv.get("value", "")) for kv in reply.get("kvs") or []}

    def close(self) -> None:
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for c in clients:
            c.session.close()


def _code(e: Exception):
    try:
        return json.loads(getattr(e, "detail_text", None) or "").get("code")
    except (ValueError, AttributeError):
        return None


def _describe(e: Exception) -> str:
    detail = getattr(e, "detail_text", None) or str(e)
    try:
        detail = json.loads(detail).get("error", detail)
    except (ValueError, AttributeError):
        pass
    return f"{type(e).__name__}: {detail}"[:300] if detail else type(e).__name__
