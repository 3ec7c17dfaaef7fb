"""The read model owns every table (issue 41, "no module outside shared/mind and
services/storage names a table or decodes a row"): readers ask MindView (and the
snapshot repository, shared/mind/snapshots.py) for what they mean.

The tree (services/, shared/) is parsed, not run: a finding is a table's name where a
store is read or written (a Reader/Store/MindView call, a prefetch hint, a `Write`, a
`TABLE` constant, a comparison with a table's name), the table lists imported from the
Mind's catalogue or the storage API, or a stored row decoded (records.loads, decode_json, event_dict,
snapshot_json). ALLOWED lists what is still to be moved, each with the engineer's area
it belongs to; it only shrinks: an entry whose file no longer has findings fails too."""
from __future__ import annotations

import ast
from pathlib import Path

from morphz.shared.mind.tables import TABLES

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "shared")
# The read model and storage itself (shared/storage: the tables' codecs; their catalogue
# is the read model's, shared/mind/tables.py).
OWNERS = ("shared/mind/", "services/storage/", "shared/storage/")

# file -> why it still names tables or decodes rows. Remove an entry when its file is
# moved onto MindView (the test fails on an entry that has no finding left).
ALLOWED: dict[str, str] = {}

# Calls whose first argument is a table (or second, after a Store's context): Reader,
# Store and MindView reads and writes.
_FIRST_ARG = {"scan", "scan_values", "scan_keys", "put_record", "prefetch", "get_many",
              "_get", "_scan", "Write"}
# Calls whose arguments hold tables anywhere (dict keys, (table, key) pairs).
_ANYWHERE = {"prefetch_tables", "prefetch_scans", "get_tables", "scan_tables"}
_DECODERS = {"loads", "decode_json", "event_dict", "snapshot_json", "frame_state"}
_TABLE_LISTS = {"TABLES", "SIDE_TABLES", "FEED_TABLES"}
# Where the table lists live: the Mind's catalogue, and the storage API (the feed's).
_TABLE_MODULES = {"morphz.shared.mind.tables", "morphz.shared.storage.api"}


def _name_of(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else ""


def _tables_in(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in TABLES]


def _is_row_decoder(call: ast.Call, records_names: set[str]) -> bool:
    """records.loads(...) / R.loads(...), or a decoder imported from the read model."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in _DECODERS:
        return isinstance(f.value, ast.Name) and f.value.id in records_names
    return isinstance(f, ast.Name) and f.id in records_names


def findings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: list[str] = []
    # Names that stand for the read model's codecs here: `records` imported (as R) and
    # decoders imported by name.
    codecs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if node.module == "morphz.shared.mind" and a.name == "records":
                    codecs.add(a.asname or a.name)
                elif node.module.startswith("morphz.shared.mind") and a.name in _DECODERS:
                    codecs.add(a.asname or a.name)
                elif node.module in _TABLE_MODULES and a.name in _TABLE_LISTS:
                    out.append(f"{node.lineno}: imports {a.name}")
        elif isinstance(node, ast.Import):
            codecs.update(a.asname or a.name for a in node.names
                          if a.name == "morphz.shared.mind.records")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name_of(node.func)
            if _is_row_decoder(node, codecs):
                out.append(f"{node.lineno}: decodes a row ({name})")
            if name in _ANYWHERE:
                out += [f"{node.lineno}: {name} names {t}" for t in _tables_in(node)]
            elif name in _FIRST_ARG and node.args:
                out += [f"{node.lineno}: {name} names {t}" for a in node.args[:2]
                        for t in _tables_in(a)]
            elif name == "get" and len(node.args) == 2 and \
                    isinstance(node.args[1], ast.Tuple):  # reader.get(table, key)
                out += [f"{node.lineno}: get names {t}" for t in _tables_in(node.args[0])]
        elif isinstance(node, ast.Assign) and any(
                "TABLE" in _name_of(t).upper() for t in node.targets):
            out += [f"{node.lineno}: a table constant {t}" for t in _tables_in(node.value)]
        elif isinstance(node, ast.Compare) and any(
                "table" in _name_of(x).lower() for x in [node.left, *node.comparators]):
            out += [f"{node.lineno}: compares with {t}" for t in _tables_in(node)]
    return out


def _tree() -> dict[str, list[str]]:
    found = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(OWNERS):
                continue
            hits = findings(path)
            if hits:
                found[rel] = hits
    return found


def test_no_module_outside_the_read_model_names_a_table_or_decodes_a_row():
    found = _tree()
    unexpected = {f: hits for f, hits in found.items() if f not in ALLOWED}
    assert not unexpected, "ask MindView (shared/mind/view.py) instead:\n" + "\n".join(
        f"  {f}:{h}" for f, hits in unexpected.items() for h in hits)


def test_the_allowlist_holds_only_what_is_still_to_be_moved():
    found = _tree()
    stale = sorted(f for f in ALLOWED if f not in found)
    assert not stale, f"moved onto the read model: remove from ALLOWED: {stale}"


def test_the_check_finds_what_it_forbids(tmp_path):
    """The check is not blind: each kind of finding it names is found in a sample."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from morphz.shared.mind import records as R\n"
        "from morphz.shared.mind.view_events import event_dict\n"
        "from morphz.shared.mind.tables import TABLES\n"
        "from morphz.shared.storage.api import FEED_TABLES\n"
        "TABLE = 'snapshots'\n"
        "def f(reader, m, store, raw, table):\n"
        "    reader.get('meta', ())\n"
        "    reader.scan('events', after=(3,))\n"
        "    m.prefetch_tables({'frames': [('f1',)]})\n"
        "    m.prefetch_scans([('inbox', ())])\n"
        "    store.put_record('c', 'snapshots', ('s',), b'')\n"
        "    R.loads(R.Event, raw)\n"
        "    event_dict(raw)\n"
        "    if table == 'events': pass\n"
        "    {}.get('sessions')  # a dict's get names no table\n")
    kinds = [h.split(": ", 1)[1] for h in findings(sample)]
    assert sorted(kinds) == sorted([
        "imports TABLES", "imports FEED_TABLES", "a table constant snapshots",
        "get names meta", "scan names events",
        "prefetch_tables names frames", "prefetch_scans names inbox",
        "put_record names snapshots", "decodes a row (loads)", "decodes a row (event_dict)",
        "compares with events"])
