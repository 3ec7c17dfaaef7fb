"""No generic dict walk on the wire (issue 56): a servicer answers with a message its
service's converter builds field by field from the core's typed result (etcd's v3rpc over
mvcc), never by making the result a dict (`.plain()`) and walking the dict into a message
(shared/grpc/protojson.from_plain, json_format.ParseDict) or a message into a dict
(to_plain, MessageToDict, MessageToJson).

Read with ast (nothing is imported). The wire's modules are those of services/ and
shared/grpc/ that import a generated message module (`*_pb2`), the job messages,
protojson or json_format, and every servicer.py, convert.py and jobs.py. The plain form stays where JSON is
the format itself, each place named in ALLOWED with the reason; an entry no longer used
fails too, so the list says what is."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("services", "shared/grpc")
WIRE_FILES = ("servicer.py", "convert.py", "jobs.py")
# Calls that walk a dict into a message or a message into a dict.
WALKS = frozenset({"from_plain", "to_plain", "ParseDict", "MessageToDict", "MessageToJson"})
PLAIN = "plain"  # a result's .plain(): its dict form

# (file, top-level function or class, call) -> why JSON is the format there.
ALLOWED = {
    ("shared/grpc/protojson.py", "from_plain", "ParseDict"):
        "protojson itself: the messages <-> dicts of the dict-returning clients",
    ("services/encoding/convert.py", "snapshot_record", PLAIN):
        "a snapshot record is JSON (SnapshotRecord.record_json, bytes): the record as "
        "stored, its JSON text the message's one field",
    ("services/transaction/jobs.py", "transaction_jobs", PLAIN):
        "a job's result is JSON (Job.result_json, common.proto), kept with the job",
    ("services/recall/jobs.py", "recall_jobs", PLAIN):
        "a job's result is JSON (Job.result_json, common.proto), kept with the job",
    ("services/transaction/client.py", "TransactionClient", "to_plain"):
        "the dict-returning client tests and scripts still use (issue 56 item 3 retires it)",
    ("services/recall/client.py", "RecallClient", "to_plain"):
        "the dict-returning client tests and scripts still use (issue 56 item 3 retires it)",
    ("services/encoding/client.py", "EncodingClient", "to_plain"):
        "the dict-returning client tests and scripts still use (issue 56 item 3 retires it)",
    ("services/cli/replies.py", "plain", "to_plain"):
        "the CLI prints a reply as JSON (--format=json), the message's fields in order",
    ("services/ui/steps.py", "_plain", "MessageToDict"):
        "the inspector shows a reply as JSON (its page and /api answers)",
    ("services/ui/views.py", "_plain", "MessageToDict"):
        "the inspector shows a reply as JSON (its page and /api answers)",
}


def _imports(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or ""
            yield from (f"{node.module}.{a.name}" for a in node.names)


def on_the_wire(name: str, tree: ast.Module) -> bool:
    return name in WIRE_FILES or any(
        m.endswith(("_pb2", "job_messages", "protojson", "json_format"))
        for m in _imports(tree))


def _called(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def walks(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(top-level function or class, call) of each dict walk in the module."""
    for top in tree.body:
        where = getattr(top, "name", "<module>")
        for node in ast.walk(top):
            if not isinstance(node, ast.Call):
                continue
            name = _called(node)
            if name in WALKS or (name == PLAIN and isinstance(node.func, ast.Attribute)
                                 and not node.args and not node.keywords):
                yield where, name


def wire_walks(root: Path) -> set[tuple[str, str, str]]:
    found = set()
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            if on_the_wire(path.name, tree):
                rel = path.relative_to(root).as_posix()
                found |= {(rel, where, call) for where, call in walks(tree)}
    return found


def test_no_servicer_or_converter_walks_a_dict_into_a_reply():
    found = wire_walks(ROOT)
    assert {f: "?" for f in found if f not in ALLOWED} == {}, \
        "build the reply field by field in the service's convert.py"
    assert sorted(set(ALLOWED) - found) == [], "an allowed walk no longer there"


def test_the_check_finds_a_walk_where_there_is_one():
    source = ast.parse(
        "from morphz.api.recall.v1 import recall_pb2 as pb\n"
        "from morphz.shared.grpc.protojson import from_plain\n"
        "class S:\n"
        "    def Read(self, request, context):\n"
        "        return from_plain(self._core.read(request.ref).plain(), pb.ReadResponse)\n"
        "def status(s):\n"
        "    return json_format.ParseDict(s, pb.IndexStatus())\n"
        "def fine(s):\n"
        "    return pb.IndexStatus(context=s.context, plain=s.plain(1))\n")
    assert on_the_wire("anything.py", source)
    assert sorted(walks(source)) == [("S", "from_plain"), ("S", "plain"),
                                     ("status", "ParseDict")]
    assert not on_the_wire("views.py", ast.parse("import json\n"))
