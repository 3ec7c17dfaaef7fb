"""Every limit a Morphz server enforces, by name (SEC-06).

An error for a limit carries the limit's name in its details (`limit`) with its value
(`max`), whatever its reason; docs/limits.md's table lists them all (a test keeps
the two in step). The values here are the defaults; the server-wide ones (RPCs, bytes
in flight, storage snapshots and watches) are ServerConfig fields and `morphz serve`
flags. Nothing here imports gRPC.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    name: str
    max: int
    reason: str  # the reason of the error that names it
    what: str

    def details(self, value: int | None = None, **more: object) -> dict:
        """The details an error for this limit carries (`value`: a configured value)."""
        return {"limit": self.name, "max": self.max if value is None else value, **more}


# -- per request -----------------------------------------------------------------------------
# One gRPC message (any request). gRPC itself refuses, without reading it, a message
# more than TRANSPORT_SLACK over (RESOURCE_EXHAUSTED, no ErrorInfo).
MESSAGE_BYTES = Limit("message_bytes", 64 << 20, "MESSAGE_SIZE_LIMIT",
                      "bytes in one request message")
TRANSPORT_SLACK = 1 << 20
EVENT_TEXT_BYTES = Limit("event_text_bytes", 32 << 20, "CONTEXT_INPUT_INVALID",
                         "UTF-8 bytes of one event's text")
# What one write (an event, a transaction) stores: the event and every row it changes,
# as stored (JSON: a text is stored more than once, control characters 6 bytes each).
# Below message_bytes, so that a split transaction service can hand it to storage.
COMMIT_BYTES = Limit("commit_bytes", (64 << 20) - (1 << 20), "COMMIT_SIZE_LIMIT",
                     "bytes one write stores: its event and the rows it changes")
# A transaction, the same in the text and the structured form.
TX_BYTES = Limit("tx_bytes", 16 << 20, "TX_PARSE_ERROR",
                 "bytes of one transaction (its UTF-8 text, or its protobuf encoding)")
TX_OPS = Limit("tx_ops", 10_000, "TX_PARSE_ERROR", "operations in one transaction")
TX_DEPTH = Limit("tx_depth", 64, "TX_PARSE_ERROR",
                 "nesting of lists in the text form, (context-tx ...) included")
TX_NODES = Limit("tx_nodes", 200_000, "TX_PARSE_ERROR",
                 "S-expression nodes (lists, atoms, strings) in the text form")
# Fields of requests (checked on every request, shared/grpc/field_limits.py).
NAME_CHARS = Limit("name_chars", 128, "CONTEXT_INPUT_INVALID",
                   "a name: context, session, activation, request id, actor, kind, table, "
                   "snapshot, model")
FRAME_ID_CHARS = Limit("frame_id_chars", 200, "TX_INVALID",
                       "a frame id, relation, checkpoint or session name in a transaction")
LOOKUP_CHARS = Limit("lookup_chars", 256, "CONTEXT_INPUT_INVALID",
                     "an id a request looks up: frame id, @eN ref, must-read item")
STRING_CHARS = Limit("string_chars", 64 << 10, "CONTEXT_INPUT_INVALID",
                     "any other string field (texts and transactions have their own)")
LIST_ITEMS = Limit("list_items", 4096, "CONTEXT_INPUT_INVALID",
                   "entries of any repeated or map field (transaction ops and storage "
                   "writes have their own)")

# -- per server ------------------------------------------------------------------------------
CONCURRENT_RPCS = Limit("concurrent_rpcs", 256, "CONCURRENT_RPC_LIMIT",
                        "RPCs a server process holds at once (health checks aside)")
BYTES_IN_FLIGHT = Limit("bytes_in_flight", 64 << 20, "BYTES_IN_FLIGHT_LIMIT",
                        "request bytes a server process is processing at once")
REPLY_BYTES = Limit("reply_bytes", 64 << 20, "REPLY_TOO_LARGE",
                    "bytes of one reply message (a larger one: ask for it in pages)")
REPLY_STALL_SECONDS = 30  # a reply its client does not read is dropped after this
OPEN_SNAPSHOTS = Limit("open_snapshots", 128, "STORAGE_SNAPSHOT_LIMIT",
                       "storage read snapshots open at once")
WATCHES = Limit("watches", 4, "STORAGE_WATCH_LIMIT",
                "following change-feed watches a storage service serves at once")
# Expensive calls (shared/admission.py: audits, rebuilds, compiles, traversals,
# listings, large writes): at once server-wide and per principal, and the CPU-seconds
# they may use per minute, server-wide and per principal.
EXPENSIVE_RPCS = Limit("expensive_rpcs", 6, "EXPENSIVE_RPC_LIMIT",
                       "expensive calls a server process runs at once")
PRINCIPAL_RPCS = Limit("principal_expensive_rpcs", 2, "PRINCIPAL_RPC_LIMIT",
                       "expensive calls one principal runs at once")
EXPENSIVE_CPU = Limit("expensive_cpu_seconds", 60, "EXPENSIVE_CPU_LIMIT",
                      "CPU-seconds per minute the expensive calls of a server process use")
PRINCIPAL_CPU = Limit("principal_cpu_seconds", 30, "PRINCIPAL_CPU_LIMIT",
                      "CPU-seconds per minute the expensive calls of one principal use")
# Server-side jobs (shared/jobs.py): queued or running at once, server-wide and per
# principal; finished ones are kept for FINISHED_JOBS_KEPT_SECONDS, at most this many.
JOBS = Limit("jobs", 4, "JOB_LIMIT", "jobs (queued or running) a server process holds at once")
PRINCIPAL_JOBS = Limit("principal_jobs", 2, "PRINCIPAL_JOB_LIMIT",
                       "jobs (queued or running) one principal holds at once")
FINISHED_JOBS = Limit("finished_jobs", 100, "JOB_NOT_FOUND",
                      "finished jobs a server process remembers (the oldest are forgotten)")
FINISHED_JOBS_KEPT_SECONDS = 3600
GET_MANY_KEYS = Limit("get_many_keys", 1000, "STORAGE_REQUEST_TOO_LARGE",
                      "keys in one storage GetMany")
SCAN_MANY_SCANS = Limit("scan_many_scans", 32, "STORAGE_REQUEST_TOO_LARGE",
                        "scans in one storage ScanMany")

ALL = (MESSAGE_BYTES, EVENT_TEXT_BYTES, COMMIT_BYTES, TX_BYTES, TX_OPS, TX_DEPTH, TX_NODES, NAME_CHARS,
       FRAME_ID_CHARS, LOOKUP_CHARS, STRING_CHARS, LIST_ITEMS, CONCURRENT_RPCS,
       BYTES_IN_FLIGHT, REPLY_BYTES, EXPENSIVE_RPCS, PRINCIPAL_RPCS, EXPENSIVE_CPU, PRINCIPAL_CPU,
       JOBS, PRINCIPAL_JOBS, FINISHED_JOBS, OPEN_SNAPSHOTS, WATCHES, GET_MANY_KEYS, SCAN_MANY_SCANS)
BY_NAME = {lim.name: lim for lim in ALL}

# What an error may echo of a request's value: at most this many characters.
ECHO_CHARS = 80


def echo(value: object, chars: int = ECHO_CHARS) -> str:
    """A short form of a value a request sent, for an error's message or details."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= chars else text[:chars - 1] + "…"


def utf8_len(text: str) -> int:
    """UTF-8 bytes of `text` (lone surrogates as 3), without encoding an ASCII text."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
