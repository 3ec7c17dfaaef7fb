"""Generate Python gRPC stubs from protos/ into build/gen (never committed).

Stubs are generated into a scratch folder and moved into place file by file
(os.replace is atomic), so a process importing them meanwhile never sees a
half-written module. Every generated package gets an __init__.py so
`morphz.api.<service>.v1` imports as a regular package.
"""
import os
import pathlib
import sys
import tempfile

from grpc_tools import protoc
import grpc_tools

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "build" / "gen"


def main() -> int:
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=OUT.parent) as scratch:
        args = ["protoc", f"-I{PROTOS}", f"-I{well_known}", f"--python_out={scratch}",
                f"--pyi_out={scratch}", f"--grpc_python_out={scratch}", *files]
        if protoc.main(args) != 0:
            print("gen_protos: protoc failed", file=sys.stderr)
            return 1
        api = pathlib.Path(scratch) / "morphz" / "api"
        for d in [api, *[p for p in api.rglob("*") if p.is_dir()]]:
            (d / "__init__.py").touch()
        for src in pathlib.Path(scratch).rglob("*"):
            dest = OUT / src.relative_to(scratch)
            if src.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
            elif not dest.exists() or dest.read_bytes() != src.read_bytes():
                os.replace(src, dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
