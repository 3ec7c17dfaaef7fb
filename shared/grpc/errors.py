"""The error contract on the wire: MorphzError <-> gRPC status + google.rpc.ErrorInfo.

Servers abort with the reason's status code and an ErrorInfo (domain "morphz",
reason, metadata = details); anything unmapped becomes a sanitized INTERNAL.
Clients turn the status back into the same MorphzError.
"""
from __future__ import annotations

import functools
import json
import logging
from typing import Callable

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from morphz.shared.errors import REASONS, MorphzError, Status
from morphz.shared.limits import echo
from morphz.shared.storage.api import StaleRead

DOMAIN = "morphz"
# What a status may carry of an error (SEC-03): an error's message and details are cut
# to these lengths on the wire, whatever a core put in them, so an error never echoes a
# large input back (a client refuses metadata over 8 KiB: the error would be lost). A
# structured detail (a list of refs, named items) keeps its JSON up to its own length,
# and all of them together up to MAX_DETAILS_BYTES, else each is cut to a string too.
MAX_MESSAGE_CHARS = 1024
MAX_DETAIL_CHARS = 256
MAX_STRUCTURED_CHARS = 4096
MAX_DETAILS_BYTES = 6144
MAX_DETAILS = 16
_log = logging.getLogger("morphz.rpc")

_CODES = {s: getattr(grpc.StatusCode, s.value) for s in Status}
_REASON_OF_CODE = {  # for statuses raised by gRPC itself (deadline, unavailable...)
    grpc.StatusCode.DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
    grpc.StatusCode.UNAVAILABLE: "UNAVAILABLE",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "RESOURCE_EXHAUSTED",
    grpc.StatusCode.CANCELLED: "CANCELLED",
    grpc.StatusCode.UNIMPLEMENTED: "UNIMPLEMENTED",
}


def to_status(err: MorphzError) -> status_pb2.Status:
    metadata = {}
    for k, v in list(err.details.items())[:MAX_DETAILS]:
        text, cap = (v, MAX_DETAIL_CHARS) if isinstance(v, str) else \
            (json.dumps(v), MAX_STRUCTURED_CHARS)
        metadata[echo(str(k), 64)] = echo(text, cap)
    if sum(len(k) + len(v.encode()) for k, v in metadata.items()) > MAX_DETAILS_BYTES:
        metadata = {k: echo(v, MAX_DETAIL_CHARS) for k, v in metadata.items()}
    info = error_details_pb2.ErrorInfo(reason=err.reason, domain=DOMAIN, metadata=metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    code = _CODES[err.status]
    return status_pb2.Status(code=code.value[0], message=echo(err.message, MAX_MESSAGE_CHARS),
                             details=[detail])


def abort(context: grpc.ServicerContext, err: MorphzError) -> None:
    """End the RPC with `err`'s structured status (raises, as context.abort does)."""
    context.abort_with_status(rpc_status.to_status(to_status(err)))


def rpc_boundary(method: Callable) -> Callable:
    """Wrap a servicer method: MorphzError -> structured status; other errors -> INTERNAL."""
    @functools.wraps(method)
    def wrapper(self, request, context: grpc.ServicerContext):
        try:
            return method(self, request, context)
        except MorphzError as err:
            # Diagnostics: what the caller was told, nothing more (errors echo no secret).
            _log.debug("%s answered %s: %s", method.__qualname__, err.reason,
                       echo(err.message, 200))
            abort(context, err)
        except StaleRead as e:
            abort(context, snapshot_expired(e))
        except Exception:  # noqa: BLE001 - the boundary: log it, answer sanitized
            _log.exception("unhandled error in %s", method.__qualname__)
            abort(context, MorphzError("INTERNAL", "internal error; see the server log"))
    return wrapper


def snapshot_expired(e: StaleRead) -> MorphzError:
    """A read that outlived the store's snapshot under it (a remote store restarted or
    failed over, or the snapshot's lease ran out while a long read such as an audit went
    on): nothing was changed, the whole call may be made again."""
    return MorphzError("STORAGE_SNAPSHOT_EXPIRED", f"the store's read snapshot of context "
                       f"{echo(str(e), 80)} ended before the call did (the store restarted "
                       "or the snapshot expired); make the call again")


def rpc_stream_boundary(method: Callable) -> Callable:
    """rpc_boundary for a server-streaming method (a generator): errors raised while it
    streams end the stream with the same structured status."""
    @functools.wraps(method)
    def wrapper(self, request, context: grpc.ServicerContext):
        try:
            yield from method(self, request, context)
        except MorphzError as err:
            abort(context, err)
        except StaleRead as e:
            abort(context, snapshot_expired(e))
        except Exception:  # noqa: BLE001 - the boundary: log it, answer sanitized
            _log.exception("unhandled error in %s", method.__qualname__)
            abort(context, MorphzError("INTERNAL", "internal error; see the server log"))
    return wrapper


class RemoteError(MorphzError):
    """A MorphzError received over gRPC (reason may be a transport-level one)."""

    def __init__(self, reason: str, message: str, code: str, details: dict) -> None:
        Exception.__init__(self, message)
        self.reason, self.message, self.details, self.code = reason, message, details, code

    @property
    def status(self) -> Status:
        """Its gRPC code: a servicer passing on a failure of a service it called (one
        out of reach, say) answers with that code, not a crash of its boundary."""
        try:
            return Status(self.code)
        except ValueError:
            return Status.INTERNAL

    def to_dict(self) -> dict:
        return {"code": self.code, "reason": self.reason, "message": self.message,
                "details": self.details}


def from_rpc_error(e: grpc.RpcError) -> MorphzError:
    status = rpc_status.from_call(e)
    code = e.code()
    if status is not None:
        for d in status.details:
            if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                d.Unpack(info)
                details = {k: _maybe_json(v) for k, v in info.metadata.items()}
                if info.reason in REASONS:
                    err = MorphzError(info.reason, status.message)
                    err.details = details
                    return err
                return RemoteError(info.reason, status.message, code.name, details)
    reason = _REASON_OF_CODE.get(code, code.name)
    return RemoteError(reason, e.details() or code.name, code.name, {})


def _maybe_json(v: str):
    try:
        return json.loads(v)
    except ValueError:
        return v


def call(fn: Callable, *args, **kwargs):
    """Invoke a stub method, raising MorphzError instead of grpc.RpcError."""
    try:
        return fn(*args, **kwargs)
    except grpc.RpcError as e:
        raise from_rpc_error(e) from None

