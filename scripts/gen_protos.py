"""Generate the Python gRPC stubs from protos/ for a development checkout (never committed),
where the two editable installs find them: the public API's (`morphz.api.common`,
`.transaction`, `.recall`, `.encoding`) in clients/python/build/gen for `morphz-client`,
the internal storage API's in build/gen for the server. The builds of the two
distributions generate the same files the same way (clients/python/build_stubs.py, run
by each setup.py); scripts/bootstrap runs this on every set-up, since protos/ may have
changed while the editable installs did not need to be redone.
"""
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python"))
import build_stubs  # noqa: E402

PROTOS = ROOT / "protos"
SERVER_GEN = ROOT / "build" / "gen"
CLIENT_GEN = ROOT / "clients" / "python" / "build" / "gen"


def drop_old_layout() -> None:
    """Before the split, build/gen held every service's stubs under regular packages
    `morphz` and `morphz.api`: the server's editable install no longer maps them, but a
    stray __init__.py would make a namespace package regular."""
    api = SERVER_GEN / "morphz" / "api"
    for init in (SERVER_GEN / "morphz" / "__init__.py", api / "__init__.py"):
        init.unlink(missing_ok=True)
    for folder in api.glob("*"):
        if folder.is_dir() and folder.name not in build_stubs.INTERNAL:
            shutil.rmtree(folder)


def main() -> int:
    drop_old_layout()
    build_stubs.generate(PROTOS, CLIENT_GEN,
                         build_stubs.services(PROTOS, excluded=build_stubs.INTERNAL))
    build_stubs.generate(PROTOS, SERVER_GEN,
                         build_stubs.services(PROTOS, only=build_stubs.INTERNAL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
