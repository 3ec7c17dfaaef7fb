"""Build step shared by the two Python distributions (never installed): gRPC stubs and
their type stubs (.pyi) generated from protos/ with grpcio-tools, never committed.

The API's stubs are split by owner, so no file belongs to two distributions:
`morphz-client` generates every service's but the internal storage API's
(`morphz.api.common`, `.transaction`, `.recall`, `.encoding`, and any added later);
the server, `morphz`, generates `morphz.api.storage` and imports the others from the
client it depends on. `morphz` and `morphz.api` are namespace packages (no __init__.py)
that both fill; each service folder below them is a regular, typed package.

Files are generated into a scratch folder and moved into place one by one (os.replace
is atomic), so a process importing them meanwhile never sees half a module; files of a
proto that is gone are removed.

    python build_stubs.py PROTOS OUT (--only SERVICE... | --except SERVICE...)
"""
from __future__ import annotations

import argparse
import functools
import os
import pathlib
import shutil
import sys
import tempfile
from typing import Callable, Iterable, Optional

API = pathlib.PurePosixPath("morphz", "api")
INTERNAL = ("storage",)  # the raw storage API: the server's alone


def services(protos: pathlib.Path, only: Optional[Iterable[str]] = None,
             excluded: Iterable[str] = ()) -> list[str]:
    """The service folders under protos/morphz/api a build generates."""
    found = sorted(p.name for p in (protos / API).iterdir() if p.is_dir())
    chosen = [s for s in found if (only is None or s in only) and s not in set(excluded)]
    missing = set(only or ()) - set(found)
    if missing:
        raise SystemExit(f"build_stubs: no protos for {sorted(missing)} under {protos / API}")
    return chosen


def packages(protos: pathlib.Path, chosen: Iterable[str]) -> list[str]:
    """The import packages the stubs of `chosen` make (known before protoc runs: setup.py
    lists them for setuptools)."""
    out = []
    for service in chosen:
        root = protos / API / service
        for d in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
            if any(d.glob("*.proto")) or d == root:
                out.append(".".join(d.relative_to(protos).parts))
    return out


def generate(protos: pathlib.Path, out: pathlib.Path, chosen: Iterable[str]) -> None:
    """Stubs of the services `chosen` into out/morphz/api/<service>/..."""
    from grpc_tools import protoc  # a build requirement only
    import grpc_tools

    chosen = list(chosen)
    files = sorted(str(p.relative_to(protos)) for s in chosen
                   for p in (protos / API / s).rglob("*.proto"))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        args = ["protoc", f"-I{protos}", f"-I{well_known}", f"--python_out={scratch}",
                f"--pyi_out={scratch}", f"--grpc_python_out={scratch}", *files]
        if protoc.main(args) != 0:
            raise SystemExit(f"build_stubs: protoc failed on {files}")
        made = pathlib.Path(scratch)
        for package in packages(protos, chosen):
            folder = made.joinpath(*package.split("."))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()
        for service in chosen:  # PEP 561: each regular package below the namespaces is typed
            (made / API / service / "py.typed").touch()
        _move_into(made, out, [API / s for s in chosen])


def _move_into(made: pathlib.Path, out: pathlib.Path, owned: list[pathlib.PurePath]) -> None:
    generated = {src.relative_to(made) for src in made.rglob("*") if src.is_file()}
    for src in sorted(made.rglob("*")):
        dest = out / src.relative_to(made)
        if src.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        elif not dest.exists() or dest.read_bytes() != src.read_bytes():
            os.replace(src, dest)
    for folder in owned:  # a proto removed since: its stubs go too
        for stale in (out / folder).rglob("*"):
            if stale.is_file() and "__pycache__" not in stale.parts \
                    and stale.relative_to(out) not in generated:
                stale.unlink()


def copy_from_checkout(here: pathlib.Path, folder: str, files: Iterable[str] = ()) -> None:
    """Inside the repository (`here` is its `folder`), refresh the copies of its protos/,
    LICENSE, VERSION and `files` (paths in the repository, copied by name) in `here`,
    where git ignores them, so the package's sdist holds everything its wheel is built
    from. In an unpacked sdist, with no repository around it, keep the copies it has."""
    repo = here.parents[len(pathlib.PurePosixPath(folder).parts) - 1]
    if (repo / folder / "setup.py").resolve() != here / "setup.py" or \
            not (repo / "protos").is_dir():
        return
    for name in ("LICENSE", "VERSION", *files):
        source, dest = repo / name, here / pathlib.PurePosixPath(name).name
        if not dest.exists() or dest.read_bytes() != source.read_bytes():
            shutil.copyfile(source, dest)
    shutil.copytree(repo / "protos", here / "protos", dirs_exist_ok=True)
    for stale in (here / "protos").rglob("*.proto"):
        if not (repo / stale.relative_to(here)).exists():
            stale.unlink()


def setup_commands(generate: Callable[[], None]) -> dict:
    """setuptools commands that generate the stubs (once) before their work: egg_info (the
    metadata step, pip's first and sdist's, lists the package's files) and build_py."""
    from setuptools.command.build_py import build_py
    from setuptools.command.egg_info import egg_info

    once = functools.cache(generate)

    class EggInfo(egg_info):
        def run(self) -> None:
            once()
            super().run()

    class BuildPy(build_py):
        def run(self) -> None:
            once()
            super().run()

    return {"egg_info": EggInfo, "build_py": BuildPy}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protos", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--only", nargs="+", metavar="SERVICE")
    group.add_argument("--except", dest="excluded", nargs="+", metavar="SERVICE")
    args = parser.parse_args()
    protos = args.protos.resolve()
    generate(protos, args.out.resolve(), services(protos, args.only, args.excluded or ()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
