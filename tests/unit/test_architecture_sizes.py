"""Rooms one can live in (issue 56): no file in services/ or shared/ over MAX_FILE_LINES
lines, no function (or method, nested ones on their own) over MAX_FUNCTION_LINES, counted
from its `def` to its last line, decorators not counted. A file of one job reads in one
sitting; a long function is cut into named steps, a long file split by job.

The tree is parsed, not run. Nothing is over today (the last 8 files and 7 functions over
were split in issue 56): a file or function that grows past a limit is split, not listed."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "shared")
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80


def functions(text: str) -> dict[str, int]:
    """Qualified name ("Class.method", "outer.inner") -> lines, for every function."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    out[name] = child.end_lineno - child.lineno + 1
                walk(child, name + ".")
            else:
                walk(child, prefix)
    walk(ast.parse(text), "")
    return out


def sizes(root: Path) -> dict[str, int]:
    """What is over the limits under `root`: "file" -> lines, "file:function" -> lines."""
    out = {}
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            rel, text = path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")
            lines = len(text.splitlines())
            if lines > MAX_FILE_LINES:
                out[rel] = lines
            for name, n in functions(text).items():
                if n > MAX_FUNCTION_LINES:
                    out[f"{rel}:{name}"] = n
    return out


def test_no_file_or_function_is_over_the_limits():
    assert sizes(ROOT) == {}


def test_the_check_counts_files_and_functions(tmp_path):
    body = "        x = 1\n" * MAX_FUNCTION_LINES
    (tmp_path / "services" / "a").mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    (tmp_path / "services" / "a" / "long.py").write_text(
        "class C:\n    def m(self):\n" + body + "\n\ndef ok():\n    return 1\n")
    (tmp_path / "shared" / "big.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "shared" / "fits.py").write_text("def f():\n" + "    x = 1\n" * 79)
    assert sizes(tmp_path) == {"services/a/long.py:C.m": MAX_FUNCTION_LINES + 1,
                               "shared/big.py": MAX_FILE_LINES + 1}
    nested = "def outer():\n    def inner():\n" + "        y = 2\n" * MAX_FUNCTION_LINES
    assert functions(nested) == {"outer": MAX_FUNCTION_LINES + 2,
                                 "outer.inner": MAX_FUNCTION_LINES + 1}
