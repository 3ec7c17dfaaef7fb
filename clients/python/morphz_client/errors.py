"""Errors the client raises: one exception per failure, carrying the server's stable
`reason` (branch on it, never on `message`), the gRPC `code` and the `details` the
server named (op index, ref, changed boundaries...).

The class follows the gRPC code the server's error table gives the reason, so
`except NotFoundError` catches FRAME_NOT_FOUND and EVENT_NOT_FOUND alike; transport
failures (no server, deadline) are UnavailableError with reason UNAVAILABLE or
DEADLINE_EXCEEDED.
"""
from __future__ import annotations

import json
from typing import Any, Optional

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

DOMAIN = "morphz"
_STATUS_KEY = "grpc-status-details-bin"  # where gRPC carries a google.rpc.Status


class MorphzError(Exception):
    """A failed call: `reason` (stable code), `code` (gRPC status name), `message`
    (for people), `details` (what was offending; JSON values decoded)."""

    def __init__(self, reason: str, message: str, *, code: str = "UNKNOWN",
                 details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason, self.message, self.code = reason, message, code
        self.details: dict[str, Any] = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "message": self.message,
                "details": self.details}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason!r}, {self.message!r}, {self.details!r})"


class InvalidInputError(MorphzError):
    """INVALID_ARGUMENT: the request itself is wrong (parse errors, bad names, limits)."""


class NotFoundError(MorphzError):
    """NOT_FOUND: a context, frame, event, session, snapshot... does not exist (or the
    caller's scope may not see it)."""


class AlreadyExistsError(MorphzError):
    """ALREADY_EXISTS: CONTEXT_EXISTS, FRAME_EXISTS, IDEMPOTENCY_MISMATCH..."""


class PreconditionError(MorphzError):
    """FAILED_PRECONDITION: a rule of the Mind refused the change as it stands."""


class AbortedError(MorphzError):
    """ABORTED: a concurrent change got in first; reread and try again."""


class ConflictError(AbortedError):
    """TX_CONFLICT: boundaries the transaction reads or writes changed after its
    base-version. `changed` lists them ({"boundary", "revision"[, "tick"]})."""

    @property
    def changed(self) -> list[dict[str, Any]]:
        return list(self.details.get("changed") or [])

    @property
    def boundaries(self) -> list[str]:
        """The changed boundaries' names, e.g. ["frame:release"]."""
        return [c["boundary"] for c in self.changed if isinstance(c, dict)]

    @property
    def base(self) -> Optional[int]:
        return self.details.get("base")

    @property
    def latest(self) -> Optional[int]:
        return self.details.get("latest")


class LimitError(MorphzError):
    """RESOURCE_EXHAUSTED: a server limit or budget (details name it)."""


class UnavailableError(MorphzError):
    """The server could not be reached or did not answer in time (UNAVAILABLE,
    DEADLINE_EXCEEDED, CANCELLED, OWNERSHIP_LOST): whether a write happened is unknown
    unless it carried a request id (then retrying it is safe)."""


class AuthError(MorphzError):
    """UNAUTHENTICATED or PERMISSION_DENIED."""


class DataLossError(MorphzError):
    """DATA_LOSS: a stored record is corrupt (SNAPSHOT_CORRUPT, BACKUP_CORRUPT)."""


class InternalError(MorphzError):
    """INTERNAL and anything unexpected."""


_BY_CODE: dict[str, type[MorphzError]] = {
    "INVALID_ARGUMENT": InvalidInputError,
    "NOT_FOUND": NotFoundError,
    "ALREADY_EXISTS": AlreadyExistsError,
    "FAILED_PRECONDITION": PreconditionError,
    "ABORTED": AbortedError,
    "RESOURCE_EXHAUSTED": LimitError,
    "UNAVAILABLE": UnavailableError,
    "DEADLINE_EXCEEDED": UnavailableError,
    "CANCELLED": UnavailableError,
    "UNAUTHENTICATED": AuthError,
    "PERMISSION_DENIED": AuthError,
    "DATA_LOSS": DataLossError,
}
_BY_REASON: dict[str, type[MorphzError]] = {"TX_CONFLICT": ConflictError}


def error_class(reason: str, code: str) -> type[MorphzError]:
    return _BY_REASON.get(reason) or _BY_CODE.get(code, InternalError)


def make_error(reason: str, message: str, code: str,
               details: Optional[dict[str, Any]] = None) -> MorphzError:
    return error_class(reason, code)(reason, message, code=code, details=details)


def input_error(message: str, **details: Any) -> MorphzError:
    """A bad argument caught before anything is sent (same reason as the server's)."""
    return InvalidInputError("CONTEXT_INPUT_INVALID", message, code="INVALID_ARGUMENT",
                             details=details)


def from_rpc_error(e: grpc.RpcError) -> MorphzError:
    """The structured error a Morphz server sent (google.rpc.Status + ErrorInfo), or a
    transport failure named after its gRPC code."""
    code_enum = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
    code = code_enum.name
    status = _status_of(e)
    if status is not None:
        for d in status.details:
            if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                d.Unpack(info)
                details = {k: _maybe_json(v) for k, v in info.metadata.items()}
                return make_error(info.reason, status.message, code, details)
    message = e.details() if callable(getattr(e, "details", None)) else ""
    return make_error(code, message or code, code)


def _status_of(e: grpc.RpcError) -> Optional[status_pb2.Status]:
    """The google.rpc.Status in the trailers (sync and grpc.aio errors alike)."""
    trailers = e.trailing_metadata() if callable(getattr(e, "trailing_metadata", None)) \
        else None
    for key, value in trailers or ():
        if key == _STATUS_KEY:
            try:
                return status_pb2.Status.FromString(value)
            except DecodeError:
                return None
    return None


def _maybe_json(v: str) -> Any:
    try:
        return json.loads(v)
    except ValueError:
        return v
