"""The `morphz` command's entry point: before the command line loads the server's
modules, check that PyICU imports, and say what the system needs where it does not.

Recall's text analysis (shared/text/analyze.py) is PyICU over the system's ICU library,
and the CLI's modules load it. PyICU has no wheels: pip compiles it against the ICU found
by pkg-config, so an install needs ICU's headers, pkg-config and a C++ compiler, and the
installed module then needs that same ICU library at run time (a system upgrade to
another ICU version, or a copied venv, loses it). Either way the import fails deep in a
traceback; here it is one JSON error naming the cause and the fix, exit 1.
"""
from __future__ import annotations

import json
import sys
from typing import Optional

from morphz.shared.errors import MorphzError

NEEDS = ("PyICU (pip install pyicu) over the system's ICU library. To build PyICU, pip needs "
         "ICU's headers, pkg-config and a C++ compiler: on Debian or Ubuntu `apt-get install "
         "libicu-dev pkg-config g++`, on Fedora `dnf install libicu-devel pkgconf-pkg-config "
         "gcc-c++`, on macOS `brew install icu4c pkg-config` (with PKG_CONFIG_PATH naming "
         "icu4c's lib/pkgconfig). Where the ICU it was built against is gone, rebuild it: "
         "`pip install --force-reinstall --no-cache-dir --no-binary pyicu pyicu`.")


def icu_missing() -> Optional[MorphzError]:
    """None when PyICU imports; else the error to print."""
    try:
        import icu  # noqa: F401
    except ImportError as e:
        return MorphzError("ICU_UNAVAILABLE",
                           f"morphz needs {NEEDS} The import failed: {e}",
                           module="icu", cause=str(e)[:256])
    return None


def main(argv: Optional[list[str]] = None) -> int:
    missing = icu_missing()
    if missing is not None:
        print(json.dumps({"error": missing.to_dict()}, ensure_ascii=False))
        return 1
    from morphz.services.cli.main import main as cli_main
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
