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

import pathlib
import sys

from setuptools import setup

HERE = pathlib.Path(__file__).resolve().parent
GEN = "build/gen"  # where the stubs are generated, relative to HERE (sdists leave out build/)
sys.path.insert(0, str(HERE))
import build_stubs  # noqa: E402  (beside this file; a build step, not installed)

build_stubs.copy_from_checkout(HERE, "clients/python")
PROTOS = HERE / "protos"
SERVICES = build_stubs.services(PROTOS, excluded=build_stubs.INTERNAL)

setup(
    packages=["morphz.client", *build_stubs.packages(PROTOS, SERVICES)],
    package_dir={"morphz.client": "morphz_client", "morphz.api": "build/gen/morphz/api"},  # GEN's
    package_data={"morphz.client": ["py.typed"], "": ["*.pyi", "py.typed"]},
    cmdclass=build_stubs.setup_commands(lambda: build_stubs.generate(PROTOS, HERE / GEN, SERVICES)),
)
