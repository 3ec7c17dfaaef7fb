"""The import graph of the `morphz` package, read with ast from the source folders
pyproject.toml maps into it (nothing is imported): the layers point one way.

- No service imports services/server, the composition root that builds them (the
  command line, which runs it as `morphz serve`, sits above it), and shared/ imports no
  service at all.
- A service's client imports no servicer (they share the service's converters).
- Cores (services/*/core/) reach neither grpc (nor the generated stubs) nor lmdb,
  directly or through another module of the package: they are domain logic, their
  transport and store are given. One way through is known and left open: recall's
  derived index (services/recall/index/), which recall/core drives, keeps its vectors in
  an LMDB file of its own (vector_cache.py); issue 41 item 6 takes recall's runtime out
  of core.
- recall/core imports nothing of recall/runtime (its threads, processes and files):
  what the core needs of them is a protocol of its own (recall/core/ports.py), and
  recall/wiring.py hands it the runtime's part. Likewise transaction/core imports
  nothing of transaction/runtime (the lease thread): it is given an Ownership.
- shared/ in layers (issue 56): shared/grpc/ (the wire: interceptors, the error
  contract, message conversion) is reached by no core, directly or through another
  module, and imported by nothing else of shared/; shared/process/ (memory, collector,
  files, telemetry, faults) imports neither shared/grpc/ nor grpc.
- The LMDB store (services/storage/lmdb/) is imported only by the storage service
  itself and, above it, the composition root and the commands (`morphz restore`):
  everyone else is given a Store.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = "morphz.services.server"
ABOVE_SERVER = ("morphz.services.cli",)  # runs the server: `morphz serve`
TRANSPORT = ("grpc", "grpc_health", "grpc_reflection", "grpc_status", "morphz.api")
STORE = ("lmdb",)
RECALL_INDEX = "morphz.services.recall.index"  # LMDB of its own (see above)
RECALL_CORE = "morphz.services.recall.core"
RECALL_RUNTIME = "morphz.services.recall.runtime"
TX_CORE = "morphz.services.transaction.core"
TX_RUNTIME = "morphz.services.transaction.runtime"
SHARED = "morphz.shared"
SHARED_GRPC = "morphz.shared.grpc"
SHARED_PROCESS = "morphz.shared.process"
LMDB_STORE = "morphz.services.storage.lmdb"
# Who may import the LMDB store: the storage service, the composition root, the commands.
LMDB_STORE_USERS = ("morphz.services.storage", SERVER) + ABOVE_SERVER


SETUPS = ("setup.py", "clients/python/setup.py")  # the server's and morphz-client's builds


def package_dirs(root: Path) -> dict[str, Path]:
    """The packages the distributions' setup.py map onto folders of the repository (the
    generated stubs, absent from a fresh checkout, are left out: they are not
    hand-written)."""
    out = {}
    for setup in (root / s for s in SETUPS if (root / s).exists()):
        call = next(n for n in ast.walk(ast.parse(setup.read_text(encoding="utf-8")))
                    if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
        mapping = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "package_dir"))
        out.update({name: setup.parent / folder for name, folder in mapping.items()
                    if not folder.startswith("build/")})
    return out


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package: its dotted name -> its file."""
    found = {}
    for package, folder in package_dirs(root).items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The modules `name` imports anywhere in it (function bodies and TYPE_CHECKING
    blocks included: a late import is still an arrow), relative ones resolved; a name
    taken from a package counts as its submodule when it is one."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            yield module
            for alias in node.names:
                if f"{module}.{alias.name}" in known:
                    yield f"{module}.{alias.name}"


def graph(root: Path) -> dict[str, set[str]]:
    found = modules(root)
    known = set(found)
    return {name: set(imports(name, path, known)) for name, path in found.items()}


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def upward_arrows(edges: dict[str, set[str]]) -> list[str]:
    """Imports of the composition root from a service, or of any service from shared/."""
    bad = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            service = within(module, "morphz.services") and not within(module, SERVER) \
                and not any(within(module, above) for above in ABOVE_SERVER)
            if service and within(target, SERVER):
                bad.append(f"{module} -> {target}")
            if within(module, "morphz.shared") and within(target, "morphz.services"):
                bad.append(f"{module} -> {target}")
    return bad


def imports_into(edges: dict[str, set[str]], package: str, target: str) -> list[str]:
    """Each import of `target` (or a module under it) by a module under `package`."""
    return [f"{m} -> {t}" for m in sorted(edges) if within(m, package)
            for t in sorted(edges[m]) if within(t, target)]


