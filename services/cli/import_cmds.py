"""`morphz context import FILE` (see EXTENSIONS in main.py): appends a JSONL file's lines
as events, in batches (one AppendEvents commit each), with a progress bar on stderr.

Every line is checked before the first batch is sent (a bad line imports nothing and is
named by its number). Each line carries its own request id (import_lines.py), so an
import killed midway and run again applies the lines it had not applied and answers the
others as replayed: every line once."""
from __future__ import annotations

import argparse
import sys
import time
from types import MappingProxyType
from typing import Callable, TextIO

from morphz.client import Client, MorphzError as CallError
from morphz.services.cli.import_lines import Line, parse_lines
from morphz.shared.errors import MorphzError

BATCH_LINES = 500
BATCH_BYTES = 4 << 20  # a batch's text at most (a larger line goes alone)
BAR_WIDTH = 30


def add_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> list[str]:
    p = add("import", "append a JSONL file's lines ({kind, session, actor, text, "
            "occurred_at, secret}) as events; run again after a failure: each line is "
            "applied once")
    p.add_argument("file", metavar="FILE", help="the JSONL file")
    p.add_argument("--batch", metavar="N", type=int, default=BATCH_LINES,
                   help=f"lines per commit (1..10000, default {BATCH_LINES})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return ["import"]


def batches(lines: list[Line], size: int) -> list[list[Line]]:
    out, part, nbytes = [], [], 0
    for line in lines:
        if part and (len(part) >= size or nbytes + line.size > BATCH_BYTES):
            out.append(part)
            part, nbytes = [], 0
        part.append(line)
        nbytes += line.size
    if part:
        out.append(part)
    return out


def call_import(client: Client, args: argparse.Namespace) -> dict:
    if not 1 <= args.batch <= 10_000:
        raise MorphzError("CONTEXT_INPUT_INVALID", "--batch must be 1..10000", field="batch")
    try:
        with open(args.file, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"cannot read {args.file}: "
                          f"{e.strerror or e}", field="file", path=args.file) from None
    lines = parse_lines(raw, args.file)
    bar = Progress(len(lines), None if args.no_progress else sys.stderr)
    applied = replayed = 0
    first = last = ""
    start = time.monotonic()
    for part in batches(lines, args.batch):
        try:
            reply = client.append_events(args.context, [ln.event for ln in part])
        except CallError as e:
            bar.end()
            if "index" in e.details:  # the batch's line that was refused: none of it applied
                e.details["line"] = part[e.details.pop("index")].number
            e.details.update(applied=applied, replayed=replayed, file=args.file)
            raise
        for r in reply.events:
            replayed += r.replayed
            first = first or r.ref
            last = r.ref
        applied += len(part) - sum(r.replayed for r in reply.events)
        bar.update(len(part))
    bar.end()
    seconds = time.monotonic() - start
    return {"file": args.file, "lines": len(lines), "applied": applied, "replayed": replayed,
            "first_ref": first, "last_ref": last, "seconds": round(seconds, 3),
            "lines_per_second": round(len(lines) / seconds, 1) if seconds > 0 else 0.0}


class Progress:
    """A one-line bar on `out` (None: silent), redrawn after every batch."""

    def __init__(self, total: int, out) -> None:
        self._total, self._done, self._out = total, 0, out
        self._start = time.monotonic()

    def update(self, n: int) -> None:
        self._done += n
        if self._out is None:
            return
        filled = BAR_WIDTH * self._done // max(1, self._total)
        rate = self._done / max(1e-9, time.monotonic() - self._start)
        self._out.write(f"\rimport [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                        f"{self._done}/{self._total} lines, {rate:.0f}/s")
        self._out.flush()

    def end(self) -> None:
        if self._out is not None and self._done:
            self._out.write("\n")
            self._out.flush()


def render_import(r: dict, out: TextIO) -> None:
    print(f"imported {r['lines']} lines from {r['file']}: {r['applied']} applied, "
          f"{r['replayed']} already applied before ({r['first_ref']}..{r['last_ref']}, "
          f"{r['lines_per_second']} lines/s)", file=out)


SERVICE = "transaction"  # the service these commands call (services/cli/connect.py server_for)
COMMANDS: MappingProxyType = MappingProxyType({
    "import": (call_import, render_import, lambda _: 0),
})
