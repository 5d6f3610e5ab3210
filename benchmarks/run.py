"""Reproduce every performance figure: `python benchmarks/run.py [--quick] [--json FILE]`.

Each figure is a median and p99 over repeated runs on this machine, printed as a
table and written as JSON (default benchmarks/out/results.json), with the machine
noted. `--only NAME` (repeatable) runs a subset; `--quick` a reduced set (under a
minute) for local checks. DESIGN §6 holds the targets; the README quotes a full run.
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import (  # noqa: E402
    append_cost,
    bernstein_live,
    burst,
    cluster_scaling,
    display_sanitize,
    engine_throughput,
    first_paint,
    full_read,
    gate_cache,
    hostile,
    idle,
    latency,
    views,
)
from benchmarks.common import Figure, machine  # noqa: E402

SUITES: dict[str, Callable[[bool], list[Figure]]] = {
    "first_paint": first_paint.run,
    "full_read": full_read.run,
    "latency": latency.run,
    "burst": burst.run,
    "append_cost": append_cost.run,
    "idle": idle.run,
    "engine": engine_throughput.run,
    "gate_cache": gate_cache.run,
    "bernstein_live": bernstein_live.run,
    "hostile": hostile.run,
    "display_sanitize": display_sanitize.run,
    "views": views.run,
    "cluster": cluster_scaling.run,
}


def _number(value: float) -> str:
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "lost"
    if abs(value) < 1:
        return f"{value:.3f}"
    return f"{value:.1f}" if abs(value) < 10_000 else f"{value:.0f}"


def print_table(figures: list[Figure]) -> None:
    width = max(len(f.name) for f in figures)
    print(f"{'figure':<{width}}  {'median':>11}  {'p99':>11}  {'runs':>5}  target / notes")
    for figure in figures:
        notes = ", ".join(f"{k}={v}" for k, v in figure.notes.items() if k != "gates")
        extra = "; ".join(x for x in (figure.target, notes) if x)
        print(f"{figure.name:<{width}}  {_number(figure.median):>8} {figure.unit:<2}  "
              f"{_number(figure.p99):>8} {figure.unit:<2}  {len(figure.samples):>5}  {extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced set, for local checks")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "out" /
                        "results.json")
    parser.add_argument("--only", choices=sorted(SUITES), action="append")
    args = parser.parse_args(argv)
    figures: list[Figure] = []
    started = time.monotonic()
    # the package byte-compiled, as a wheel is at install (textual's, the floor's, is):
    # where PYTHONDONTWRITEBYTECODE is set, each console start would compile it anew
    compileall.compile_dir(REPO / "console", quiet=1)
    for name in args.only or list(SUITES):
        began = time.monotonic()
        print(f"[{name}] …", file=sys.stderr, flush=True)
        try:
            figures += SUITES[name](args.quick)
        except Exception as exc:  # one broken suite must not lose the others' figures
            print(f"[{name}] failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            figures.append(Figure(f"{name}: failed", "", [float("nan")],
                                  notes={"failed": f"{type(exc).__name__}: {exc}"}))
        print(f"[{name}] {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    print(f"machine: {machine()}")
    print_table(figures)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "machine": machine(), "quick": args.quick,
        "seconds": round(time.monotonic() - started, 1),
        "figures": [f.as_dict() for f in figures]}, indent=2, allow_nan=True))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
