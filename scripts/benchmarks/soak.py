"""The soak's figures (run: scripts/bench soak): scripts/soak on both topologies, short,
its table for each (recovery time per fault kind, the normal principal's p50 against its
quiet windows measured in the same run, what was lost: nothing). The hour-long soak of
the issue's done-when is `scripts/soak` itself (docs/soak.md).

  scripts/bench soak                      # 10 minutes a topology, a fault a minute
  scripts/bench soak -- --quick           # 3 minutes a topology, a fault every 30 s
  scripts/bench soak -- --minutes 20 --seed 7 --json /tmp/soak.json
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "soaking"))
import main as soak  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 minutes, a fault every 30 s")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--topology", default="both")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    minutes, every = (3.0, 30.0) if args.quick else (args.minutes, 60.0)
    argv = ["--minutes", str(minutes), "--fault-every", str(every), "--topology",
            args.topology] + (["--seed", str(args.seed)] if args.seed else []) + \
        (["--json", args.json] if args.json else [])
    return soak.main(argv)


if __name__ == "__main__":
    sys.exit(main())
