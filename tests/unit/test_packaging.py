"""Every package carries the one version and the one licence. VERSION is where the version
is written: the Python packages read it at build time (the client and the kit from their
copy of it), and what cannot read it must equal it: npm's package.json (and its lock),
the server's pin on morphz-client (the server imports the client's stubs, so the two must
come from the same protos), the image tag the deploy manifests name. LICENSE is
Apache-2.0, the specification's licence, and each package's metadata names it. (The
packages themselves are built and installed in tests/integration/test_packages.py.)"""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()
PYTHON_PACKAGES = {"morphz": ROOT, "morphz-client": ROOT / "clients" / "python",
                   "morphz-conformance": ROOT / "clients" / "conformance"}
TYPESCRIPT = ROOT / "clients" / "typescript"


def pyproject(folder: Path) -> dict:
    with open(folder / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_version_is_one_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION


def test_the_licence_is_apache_2():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith(" " * 33 + "Apache License\n" + " " * 27 + "Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text


@pytest.mark.parametrize("name", sorted(PYTHON_PACKAGES))
def test_each_python_package_reads_version_and_names_the_licence(name):
    folder = PYTHON_PACKAGES[name]
    meta = pyproject(folder)
    project = meta["project"]
    assert project["name"] == name
    assert "version" not in project and "version" in project["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"file": "VERSION"}
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert "grpcio-tools==1.85.1" in meta["build-system"]["requires"]  # stubs at build time
    if folder != ROOT:  # built on its own: setup.py copies the repository's files in
        where = folder.relative_to(ROOT).as_posix()
        assert f'copy_from_checkout(HERE, "{where}"' in (folder / "setup.py").read_text()
        assert {"LICENSE", "VERSION"} <= set((folder / "MANIFEST.in").read_text().split())


def test_the_server_pins_the_client_of_its_own_version():
    pins = [d for d in pyproject(ROOT)["project"]["dependencies"] if d.startswith("morphz-client")]
    assert pins == [f"morphz-client=={VERSION}"], "change it with VERSION"


def test_the_npm_package_is_versioned_licensed_and_public():
    package = json.loads((TYPESCRIPT / "package.json").read_text())
    assert (package["name"], package["version"], package["license"]) == \
        ("@morphz/client", VERSION, "Apache-2.0")
    assert "private" not in package
    assert "LICENSE" in package["files"] and package["scripts"]["prepack"] == "npm run build"
    lock = json.loads((TYPESCRIPT / "package-lock.json").read_text())
    assert (lock["version"], lock["packages"][""]["version"],
            lock["packages"][""]["license"]) == (VERSION, VERSION, "Apache-2.0")


def test_the_deploy_manifests_name_the_image_of_this_version():
    tags = re.findall(r"\bmorphz:(\d[\w.]*)", "\n".join(
        p.read_text() for p in sorted((ROOT / "deploy").rglob("*"))
        if p.is_file() and p.suffix in (".yaml", ".yml", "") and p.name != "probe.py"))
    assert tags and set(tags) == {VERSION}, tags
