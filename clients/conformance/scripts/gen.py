"""Build step: generate the kit's gRPC stubs from the repository's protos/ into
morphz_conformance/stubs/ (not committed), the way an outside implementer would from
the published protos: no module of the server is imported or copied.

The stubs live in the kit's own namespace (`morphz_conformance.stubs.morphz.api...`), so
the kit never shadows or depends on an installed `morphz` package: protoc's absolute
imports between generated modules are rewritten to that prefix.

    python scripts/gen.py [--protos DIR]     (default: ../../protos beside this kit)
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent.parent
OUT = HERE / "morphz_conformance" / "stubs"
PREFIX = "morphz_conformance.stubs."
_IMPORT = re.compile(r"^(from|import) (morphz\.api\.)", re.MULTILINE)


def generate(protos: pathlib.Path) -> int:
    from grpc_tools import protoc  # a build-time tool only (pip install grpcio-tools)
    import grpc_tools

    files = sorted(str(p.relative_to(protos)) for p in protos.rglob("*.proto"))
    if not files:
        print(f"gen: no .proto files under {protos}", file=sys.stderr)
        return 1
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=OUT.parent) as scratch:
        args = ["protoc", f"-I{protos}", f"-I{well_known}", f"--python_out={scratch}",
                f"--grpc_python_out={scratch}", *files]
        if protoc.main(args) != 0:
            print("gen: protoc failed", file=sys.stderr)
            return 1
        root = pathlib.Path(scratch)
        for d in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
            (d / "__init__.py").touch()
        for src in sorted(root.rglob("*")):
            dest = OUT / src.relative_to(root)
            if src.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            text = _IMPORT.sub(lambda m: f"{m.group(1)} {PREFIX}{m.group(2)}",
                               src.read_text(encoding="utf-8"))
            if not dest.exists() or dest.read_text(encoding="utf-8") != text:
                src.write_text(text, encoding="utf-8")
                os.replace(src, dest)  # atomic: an importer never sees half a module
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protos", type=pathlib.Path, default=HERE.parent.parent / "protos")
    return generate(parser.parse_args().protos.resolve())


if __name__ == "__main__":
    sys.exit(main())
