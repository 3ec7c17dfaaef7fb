"""The CLI's local input: files and stdin read as UTF-8, arguments checked for valid
Unicode; a bad one is refused in the server's shape (CONTEXT_INPUT_INVALID)."""
from __future__ import annotations

import argparse
import sys

from morphz.shared.errors import MorphzError

STDIN = "-"


def input_error(message: str, **details: object) -> MorphzError:
    """A bad local input, in the same shape as the server's CONTEXT_INPUT_INVALID."""
    return MorphzError("CONTEXT_INPUT_INVALID", message, **details)


def read_text(path: str, what: str = "file") -> str:
    """The UTF-8 content of `path` (`-` is stdin), or a CONTEXT_INPUT_INVALID error."""
    try:
        if path == STDIN:
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
    except OSError as e:
        raise input_error(f"cannot read {path}: {e.strerror or e}", field=what, path=path,
                          error=type(e).__name__) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise input_error(f"{'stdin' if path == STDIN else path} is not valid UTF-8 "
                          f"(byte offset {e.start})", field=what, path=path,
                          offset=e.start) from None



def check_encodable(args: argparse.Namespace) -> None:
    """Reject arguments that are not valid Unicode (undecodable bytes in argv)."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise input_error(f"--{name.replace('_', '-')} is not valid UTF-8",
                                      field=name) from None
