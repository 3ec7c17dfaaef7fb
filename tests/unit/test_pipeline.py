"""The commit pipeline's reader: the durable snapshot with exactly the pending commits it
does not show yet laid over it, whether their writes were merged for this read or kept
merged from earlier ones (services/transaction/core/pipeline.py)."""
from __future__ import annotations

from morphz.services.transaction.core.pipeline import ContextPipeline
from morphz.shared.storage.api import Ticket, Write
from morphz.shared.storage.memory_store import MemoryStore


def put(key: str, value: bytes) -> Write:
    return Write("frames", (key,), value)


def submit(pipe: ContextPipeline, store: MemoryStore, writes: list[Write]) -> Ticket:
    """What Writer.write does (core/writes/writer.py): read, then push the writes on it."""
    with store.reader("c") as durable:
        seq = pipe.reader(durable).commit_seq
    ticket = Ticket()
    pipe.push(seq + 1, writes, ticket)
    return ticket


def seen(pipe: ContextPipeline, store: MemoryStore, key: str) -> tuple[bytes, int]:
    with store.reader("c") as durable:
        reader = pipe.reader(durable)
        return reader.get("frames", (key,)), reader.commit_seq


def test_pending_commits_read_in_order_over_the_durable_state():
    store, pipe = MemoryStore(), ContextPipeline()
    submit(pipe, store, [put("a", b"1"), put("b", b"1")])
    submit(pipe, store, [put("a", b"2")])
    submit(pipe, store, [Write("frames", ("b",), None)])
    assert seen(pipe, store, "a") == (b"2", 3)
    assert seen(pipe, store, "b") == (None, 3)


def test_a_commit_made_durable_is_read_from_the_store_not_from_what_was_merged():
    store, pipe = MemoryStore(), ContextPipeline()
    first = submit(pipe, store, [put("a", b"mine")])
    submit(pipe, store, [put("b", b"2")])
    assert seen(pipe, store, "a") == (b"mine", 2)  # both merged, kept for the next reads
    # Version 1 becomes durable holding something else (another writer's commit): the
    # reader must show it, though the merged writes still hold the first commit's value.
    store.commit("c", 0, [put("a", b"theirs")])
    with pipe.lock:  # as TransactionCore uses it
        pipe.done(first, failed=False)
    assert seen(pipe, store, "a") == (b"theirs", 2)
    assert seen(pipe, store, "b") == (b"2", 2)


def test_a_commit_not_made_on_the_merged_writes_is_not_added_to_them():
    store, pipe = MemoryStore(), ContextPipeline()
    submit(pipe, store, [put("a", b"1")])
    assert seen(pipe, store, "a") == (b"1", 1)
    pipe.push(5, [put("a", b"elsewhere")], Ticket())  # not computed on version 1
    assert seen(pipe, store, "a") == (b"elsewhere", 5)


def test_a_failed_commit_drops_every_pending_write():
    store, pipe = MemoryStore(), ContextPipeline()
    first = submit(pipe, store, [put("a", b"1")])
    submit(pipe, store, [put("b", b"1")])
    with pipe.lock:
        pipe.done(first, failed=True)
    assert seen(pipe, store, "a") == (None, 0)
    assert seen(pipe, store, "b") == (None, 0)
