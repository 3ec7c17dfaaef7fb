"""morphz-client's build hook (metadata: pyproject.toml).

The package is `morphz.client` (source: morphz_client/) with the public API's stubs,
`morphz.api.{common,transaction,recall,encoding}...`, generated from protos/ by the build
itself (build_stubs.py) before setuptools lists the package's files; the server's
distribution depends on this one for them. `morphz` and `morphz.api` are namespace
packages the two distributions share.

In the repository, protos/, LICENSE and VERSION live at its root: they are copied here
first (git ignores the copies), so the sdist holds everything its wheel is built from.
"""
from __future__ import annotations

import functools
import pathlib
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
GEN = "build/gen"  # where the stubs are generated, relative to HERE (sdists leave out build/)
sys.path.insert(0, str(HERE))
import build_stubs  # noqa: E402  (beside this file; a build step, not installed)


def copy_from_checkout() -> None:
    """Refresh the copies of the repository's files when building inside it."""
    if (REPO / "clients" / "python" / "setup.py").resolve() != HERE / "setup.py":
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
SERVICES = build_stubs.services(PROTOS, excluded=build_stubs.INTERNAL)


@functools.cache
def generate_stubs() -> None:
    build_stubs.generate(PROTOS, HERE / GEN, SERVICES)


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
    packages=["morphz.client", *build_stubs.packages(PROTOS, SERVICES)],
    package_dir={"morphz.client": "morphz_client", "morphz.api": "build/gen/morphz/api"},  # GEN's
    package_data={"morphz.client": ["py.typed"], "": ["*.pyi", "py.typed"]},
    cmdclass={"egg_info": EggInfo, "build_py": BuildPy},
)
