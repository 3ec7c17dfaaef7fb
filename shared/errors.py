"""Domain errors with stable reason codes.

Cores raise MorphzError; the gRPC layer (shared/grpc/errors.py) maps the reason's
status class to a gRPC code. Clients branch on `reason`, never on `message`.
"""
from __future__ import annotations

from enum import Enum


class Status(Enum):
    """Transport-neutral status classes; one per gRPC code the services use."""
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ABORTED = "ABORTED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    INTERNAL = "INTERNAL"
    UNAVAILABLE = "UNAVAILABLE"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"  # a service this one called did not answer in time
    DATA_LOSS = "DATA_LOSS"  # a stored record is corrupt
    UNAUTHENTICATED = "UNAUTHENTICATED"  # no principal could be established for the call
    PERMISSION_DENIED = "PERMISSION_DENIED"  # a principal the service does not serve
    CANCELLED = "CANCELLED"  # the caller went away


# The error table: every reason code the services raise, with its status class.
REASONS: dict[str, Status] = {
    # authentication (shared/grpc/auth.py): no valid credentials; a principal the
    # service refuses (the raw storage API serves only the services' own principal)
    "UNAUTHENTICATED": Status.UNAUTHENTICATED,
    "PERMISSION_DENIED": Status.PERMISSION_DENIED,
    # authorization (shared/policy.py): the context's policy does not grant the right
    "FORBIDDEN": Status.PERMISSION_DENIED,
    # request shape
    "CONTEXT_INPUT_INVALID": Status.INVALID_ARGUMENT,
    "TX_PARSE_ERROR": Status.INVALID_ARGUMENT,
    "TX_INVALID": Status.INVALID_ARGUMENT,
    "TX_UNKNOWN_OP": Status.INVALID_ARGUMENT,
    "TX_REASON_REQUIRED": Status.INVALID_ARGUMENT,
    "EVENT_KIND_INVALID": Status.INVALID_ARGUMENT,
    "REQUEST_UNDECODABLE": Status.INVALID_ARGUMENT,  # bytes that are not the request message
    "COMMIT_SIZE_LIMIT": Status.INVALID_ARGUMENT,  # what a write would store (commit_bytes)
    # server-wide limits (shared/limits.py; details name the limit): retry later
    "MESSAGE_SIZE_LIMIT": Status.RESOURCE_EXHAUSTED,  # as gRPC's own refusal of a message
    "CONCURRENT_RPC_LIMIT": Status.RESOURCE_EXHAUSTED,
    "BYTES_IN_FLIGHT_LIMIT": Status.RESOURCE_EXHAUSTED,
    # budgets of expensive calls (shared/admission.py), server-wide and per principal
    "EXPENSIVE_RPC_LIMIT": Status.RESOURCE_EXHAUSTED,
    "PRINCIPAL_RPC_LIMIT": Status.RESOURCE_EXHAUSTED,
    "EXPENSIVE_CPU_LIMIT": Status.RESOURCE_EXHAUSTED,
    "PRINCIPAL_CPU_LIMIT": Status.RESOURCE_EXHAUSTED,
    "JOB_LIMIT": Status.RESOURCE_EXHAUSTED,  # server-side jobs (shared/jobs.py)
    "PRINCIPAL_JOB_LIMIT": Status.RESOURCE_EXHAUSTED,
    "JOB_NOT_FOUND": Status.NOT_FOUND,  # unknown, forgotten, or another principal's
    # contexts and references
    "CONTEXT_NOT_FOUND": Status.NOT_FOUND,
    # rows no commit wrote block the context (rebuild-projections moves them aside)
    "CONTEXT_DAMAGED": Status.FAILED_PRECONDITION,
    "CONTEXT_EXISTS": Status.ALREADY_EXISTS,
    "FRAME_NOT_FOUND": Status.NOT_FOUND,
    "EVENT_NOT_FOUND": Status.NOT_FOUND,
    "SOURCE_NOT_FOUND": Status.NOT_FOUND,
    "SESSION_NOT_FOUND": Status.NOT_FOUND,
    "ACTIVATION_NOT_FOUND": Status.NOT_FOUND,
    "CHECKPOINT_NOT_FOUND": Status.NOT_FOUND,
    "RELATION_NOT_FOUND": Status.NOT_FOUND,
    "REVISION_NOT_FOUND": Status.NOT_FOUND,
    # rules of the Mind
    "FRAME_EXISTS": Status.ALREADY_EXISTS,
    "CHECKPOINT_EXISTS": Status.ALREADY_EXISTS,
    "SNAPSHOT_NOT_FOUND": Status.NOT_FOUND,
    "FRAME_RETIRED": Status.FAILED_PRECONDITION,
    "FRAME_PROTECTED": Status.FAILED_PRECONDITION,
    "FRAME_NOT_RETIRED": Status.FAILED_PRECONDITION,
    "FRAME_NOT_PROTECTED": Status.FAILED_PRECONDITION,
    "OBSERVATION_PROTECTED": Status.FAILED_PRECONDITION,
    "OBSERVATION_RETIRED": Status.FAILED_PRECONDITION,
    "NOT_AN_OBSERVATION": Status.FAILED_PRECONDITION,
    "ROOT_REQUEST_PROTECTED": Status.FAILED_PRECONDITION,
    "PLACE_ANCHOR_INVALID": Status.FAILED_PRECONDITION,
    "ACTIVATION_DELIVERED": Status.FAILED_PRECONDITION,
    "SESSION_RETIRED": Status.FAILED_PRECONDITION,
    "SESSION_NOT_RETIRED": Status.FAILED_PRECONDITION,
    # sessions and causal scopes
    "CAUSAL_SCOPE_VIOLATION": Status.FAILED_PRECONDITION,
    "CALL_ANSWERED": Status.FAILED_PRECONDITION,
    # versions and retries
    "TX_CONFLICT": Status.ABORTED,
    "BASE_VERSION_AHEAD": Status.FAILED_PRECONDITION,
    "EXACT_VERSION_REQUIRED": Status.ABORTED,
    "IDEMPOTENCY_MISMATCH": Status.ALREADY_EXISTS,
    "CONCURRENT_UPDATE": Status.ABORTED,
    "BASE_TICK_AHEAD": Status.FAILED_PRECONDITION,
    "RULES_VERSION_UNSUPPORTED": Status.FAILED_PRECONDITION,
    # storage
    "STORAGE_APPEND_ONLY": Status.FAILED_PRECONDITION,
    "STORAGE_FULL": Status.RESOURCE_EXHAUSTED,
    "STORAGE_KEY_INVALID": Status.INVALID_ARGUMENT,
    "STORAGE_TABLE_UNKNOWN": Status.INVALID_ARGUMENT,
    "STORAGE_KEY_MISSING": Status.FAILED_PRECONDITION,  # nothing there to quarantine
    "STORAGE_TABLE_INVALID": Status.INVALID_ARGUMENT,  # a side table in a commit, or back
    "STORAGE_SNAPSHOT_EXPIRED": Status.ABORTED,  # redo the whole read
    "STORAGE_SNAPSHOT_LIMIT": Status.RESOURCE_EXHAUSTED,
    "STORAGE_WATCH_LIMIT": Status.RESOURCE_EXHAUSTED,
    "STORAGE_REQUEST_TOO_LARGE": Status.INVALID_ARGUMENT,
    # the store's database (PostgreSQL) did not answer, lost the connection or is a
    # read-only standby: retry; a commit that got it may or may not have been applied
    "STORAGE_UNAVAILABLE": Status.UNAVAILABLE,
    # a commit whose fencing token is below the highest the context accepted: a newer
    # owner took the context over (retrying it cannot succeed)
    "FENCED": Status.FAILED_PRECONDITION,
    # backups (services/storage/backup.py)
    "BACKUP_RUNNING": Status.ABORTED,            # one backup at a time per storage server
    "BACKUP_FAILED": Status.FAILED_PRECONDITION,  # the server could not make its copy (disk)
    "BACKUP_FILE_EXISTS": Status.ALREADY_EXISTS,  # never overwrite a file
    "BACKUP_INVALID": Status.INVALID_ARGUMENT,    # not a backup, or of another format
    "BACKUP_CORRUPT": Status.DATA_LOSS,           # a backup whose bytes are not what it says
    "RESTORE_TARGET_NOT_EMPTY": Status.FAILED_PRECONDITION,
    # the machine lacks what the server needs: PyICU, or the system ICU library it was
    # built against (services/cli/entry.py says what to install)
    "ICU_UNAVAILABLE": Status.FAILED_PRECONDITION,
    # a restore re-applies the erasures made since the backup (docs/privacy.md): it
    # needs their log, or an explicit --without-erasures; a file that is no such log
    "ERASURE_LOG_REQUIRED": Status.FAILED_PRECONDITION,
    "ERASURE_LOG_INVALID": Status.INVALID_ARGUMENT,
    "PROJECTION_MISMATCH": Status.INTERNAL,
    "INTERNAL": Status.INTERNAL,
    # context ownership (transaction instances run with --etcd)
    "NOT_OWNER": Status.FAILED_PRECONDITION,   # another instance owns it: details name it
    "OWNERSHIP_LOST": Status.UNAVAILABLE,      # this instance's lease is not renewed (yet)
    "COORDINATION_UNAVAILABLE": Status.UNAVAILABLE,  # etcd did not answer a placement read
    # a listing's pages (ListFrames): as RECALL_CURSOR_*
    "FRAMES_CURSOR_INVALID": Status.INVALID_ARGUMENT,
    "FRAMES_CURSOR_STALE": Status.FAILED_PRECONDITION,
    # a reply that would not fit in one message: ask for it in pages
    "REPLY_TOO_LARGE": Status.RESOURCE_EXHAUSTED,
    # the call's deadline passed, or its caller cancelled it, while the server worked on
    # it (shared/deadline.py): the work stopped there, nothing was changed
    "DEADLINE_EXCEEDED": Status.DEADLINE_EXCEEDED,
    "CANCELLED": Status.CANCELLED,
    # encoding (issue 5)
    "ENCODING_BUDGET_EXCEEDED": Status.RESOURCE_EXHAUSTED,
    "MUST_READ_MISSING": Status.FAILED_PRECONDITION,
    "SCOPE_VIOLATION": Status.FAILED_PRECONDITION,
    "SNAPSHOT_INVALID": Status.FAILED_PRECONDITION,
    "SNAPSHOT_CORRUPT": Status.DATA_LOSS,  # a stored record that cannot be decoded or read
    # a snapshot listing's pages (ListSnapshots): as RECALL_CURSOR_*
    "ENCODING_CURSOR_INVALID": Status.INVALID_ARGUMENT,
    "ENCODING_CURSOR_STALE": Status.FAILED_PRECONDITION,
    # privacy (docs/privacy.md): an erasure says why; it takes what runtimes append (a
    # runtime event, of no one's content, is not erasable)
    "ERASE_REASON_REQUIRED": Status.INVALID_ARGUMENT,
    "ERASE_NOT_ERASABLE": Status.FAILED_PRECONDITION,
    # a retention job asked of a context that has no retention policy
    "RETENTION_NOT_SET": Status.FAILED_PRECONDITION,
    # recall (issue 4)
    "RECALL_QUERY_INVALID": Status.INVALID_ARGUMENT,
    "RECALL_TIME_INVALID": Status.INVALID_ARGUMENT,
    "RECALL_LIMIT_INVALID": Status.INVALID_ARGUMENT,
    "RECALL_FILTER_INVALID": Status.INVALID_ARGUMENT,
    "RECALL_DIRECTION_INVALID": Status.INVALID_ARGUMENT,
    "RECALL_CURSOR_INVALID": Status.INVALID_ARGUMENT,
    "RECALL_CURSOR_STALE": Status.FAILED_PRECONDITION,
    "RECALL_ACTIVATION_INVALID": Status.FAILED_PRECONDITION,
    "RECALL_REBUILD_RUNNING": Status.ABORTED,
    "RECALL_INDEX_LOCKED": Status.FAILED_PRECONDITION,
    # a context index's writer lock stayed held by another process (index/tantivy_index.py)
    "RECALL_INDEX_BUSY": Status.UNAVAILABLE,
    # recall, hybrid search (issue 15)
    "RECALL_MODE_INVALID": Status.INVALID_ARGUMENT,
    # the vector leg was built by another embedder (or text version): rebuild the index
    "RECALL_INDEX_STALE": Status.FAILED_PRECONDITION,
    # the server runs with its vector leg off (`--embedder none`): a vector search cannot run
    "RECALL_VECTORS_OFF": Status.FAILED_PRECONDITION,
}


class MorphzError(Exception):
    """A rejection the caller can act on: stable `reason`, human `message`, and
    `details` naming what was offending (op index, ref, boundary...)."""

    def __init__(self, reason: str, message: str, **details: object) -> None:
        if reason not in REASONS:
            raise ValueError(f"unregistered reason code {reason!r}")
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}

    @property
    def status(self) -> Status:
        return REASONS[self.reason]

    def to_dict(self) -> dict:
        return {"code": self.status.value, "reason": self.reason,
                "message": self.message, "details": self.details}

    def __repr__(self) -> str:
        return f"MorphzError({self.reason!r}, {self.message!r}, {self.details!r})"
