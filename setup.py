"""The server distribution's build hook (metadata: pyproject.toml).

One import namespace, `morphz`, over the repository's folders: services/ is
`morphz.services`, shared/ is `morphz.shared`. The internal storage API's stubs,
`morphz.api.storage`, are generated from protos/ by the build itself
(clients/python/build_stubs.py, grpcio-tools being a build requirement) before setuptools
lists the package's files; never committed. The public API's stubs and `morphz.client`
come from the `morphz-client` distribution, which this one depends on: `morphz` and
`morphz.api` are namespace packages the two share.
"""
from __future__ import annotations

import pathlib
import sys

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).resolve().parent
GEN = "build/gen"  # where the stubs are generated, relative to HERE (sdists leave out build/)
sys.path.insert(0, str(HERE / "clients" / "python"))
import build_stubs  # noqa: E402  (the client's build step; the sdist carries it)

PROTOS = HERE / "protos"
SERVICES = build_stubs.services(PROTOS, only=build_stubs.INTERNAL)


def under(prefix: str, folder: str) -> list[str]:
    return [prefix, *(f"{prefix}.{p}" for p in find_packages(str(HERE / folder)))]


setup(
    packages=[*under("morphz.services", "services"), "morphz.services.ui.static",
              *under("morphz.shared", "shared"), *build_stubs.packages(PROTOS, SERVICES)],
    package_dir={"morphz.services": "services", "morphz.shared": "shared",
                 "morphz.api": "build/gen/morphz/api"},  # GEN's
    # `morphz ui` serves its page and assets from the package (services/ui/static/).
    package_data={"morphz.services.ui.static": ["*"], "": ["*.pyi", "py.typed"]},
    cmdclass=build_stubs.setup_commands(lambda: build_stubs.generate(PROTOS, HERE / GEN, SERVICES)),
)
