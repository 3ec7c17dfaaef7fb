"""Generate Python gRPC stubs from protos/ into build/gen (never committed).

Every generated package gets an __init__.py so `morphz.api.<service>.v1` imports
as a regular package under the editable install's package-dir mapping.
"""
import pathlib
import shutil
import sys

from grpc_tools import protoc
import grpc_tools

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "build" / "gen"


def main() -> int:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = ["protoc", f"-I{PROTOS}", f"-I{well_known}", f"--python_out={OUT}",
            f"--pyi_out={OUT}", f"--grpc_python_out={OUT}", *files]
    if protoc.main(args) != 0:
        print("gen_protos: protoc failed", file=sys.stderr)
        return 1
    api = OUT / "morphz" / "api"
    for d in [api, *[p for p in api.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
