"""Compact UTF-8 JSON: the bytes json.dumps(ensure_ascii=False, separators=(",", ":"))
gives, made by orjson (several times faster on a snapshot's thousands of rows); json takes
what orjson refuses (integers past 64 bits, keys that are not strings)."""
from __future__ import annotations

import json

import orjson


def dumps(value) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
