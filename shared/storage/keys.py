"""Order-preserving byte encoding of tuple keys (and the checks storage applies to them).

A str part is 0x02 + UTF-8 + 0x00, an int part 0x01 + 8 bytes big-endian, so byte
order equals tuple order and a prefix tuple encodes to a byte prefix.
"""
from __future__ import annotations

import struct
from itertools import repeat
from operator import add

from morphz.shared.mind.tables import SIDE_TABLES, TABLES
from morphz.shared.storage.api import Key
from morphz.shared.errors import MorphzError
from morphz.shared.limits import echo

_INT, _STR, _END = b"\x01", b"\x02", b"\x00"
_PACK_INT = struct.Struct(">BQ").pack
MAX_KEY_BYTES = 480  # LMDB's default key limit is 511 bytes


def check_table(table: str) -> None:
    if table not in TABLES:
        raise MorphzError("STORAGE_TABLE_UNKNOWN", f"unknown table {echo(table)!r}",
                          table=echo(table))


def check_commit_table(table: str) -> None:
    """A table a commit may write: any but the side tables (put_record writes those)."""
    check_table(table)
    if table in SIDE_TABLES:
        raise MorphzError("STORAGE_TABLE_INVALID", f"table {table} takes side records "
                          "(put_record), not commits", table=table)


def check_side_record(table: str, value: object) -> None:
    """What put_record accepts: a side table, and a value (None would delete: the
    tables are append-only)."""
    check_table(table)
    if table not in SIDE_TABLES:
        raise MorphzError("STORAGE_TABLE_INVALID", f"table {table} is versioned: write it "
                          "in a commit", table=table)
    if value is None:
        raise MorphzError("STORAGE_APPEND_ONLY", f"table {table} is append-only", table=table)


def check_side_records(records: list) -> None:
    """What put_records accepts: at least one record, each check_side_record's, and no
    key twice (the tables are append-only)."""
    if not records:
        raise MorphzError("STORAGE_KEY_INVALID", "put_records needs at least one record")
    seen = set()
    for w in records:
        check_side_record(w.table, w.value)
        if w.quarantine:
            raise MorphzError("STORAGE_TABLE_INVALID", "a side record moves nothing aside",
                              table=w.table)
        if (w.table, w.key) in seen:
            raise MorphzError("STORAGE_APPEND_ONLY", f"table {w.table} is append-only: a "
                              "key is given twice", table=w.table)
        seen.add((w.table, w.key))


def encode(key: Key) -> bytes:
    return encode_in(b"", key)


def encode_in(prefix: bytes, key: Key) -> bytes:
    """`prefix` (an encoded key, e.g. a context's) followed by `key`'s parts: equal to
    encode((*decode(prefix), *key)) without encoding the prefix again."""
    # On every read and write: exact type checks (bool is not an int key) and one join.
    out = [prefix]
    for part in key:
        kind = type(part)
        if kind is str:
            if "\x00" in part:
                raise MorphzError("STORAGE_KEY_INVALID", "key text contains NUL")
            out.append(_STR + part.encode("utf-8", "strict") + _END)
        elif kind is int:
            if not 0 <= part < 1 << 64:
                raise MorphzError("STORAGE_KEY_INVALID", f"key integer {part} out of range")
            out.append(_PACK_INT(1, part))
        else:
            raise MorphzError("STORAGE_KEY_INVALID", f"key part {part!r} is not str or int")
    raw = b"".join(out)
    if len(raw) > MAX_KEY_BYTES:
        raise MorphzError("STORAGE_KEY_INVALID", f"key longer than {MAX_KEY_BYTES} bytes")
    return raw


def decode(raw: bytes, start: int = 0) -> Key:
    """The key encoded in raw[start:] (`start`: past a context prefix a reader skips).
    bytes.decode() with no arguments is strict UTF-8, without looking the codec up by name
    (this runs on every row a scan yields)."""
    i, n = start, len(raw)
    if i == n:
        return ()
    # The commonest shapes without the loop: (seq,), (id,) and (id, seq).
    if raw[i] == 1:
        if n - i == 9:
            return (int.from_bytes(raw[i + 1:], "big"),)
    else:
        end = raw.index(0, i + 1)
        if end == n - 1:
            return (raw[i + 1:end].decode(),)
        if n - end == 10 and raw[end + 1] == 1:
            return raw[i + 1:end].decode(), int.from_bytes(raw[end + 2:], "big")
    parts: list = []
    while i < n:  # on every row a scan yields: byte indexing, no slices for the tag
        if raw[i] == 1:
            parts.append(int.from_bytes(raw[i + 1:i + 9], "big"))
            i += 9
        else:
            end = raw.index(0, i + 1)
            parts.append(raw[i + 1:end].decode())
            i = end + 1
    return tuple(parts)


def decode_run(raw: list[bytes], skip: int) -> list[Key]:
    """decode(k, skip) of each of `raw`: keys sharing their first `skip` bytes (a context's
    prefix) as a scan reads them. Where every key has one of the commonest shapes, (int,)
    or (str,), the run is decoded in a few passes in C; else key by key."""
    if len(raw) >= _RUN_MIN:
        shape = raw[0][skip] if len(raw[0]) > skip else None
        if shape == 1:
            ints = _int_run(raw, skip)
            if ints is not None:
                return ints
        elif shape == 2:
            strs = _str_run(raw, skip)
            if strs is not None:
                return strs
    return [decode(k, skip) for k in raw]


_RUN_MIN = 8  # below this, building a joined copy costs more than it saves


def _int_run(raw: list[bytes], skip: int) -> "list[Key] | None":
    """Every key is the prefix, tag 1 and 8 bytes: one struct pass over them all."""
    size = skip + 9
    if set(map(len, raw)) != {size}:
        return None
    joined = b"".join(raw)
    if joined[skip::size] != _INT * len(raw):
        return None
    return list(struct.Struct(f">{skip + 1}xQ").iter_unpack(joined))


def _str_run(raw: list[bytes], skip: int) -> "list[Key] | None":
    """Every key is the prefix, tag 2, UTF-8 without NUL, and NUL: the run's text split at
    the NUL, prefix and tag between keys. The NUL count rules out a NUL inside a part, and
    the lengths that each piece is one whole key (a part may hold the prefix's text)."""
    try:
        text = b"".join(raw).decode()
        prefix = raw[0][:skip].decode()
    except UnicodeDecodeError:
        return None
    n = len(raw)
    lead = prefix + "\x02"
    if text.count("\x00") != n * (prefix.count("\x00") + 1) or not text.startswith(lead):
        return None
    parts = text[len(lead):-1].split("\x00" + lead)
    if len(parts) != n or list(map(len, raw)) != list(
            map(add, map(len, map(str.encode, parts)), repeat(skip + 2))):
        return None
    return [(p,) for p in parts]


def context_prefix(context: str) -> bytes:
    return encode((context,))