def importers_outside(edges: dict[str, set[str]], target: str,
                      allowed: tuple[str, ...]) -> list[str]:
    """Each import of `target` (or a module under it) by a module neither under it nor
    under one of `allowed`."""
    return [f"{m} -> {t}" for m in sorted(edges)
            if not within(m, target) and not any(within(m, a) for a in allowed)
            for t in sorted(edges[m]) if within(t, target)]


def wire_imports_in_shared(edges: dict[str, set[str]]) -> list[str]:
    """Each import of shared/grpc/ by a module of shared/ outside it."""
    return importers_outside({m: t for m, t in edges.items() if within(m, SHARED)},
                             SHARED_GRPC, ())


def is_core(module: str) -> bool:
    parts = module.split(".")
    return len(parts) >= 4 and parts[:2] == ["morphz", "services"] and parts[3] == "core"


def core_reaches(edges: dict[str, set[str]], forbidden: tuple[str, ...],
                 not_through: tuple[str, ...] = ()) -> list[str]:
    """Each core module that reaches a `forbidden` package, with the path it takes
    (not followed into `not_through`)."""
    bad = []
    for start in sorted(m for m in edges if is_core(m)):
        seen, stack = {start}, [(start, [start])]
        while stack:
            module, path = stack.pop()
            for target in sorted(edges.get(module, ())):
                if any(within(target, f) for f in forbidden):
                    bad.append(" -> ".join(path + [target]))
                    stack = []
                    break
                if target in edges and target not in seen \
                        and not any(within(target, n) for n in not_through):
                    seen.add(target)
                    stack.append((target, path + [target]))
    return bad


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return graph(ROOT)


def test_the_graph_covers_every_service_and_the_shared_layer(edges):
    """The walk finds the package where pyproject.toml puts it (a walk that found
    nothing would pass the checks below vacuously)."""
    for package in ("morphz.services.server.node", "morphz.services.storage.wiring",
                    "morphz.services.transaction.wiring", "morphz.services.recall.wiring",
                    "morphz.services.encoding.wiring", "morphz.shared.wired",
                    "morphz.services.transaction.core.engine"):
        assert package in edges, package
    assert "morphz.shared.wired" in edges["morphz.services.recall.wiring"]


def test_no_service_imports_the_composition_root_and_shared_imports_no_service(edges):
    assert upward_arrows(edges) == []


def test_clients_share_converters_with_servicers_not_import_them(edges):
    """A service's client and servicer convert through the service's converter module
    (services/storage/convert.py, say): a client importing a servicer loads the server
    side (and its limits, threads, store) into every caller."""
    clients = [m for m in edges if m.startswith("morphz.services.") and m.endswith(".client")]
    assert len(clients) >= 4
    assert [f"{c} -> {t}" for c in sorted(clients) for t in sorted(edges[c])
            if t.startswith("morphz.services.") and t.endswith(".servicer")] == []


def test_cores_reach_no_grpc(edges):
    assert core_reaches(edges, TRANSPORT) == []


def test_cores_reach_no_lmdb_but_through_recalls_own_index(edges):
    assert core_reaches(edges, STORE, not_through=(RECALL_INDEX,)) == []
    assert not any(within(t, "lmdb") for m in edges if is_core(m) for t in edges[m])


def test_recall_core_imports_nothing_of_recall_runtime(edges):
    assert any(within(m, RECALL_RUNTIME) for m in edges)  # the walk reached it
    assert imports_into(edges, RECALL_CORE, RECALL_RUNTIME) == []


def test_transaction_core_imports_nothing_of_transaction_runtime(edges):
    assert any(within(m, TX_RUNTIME) for m in edges)  # the walk reached it
    assert imports_into(edges, TX_CORE, TX_RUNTIME) == []


def test_the_new_layers_are_where_the_checks_look(edges):
    """The walk reaches each folder the checks below name (moved away, they would pass
    vacuously)."""
    for module in ("morphz.shared.grpc.guard", "morphz.shared.grpc.errors",
                   "morphz.shared.process.memory", "morphz.shared.process.telemetry",
                   "morphz.services.storage.lmdb.store", "morphz.services.storage.lmdb.reader"):
        assert module in edges, module
    assert "morphz.services.storage.lmdb" in edges["morphz.services.storage.wiring"]


def test_cores_reach_nothing_of_the_shared_wire(edges):
    assert core_reaches(edges, (SHARED_GRPC,)) == []


def test_shared_imports_its_wire_only_from_within_it(edges):
    assert wire_imports_in_shared(edges) == []


