"""Reproduce every performance figure: `python benchmarks/run.py [--quick] [--json FILE]`.

Each figure is a median (and p99) over repeated runs on this machine, printed as a
table and written as JSON (default benchmarks/out/results.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import gate_cache  # noqa: E402
from benchmarks.common import machine  # noqa: E402

SUITES = {"gate_cache": gate_cache.run}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, for local checks")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "out" /
                        "results.json")
    parser.add_argument("--only", choices=sorted(SUITES), action="append")
    args = parser.parse_args(argv)
    figures = []
    for name in args.only or sorted(SUITES):
        figures += SUITES[name](args.quick)
    width = max(len(f.name) for f in figures)
    print(f"{'figure':<{width}}  {'median':>10}  {'p99':>10}  runs  notes")
    for figure in figures:
        notes = ", ".join(f"{k}={v}" for k, v in figure.notes.items() if k != "gates")
        print(f"{figure.name:<{width}}  {figure.median:>8.1f}{figure.unit:>2}  "
              f"{figure.p99:>8.1f}{figure.unit:>2}  {len(figure.samples):>4}  {notes}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": machine(),
                                     "figures": [f.as_dict() for f in figures]}, indent=2))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
