"""MCP-01 (a Morphz error is a tool error whose text starts with its reason code): the
schema check's error (services/mcp/server.py check) names the bad argument's path in
`field`, bounded: a deeply nested or huge-keyed argument does not echo itself into the
error. The tools' own schemas allow no such argument (their paths stay short), so the
bound is checked against schemas that do, with the same check and the real jsonschema
validator."""
from __future__ import annotations

import jsonschema
import pytest

from morphz.client import MorphzError
from morphz.services.mcp import tool_specs
from morphz.services.mcp.server import ELLIPSIS, FIELD_PATH_CHARS, check

NESTED = {"type": "object", "properties": {"a": {"$ref": "#"}}, "additionalProperties":
          {"type": "integer"}}


def refused(schema: dict, args: dict) -> MorphzError:
    with pytest.raises(MorphzError) as e:
        check(jsonschema.Draft202012Validator(schema), args)
    assert e.value.reason == "CONTEXT_INPUT_INVALID", e.value
    return e.value


def test_mcp_01_a_deeply_nested_bad_argument_gives_a_bounded_field_path():
    args: dict = {"leaf": "not an integer"}
    for _ in range(150):  # a/a/.../a/leaf: 304 characters
        args = {"a": args}
    err = refused(NESTED, args)
    field = err.details["field"]
    assert len(field) <= FIELD_PATH_CHARS and ELLIPSIS in field, field
    assert field.startswith("a/a/") and field.endswith("/a/leaf"), field  # both ends kept
    assert err.message.startswith(field + ": ") and len(err.message) < FIELD_PATH_CHARS + 320


def test_mcp_01_a_huge_argument_key_gives_a_bounded_field_path():
    key = "k" * 100_000
    err = refused(NESTED, {key: "not an integer"})
    field = err.details["field"]
    assert len(field) == FIELD_PATH_CHARS and field.count(ELLIPSIS) == 1, len(field)
    assert len(err.message) < FIELD_PATH_CHARS + 320, len(err.message)


def test_mcp_01_a_short_field_path_is_given_whole():
    search = tool_specs.SEARCH.input_schema(bound=True)
    assert refused(search, {"mode": "fuzzy"}).details["field"] == "mode"
    encoding = tool_specs.ENCODING.input_schema(bound=True)
    assert refused(encoding, {"must_read": ["@e1", ""]}).details["field"] == "must_read/1"
    assert refused(search, {"nope": 1}).details["field"] == "arguments"