def test_shared_process_imports_neither_the_wire_nor_grpc(edges):
    assert imports_into(edges, SHARED_PROCESS, SHARED_GRPC) == []
    assert [arrow for t in TRANSPORT for arrow in imports_into(edges, SHARED_PROCESS, t)] == []


def test_only_the_storage_service_and_those_above_it_import_the_lmdb_store(edges):
    assert importers_outside(edges, LMDB_STORE, LMDB_STORE_USERS) == []


def test_the_checks_catch_an_upward_import_and_a_core_reaching_lmdb(tmp_path):
    """The same checks over a small tree that breaks each rule once: they must fail."""
    (tmp_path / "setup.py").write_text(
        'setup(package_dir={"morphz.services": "services", "morphz.shared": "shared",\n'
        '                   "morphz.api": "build/gen/morphz/api"})\n')
    files = {
        "services/__init__.py": "",
        "services/server/__init__.py": "",
        "services/server/wired.py": "",
        "services/recall/__init__.py": "",
        "services/recall/wiring.py": "from ..server import wired\n",
        "services/recall/core/__init__.py": "",
        "services/recall/core/engine.py": "def f():\n    from morphz.services.recall import x\n",
        "services/recall/x.py": "import lmdb\n",
        "services/recall/runtime/__init__.py": "",
        "services/recall/runtime/pins.py": "",
        "services/recall/core/search.py": "if TYPE_CHECKING:\n"
                                          "    from ..runtime.pins import SearchPins\n",
        "services/cli/main.py": "from morphz.services.server import wired\n",
        "shared/__init__.py": "",
        "shared/values.py": "from morphz.services.recall.x import y\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    small = graph(tmp_path)
    assert upward_arrows(small) == [
        "morphz.services.recall.wiring -> morphz.services.server",
        "morphz.services.recall.wiring -> morphz.services.server.wired",
        "morphz.shared.values -> morphz.services.recall.x"]
    assert core_reaches(small, STORE) == [
        "morphz.services.recall.core.engine -> morphz.services.recall.x -> lmdb"]
    assert core_reaches(small, TRANSPORT) == []
    assert imports_into(small, RECALL_CORE, RECALL_RUNTIME) == [
        "morphz.services.recall.core.search -> morphz.services.recall.runtime.pins"]


def test_the_layer_checks_catch_the_wire_below_it_and_a_stray_lmdb_import(tmp_path):
    """The checks of shared/'s layers and of the LMDB store's users over a small tree that
    breaks each once: they must fail."""
    (tmp_path / "setup.py").write_text(
        'setup(package_dir={"morphz.services": "services", "morphz.shared": "shared"})\n')
    files = {
        "shared/__init__.py": "",
        "shared/grpc/__init__.py": "",
        "shared/grpc/errors.py": "",  # no grpc: only the wire's own check sees the core
        "shared/process/__init__.py": "",
        "shared/process/memory.py": "from morphz.shared.grpc import errors\n",
        "shared/names.py": "from morphz.shared.grpc.errors import abort\n",
        "services/__init__.py": "",
        "services/recall/__init__.py": "",
        "services/recall/core/__init__.py": "",
        "services/recall/core/names.py": "from morphz.shared import names\n",
        "services/recall/opener.py": "from morphz.services.storage.lmdb.store import S\n",
        "services/storage/__init__.py": "",
        "services/storage/wiring.py": "from morphz.services.storage.lmdb import LmdbStore\n",
        "services/storage/lmdb/__init__.py": "from .store import LmdbStore\n",
        "services/storage/lmdb/store.py": "import lmdb\n",
        "services/cli/restore.py": "from morphz.services.storage.lmdb import LmdbStore\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    small = graph(tmp_path)
    assert core_reaches(small, TRANSPORT) == []
    assert core_reaches(small, (SHARED_GRPC,)) == [
        "morphz.services.recall.core.names -> morphz.shared.names -> morphz.shared.grpc.errors"]
    assert wire_imports_in_shared(small) == [
        "morphz.shared.names -> morphz.shared.grpc.errors",
        "morphz.shared.process.memory -> morphz.shared.grpc",
        "morphz.shared.process.memory -> morphz.shared.grpc.errors"]
    assert imports_into(small, SHARED_PROCESS, SHARED_GRPC) == [
        "morphz.shared.process.memory -> morphz.shared.grpc",
        "morphz.shared.process.memory -> morphz.shared.grpc.errors"]
    assert importers_outside(small, LMDB_STORE, LMDB_STORE_USERS) == [
        "morphz.services.recall.opener -> morphz.services.storage.lmdb.store"]
