"""The reference driver's Privacy operations (PRIV-01..05) over Morphz's public API:
Erase, DeleteContext, the Export stream, SetPolicy op retention and a `retention` job;
and the two hooks that look at the target from outside it: its data folder searched as
bytes and its log. GrpcDriver mixes this in; it uses the driver's `_txcall`, `_call`, `_rec`
`_tx` and `_rejection`."""
from __future__ import annotations

import os
import time
from typing import Optional, Sequence

import grpc

from morphz_conformance.driver import (ErasedMark, Erasure, Exported, NotSupported,
                                       Rejected)
from morphz_conformance.stubs.morphz.api.common.v1 import common_pb2 as common
from morphz_conformance.stubs.morphz.api.recall.v1 import recall_pb2 as rec
from morphz_conformance.stubs.morphz.api.transaction.v1 import transaction_pb2 as txn

POLL_SECONDS = 0.2
DONE_BOUND = 300.0  # seconds an erasure's index rewrite or a retention job may take
_CHUNK = 1 << 20


class PrivacyCalls:
    """Erasure is done, for Morphz, when the Erase call has answered (the store rewritten
    without the bytes) and the recall index has applied it and rewritten its files
    (`erasure_pending` back to 0), as `morphz context erase` waits for."""

    _data_dir: str = ""
    _log_path: Optional[str] = None

    def erase(self, context: str, *, refs: Sequence[str] = (), session: str = "",
              actor: str = "", phrase: str = "", since: str = "", until: str = "",
              kinds: Sequence[str] = (), reason: str = "", dry_run: bool = False) -> Erasure:
        r = self._txcall("Erase", txn.EraseRequest(
            context=context, refs=list(refs), session=session, actor=actor, phrase=phrase,
            since=since, until=until, kinds=list(kinds), reason=reason, dry_run=dry_run))
        if r.erasures and not dry_run:
            self._recall_purged(context, r.commit_seq)
        return Erasure(erasures=tuple(r.erasures), events=tuple(r.events),
                       frames=tuple(r.frames), dry_run=r.dry_run)

    def _recall_purged(self, context: str, commit_seq: int) -> None:
        give_up = time.monotonic() + DONE_BOUND
        while True:
            s = self._call(self._rec.InspectIndex, rec.InspectIndexRequest(context=context))
            if s.position >= commit_seq and not s.erasure_pending:
                return
            if time.monotonic() > give_up:
                raise Rejected("ERASURE_NOT_DONE", f"the recall index of {context} still has "
                               f"{s.erasure_pending} erasures to apply after {DONE_BOUND:.0f}s")
            time.sleep(POLL_SECONDS)

    def delete_context(self, context: str, *, reason: str) -> None:
        self._txcall("DeleteContext", txn.DeleteContextRequest(context=context, reason=reason))

    def export(self, context: str, *, since: str = "", until: str = "") -> list[Exported]:
        try:
            pages = list(self._tx.Export(
                txn.ExportRequest(context=context, since=since, until=until),
                timeout=self._timeout * 10, metadata=self._metadata()))
        except grpc.RpcError as e:  # a rejection like any call's
            raise self._rejection(e) from None
        return [Exported(session=x.session, kind=x.kind, text=x.text, actor=x.actor,
                         occurred_at=x.occurred_at, secret=x.secret, erased=x.erased)
                for page in pages for x in page.events]

    def set_retention(self, context: str, *, kinds: Sequence[str], days: int) -> None:
        policy = f"(retention (kinds {' '.join(kinds)}) (days {days}))"
        self._txcall("SetPolicy", txn.SetPolicyRequest(context=context, op="retention",
                                                       retention=policy))

    def apply_retention(self, context: str) -> None:
        job = self._txcall("StartJob", common.StartJobRequest(context=context,
                                                              kind="retention"))
        give_up = time.monotonic() + DONE_BOUND
        while job.state in ("queued", "running"):
            if time.monotonic() > give_up:
                raise Rejected("RETENTION_NOT_DONE", f"job {job.id} still {job.state}")
            time.sleep(POLL_SECONDS)
            job = self._txcall("GetJob", common.JobRequest(id=job.id))
        if job.state != "succeeded":
            raise Rejected(job.error_reason or "JOB_FAILED", f"retention job {job.state}")
        self._recall_purged(context, self.status(context).commit_seq)

    # -- looking from outside ---------------------------------------------------------------
    def stored_bytes(self, needle: bytes) -> list[str]:
        """Every file under the data folder (`--target-data`) holding `needle`, read in
        chunks (overlapping by the needle's length)."""
        if not self._data_dir:
            raise NotSupported("data")
        found = []
        for root, _, files in os.walk(self._data_dir):
            for name in files:
                path = os.path.join(root, name)
                if _holds(path, needle):
                    found.append(os.path.relpath(path, self._data_dir))
        return sorted(found)

    def target_log(self) -> str:
        if not self._log_path:
            raise NotSupported("log")
        with open(self._log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def privacy_capabilities(self) -> frozenset[str]:
        return frozenset({"erase", "delete", "export", "retention"}) | (
            {"data"} if self._data_dir else frozenset()) | (
            {"log"} if self._log_path else frozenset())


def erased_mark(message) -> Optional[ErasedMark]:
    """An Event's or Frame's `erased` field, or None."""
    if not message.HasField("erased"):
        return None
    e = message.erased
    return ErasedMark(erasure=e.erasure, by=e.by, reason=e.reason, at=e.at)


def _holds(path: str, needle: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            tail = b""
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    return False
                if needle in tail + chunk:
                    return True
                tail = chunk[-len(needle):]
    except OSError:  # gone meanwhile (a rewrite replaced it), or not readable
        return False
