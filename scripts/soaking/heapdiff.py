"""What a server's Python heap gained between two tracemalloc snapshots
(MORPHZ_HEAP_TRACE=DIR:SECONDS:tracemalloc, shared/process/heap_trace.py):

  .venv/bin/python scripts/soaking/heapdiff.py DIR/123-001.tm DIR/123-004.tm [--top 25]
      [--by lineno|traceback|filename]

The totals, then the sites that grew most (size and count differences)."""
from __future__ import annotations

import argparse
import tracemalloc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--by", default="lineno", choices=("lineno", "traceback", "filename"))
    ap.add_argument("--frames", type=int, default=6, help="frames shown with --by traceback")
    args = ap.parse_args()
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__),
              tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    a = tracemalloc.Snapshot.load(args.before).filter_traces(ignore)
    b = tracemalloc.Snapshot.load(args.after).filter_traces(ignore)
    total = [sum(s.size for s in snap.statistics("filename")) for snap in (a, b)]
    print(f"traced: {total[0] / 2**20:.1f} MiB -> {total[1] / 2**20:.1f} MiB "
          f"({(total[1] - total[0]) / 2**20:+.1f} MiB)")
    for stat in b.compare_to(a, args.by)[:args.top]:
        where = stat.traceback.format(limit=args.frames) if args.by == "traceback" else \
            [str(stat.traceback[0])]
        print(f"{stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+8d} blocks "
              f"(now {stat.size / 2**20:7.2f} MiB)  " + "\n      ".join(where))


if __name__ == "__main__":
    main()
