"""The store's space alarm as `morphz context status` shows it: the health entry
morphz.storage.space (services/storage/space.py) of the server holding the store (the
all-in-one server, or the storage service of a split cluster: $MORPHZ_STORAGE)."""
from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SPACE_HEALTH = "morphz.storage.space"  # as services/server/serving.py registers it
OK, FULL, UNKNOWN = "ok", "full", "unknown"
NOTE = {FULL: "writes are refused STORAGE_FULL until space is freed or the quota raised",
        UNKNOWN: "not reported by this server (a split cluster: set MORPHZ_STORAGE)"}


def storage_space(channel: grpc.Channel, timeout: float) -> str:
    """ok (writes accepted), full (the alarm is raised) or unknown (no such entry there, or
    no answer)."""
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SPACE_HEALTH), timeout=timeout)
    except grpc.RpcError:
        return UNKNOWN
    return {health_pb2.HealthCheckResponse.SERVING: OK,
            health_pb2.HealthCheckResponse.NOT_SERVING: FULL}.get(reply.status, UNKNOWN)
