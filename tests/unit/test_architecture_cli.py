"""One client stack (issue 56): the command line calls the services through morphz.client,
as `morphz mcp` and the inspector do, never through the dict-returning service clients
(services/transaction/client.py, services/recall/client.py, services/encoding/client.py).

The CLI's modules are parsed, not run: every import anywhere in them counts (a late
import inside a function too), relative ones resolved."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = "services/cli"
SERVICE_CLIENTS = ("morphz.services.transaction.client", "morphz.services.recall.client",
                   "morphz.services.encoding.client")


def imported(path: Path, package: str) -> set[str]:
    """The modules the file imports, and `module.name` for each name taken from one (a
    name may be a submodule: `from morphz.services.recall import client`)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def service_client_imports(root: Path) -> list[str]:
    """Each module under services/cli that imports a service's client, with the client."""
    bad = []
    for path in sorted((root / CLI).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        modules = imported(path, "morphz." + CLI.replace("/", "."))
        bad += [f"{rel} -> {c}" for c in SERVICE_CLIENTS
                if any(m == c or m.startswith(c + ".") for m in modules)]
    return bad


def test_the_cli_imports_no_service_client():
    assert len(list((ROOT / CLI).rglob("*.py"))) >= 10  # the walk found the CLI
    assert service_client_imports(ROOT) == []


def test_the_check_catches_each_way_of_importing_a_service_client(tmp_path):
    cli = tmp_path / CLI
    cli.mkdir(parents=True)
    (cli / "a.py").write_text("from morphz.services.transaction.client import TransactionClient\n")
    (cli / "b.py").write_text("def f():\n    import morphz.services.recall.client\n")
    (cli / "c.py").write_text("from morphz.services.encoding import client\n")
    (cli / "d.py").write_text("from ..recall.client import RecallClient\n")
    (cli / "ok.py").write_text("from morphz.client import Client\n"
                               "from morphz.services.storage.client import StorageClient\n")
    assert service_client_imports(tmp_path) == [
        "services/cli/a.py -> morphz.services.transaction.client",
        "services/cli/b.py -> morphz.services.recall.client",
        "services/cli/c.py -> morphz.services.encoding.client",
        "services/cli/d.py -> morphz.services.recall.client"]
