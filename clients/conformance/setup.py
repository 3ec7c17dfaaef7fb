"""morphz-conformance's build hook (metadata: pyproject.toml).

The kit's gRPC stubs, `morphz_conformance.stubs.morphz.api...`, are generated from protos/
by the build itself (scripts/gen.py) before setuptools lists the package's files; the
requirements' text, morphz_conformance/CONFORMANCE.md, ships as package data.

In the repository, protos/, LICENSE and VERSION live at its root, and the build hooks in
the client's clients/python/build_stubs.py: they are copied here first (git ignores the
copies), so the sdist holds everything its wheel is built from.
"""
from __future__ import annotations

import pathlib
import sys

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).resolve().parent
# build_stubs.py: the repository's (clients/python) in a checkout, its copy in an sdist
sys.path[:0] = [str(HERE.parent / "python"), str(HERE), str(HERE / "scripts")]
import build_stubs  # noqa: E402
import gen  # noqa: E402  (the kit's stub generator; the sdist carries it)

build_stubs.copy_from_checkout(HERE, "clients/conformance", files=["clients/python/build_stubs.py"])
PROTOS = HERE / "protos"


def generate_stubs() -> None:
    if gen.generate(PROTOS) != 0:
        raise SystemExit("morphz-conformance: generating the stubs failed")


def stub_packages() -> list[str]:
    """One package per folder of protos/ (gen.py gives each an __init__.py): known
    before the stubs are generated."""
    folders = [PROTOS, *sorted(p for p in PROTOS.rglob("*") if p.is_dir())]
    return [".".join(("morphz_conformance", "stubs", *f.relative_to(PROTOS).parts))
            for f in folders]


setup(
    packages=[*find_packages(str(HERE), include=["morphz_conformance*"],
                             exclude=["morphz_conformance.stubs*"]), *stub_packages()],
    package_data={"morphz_conformance": ["CONFORMANCE.md"]},
    cmdclass=build_stubs.setup_commands(generate_stubs),
)
