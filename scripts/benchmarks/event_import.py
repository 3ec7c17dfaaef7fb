"""Imported events/s next to single appends, in the same run (run: scripts/bench event_import).

Issue 39 item 4: `morphz context import FILE` must append at least 10x the rate of
one-by-one appends. One `morphz serve` (durable, the default) in its own process, two
fresh contexts on it:

  single   AppendEvent calls back to back from one client (1 in flight), each with its
           own request id (as an import's lines have), for --seconds
  import   the real CLI process, `morphz context import` of --lines JSONL lines (the
           shape DUR-09 imports: kind, session, actor, text, occurred_at), batches of
           --batch lines: the rate it reports (lines over its appending time), and the
           rate over the whole process's wall time (start-up and parsing included)

  scripts/bench event_import
  scripts/bench event_import -- --lines 5000 --seconds 3 --json /tmp/import.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ServerProcess, log, summarize, table, target, write_json  # noqa: E402

from morphz.services.transaction.client import TransactionClient  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET_RATIO = 10.0
START = datetime(2018, 1, 1, tzinfo=timezone(timedelta(hours=8)))


def single_appends(client: TransactionClient, context: str, seconds: float) -> dict:
    latencies, i = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        client.append_event(context, "s1", "user-message", f"line{i:06d} a note to import",
                            request_id=f"single-{i}", actor="bench",
                            occurred_at=(START + timedelta(minutes=i)).isoformat())
        latencies.append(time.monotonic() - t0)
        i += 1
    return summarize(latencies, seconds)


def cli_import(address: str, context: str, path: str, batch: int) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "context",
                           "import", path, "--context", context, "--batch", str(batch),
                           "--no-progress", "--server", address, "--format=json"],
                          capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"import failed: {proc.stdout} {proc.stderr}")
    reply = json.loads(proc.stdout)
    return {"events_per_s": reply["lines_per_second"], "wall_per_s": reply["lines"] / wall,
            "lines": reply["lines"], "seconds": reply["seconds"], "wall_s": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=5.0, help="single appends' window")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        path = os.path.join(tmp, "history.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for i in range(args.lines):
                f.write(json.dumps({"kind": "user-message", "session": "s1", "actor": "bench",
                                    "text": f"line{i:06d} a note to import",
                                    "occurred_at": (START + timedelta(minutes=i)).isoformat()})
                        + "\n")
        cmd = [os.path.join(ROOT, ".venv", "bin", "morphz"), "serve", "--listen",
               "127.0.0.1:0", "--data", os.path.join(tmp, "data")]
        with ServerProcess(cmd, log_path=os.path.join(tmp, "server.log")) as srv:
            channel = grpc.insecure_channel(srv.address)
            client = TransactionClient(channel, timeout=60)
            for ctx in ("single", "import"):
                client.create_context(ctx)
            log(f"single appends for {args.seconds:g} s")
            single = single_appends(client, "single", args.seconds)
            log(f"importing {args.lines} lines in batches of {args.batch}")
            imported = cli_import(srv.address, "import", path, args.batch)
            assert client.status("import")["event_count"] == 1 + args.lines
            channel.close()
    rows = [{"row": "single AppendEvent, 1 in flight", "events_per_s": single["ops_per_s"],
             "p50_ms": single["p50_ms"], "ratio": 1.0},
            {"row": f"context import, batches of {args.batch}",
             "events_per_s": imported["events_per_s"], "p50_ms": float("nan"),
             "ratio": imported["events_per_s"] / single["ops_per_s"]},
            {"row": "context import, whole process wall", "events_per_s": imported["wall_per_s"],
             "p50_ms": float("nan"), "ratio": imported["wall_per_s"] / single["ops_per_s"]}]
    print(table(rows, [("row", "events appended"), ("events_per_s", "events/s"),
                       ("p50_ms", "p50 ms"), ("ratio", "x single")]))
    ratio = rows[1]["ratio"]
    result = target("import events/s over single appends", ratio, f">= {TARGET_RATIO:g}x",
                    ratio >= TARGET_RATIO, "x")
    if args.json:
        write_json(args.json, {"rows": rows, "targets": [result]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
