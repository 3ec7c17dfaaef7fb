"""No module-level mutable state in services/ or shared/ (issue 56): what a server holds
lives in objects the composition root builds and hands on (services/server/node.py),
so two servers in one process, or two tests, share nothing by accident.

The tree is parsed, not run. A finding is a `global` statement, or a name bound at a
module's top level to a dict, list or set (a display, a comprehension or dict()/list()/
set()) that a function of the module changes: stores or deletes an item of it (or of
an item of it), augments it, or calls a changing method on it or on an item of it.
Constants built once at import (tables, read-only maps) are not findings.

ALLOWED lists what stays, each with why; it only shrinks: an entry whose file no longer
has the finding fails too. Not looked for: memos of pure functions (functools.cache and
lru_cache: shared/grpc/protojson.py's converters, encoding's atom_text, recall's
_layout, digest and analyze's _segment_cached), whose results are the function's
whoever asks, and per-thread scratch (analyze's BreakIterators, a threading.local)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "shared")

# "file:name" -> why it stays module-level.
ALLOWED: dict[str, str] = {
    "shared/text/analyze.py:_JOINED":
        "a memo of terms_text, a pure function of the text (no lock: a lost entry is "
        "recomputed); recall's core and the tests call the module's functions, and each "
        "spawned worker process has its own",
}

_CHANGING = {"append", "add", "update", "pop", "setdefault", "clear", "extend", "remove",
             "discard", "insert", "popitem", "appendleft", "move_to_end", "sort", "reverse"}
_CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _containers(tree: ast.Module) -> set[str]:
    """Names the module's top level binds to a new dict, list or set."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        fresh = isinstance(value, _CONTAINERS) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in ("dict", "list", "set"))
        if fresh:
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _root(node: ast.expr) -> str:
    """The name an expression's subscripts start from: `_X[a][b]` -> "_X"."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _module_name(name: str, names: set[str], local: set[str],
                 alias: dict[str, str]) -> list[str]:
    """[the module-level container `name` stands for], or []."""
    if name in alias:
        return [alias[name]]
    return [name] if name in names and name not in local else []


def findings(text: str) -> list[str]:
    """`global NAME` and the module-level containers changed in a function, by name."""
    tree = ast.parse(text)
    names, found = _containers(tree), set()
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))]
    for fn in functions:
        local = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        # a local bound to one of them or an item of one (`cache = _X[k]`) is that one
        alias = {t.id: _root(n.value) for n in ast.walk(fn) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)
                 and _root(n.value) in names and _root(n.value) not in local}
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                found.update(node.names)
            targets: list[ast.expr] = []
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) or isinstance(node, ast.AugAssign):
                    found.update(_module_name(_root(t), names, local, alias))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _CHANGING:
                found.update(_module_name(_root(node.func.value), names, local, alias))
    return sorted(found)


def scan(root: Path) -> dict[str, list[str]]:
    out = {}
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            names = findings(path.read_text(encoding="utf-8"))
            if names:
                out[path.relative_to(root).as_posix()] = names
    return out


def test_no_module_keeps_mutable_state_but_the_allowed():
    found = {f"{path}:{name}" for path, names in scan(ROOT).items() for name in names}
    assert sorted(found - set(ALLOWED)) == []
    assert sorted(set(ALLOWED) - found) == []  # moved: take it off the list


def test_the_check_finds_globals_and_changed_containers():
    text = (
        "_A = {}\n_B = []\n_C = {1: 2}\nSEEN = set()\n_K = ('', None)\n"
        "def f(x):\n    global _K\n    _K = (x, 1)\n    _A[x] = 1\n"
        "def g(x):\n    _B.append(x)\n    return _C[x]\n"
        "def h(x):\n    SEEN.add(x)\n"
    )
    assert findings(text) == ["SEEN", "_A", "_B", "_K"]
    # a parameter of the same name is the function's own
    assert findings("_A = {}\ndef i(_A):\n    _A[1] = 2\n") == []
    assert findings("_T = {1: 2}\ndef f():\n    return _T.get(1)\n") == []
    assert findings("_J = {True: {}}\ndef f(c):\n    _J[True][c] = 1\n") == ["_J"]
    assert findings("_J = {True: {}}\ndef f(c):\n    m = _J[c]\n    m.clear()\n") == ["_J"]
