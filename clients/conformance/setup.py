"""morphz-conformance's build hook (metadata: pyproject.toml).

The kit's gRPC stubs, `morphz_conformance.stubs.morphz.api...`, are generated from protos/
by the build itself (scripts/gen.py) before setuptools lists the package's files; the
requirements' text, morphz_conformance/CONFORMANCE.md, ships as package data.

In the repository, protos/, LICENSE and VERSION live at its root: they are copied here
first (git ignores the copies), so the sdist holds everything its wheel is built from.
"""
from __future__ import annotations

import functools
import pathlib
import shutil
import sys

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE / "scripts"))
import gen  # noqa: E402  (the kit's build step; the sdist carries it)


def copy_from_checkout() -> None:
    """Refresh the copies of the repository's files when building inside it."""
    if (REPO / "clients" / "conformance" / "setup.py").resolve() != HERE / "setup.py":
        return  # an unpacked sdist: its copies are the ones to build from
    for name in ("LICENSE", "VERSION"):
        if not (HERE / name).exists() or (HERE / name).read_bytes() != (REPO / name).read_bytes():
            shutil.copyfile(REPO / name, HERE / name)
    shutil.copytree(REPO / "protos", HERE / "protos", dirs_exist_ok=True)
    for stale in (HERE / "protos").rglob("*.proto"):
        if not (REPO / stale.relative_to(HERE)).exists():
            stale.unlink()


copy_from_checkout()
PROTOS = HERE / "protos"


@functools.cache
def generate_stubs() -> None:
    if gen.generate(PROTOS) != 0:
        raise SystemExit("morphz-conformance: generating the stubs failed")


def stub_packages() -> list[str]:
    """One package per folder of protos/ (gen.py gives each an __init__.py): known
    before the stubs are generated."""
    folders = [PROTOS, *sorted(p for p in PROTOS.rglob("*") if p.is_dir())]
    return [".".join(("morphz_conformance", "stubs", *f.relative_to(PROTOS).parts))
            for f in folders]


class EggInfo(egg_info):
    """Metadata (pip's first step, and sdist's) lists the package's files: stubs first."""

    def run(self) -> None:
        generate_stubs()
        super().run()


class BuildPy(build_py):
    def run(self) -> None:
        generate_stubs()
        super().run()


setup(
    packages=[*find_packages(str(HERE), include=["morphz_conformance*"],
                             exclude=["morphz_conformance.stubs*"]), *stub_packages()],
    package_data={"morphz_conformance": ["CONFORMANCE.md"]},
    cmdclass={"egg_info": EggInfo, "build_py": BuildPy},
)
