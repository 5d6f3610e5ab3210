"""The whole state of a large project (#22): a cold full read — `LocalSource.load()`,
what the console and `status --json` do on start — and a warm one, from the checkpoint
the last read left (sdd/checkpoint.py), against the floor, parsing every line of the
same JSONL files with orjson and keeping nothing, measured in the same run.

Each read runs in a fresh process (its imports included, the page cache warm from the
previous read), with its peak RSS (VmHWM; ru_maxrss would carry the parent's over
exec), on the generated large project (1x: 10,000 tasks, a million gate lines, 50,000
chains, 20,000 reflections) and on 3x and 10x of it: the scale curve (generated here,
never committed; --quick: 0.1x and 0.3x). The 1x project is also read cold as Bernstein
3.23.0 writes it (the task log with its keys, a gate's metadata in its line).

`python -m benchmarks.full_read` prints the figures.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.common import REPO, Figure, workdir
from console.sdd.paths import SddPaths

FLOOR = r"""
import os, sys, time
start = time.perf_counter()
import orjson
lines = size = 0
for folder, _, names in os.walk(os.path.join(sys.argv[1], ".sdd")):
    for name in names:
        if name.endswith(".jsonl"):
            path = os.path.join(folder, name)
            size += os.path.getsize(path)
            with open(path, "rb") as handle:
                for line in handle:
                    if line.strip():
                        orjson.loads(line)
                        lines += 1
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(time.perf_counter() - start, peak, lines, size)
"""
READ = r"""
import sys, time
start = time.perf_counter()
from pathlib import Path
from console.sdd.source import LocalSource
source = LocalSource(Path(sys.argv[1]), checkpoint_after=None if sys.argv[2] == "cold" else 0)
source.load()
assert not source.state.problems, source.state.problems[:3]
if sys.argv[2] == "save":
    assert source.save_checkpoint(force=True)
elif sys.argv[2] == "warm":
    assert len(source.restored) >= 10, source.restored
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(time.perf_counter() - start, peak, len(source.state.tasks),
      source.state.gate_stats["lint"].runs)
"""


def _project(factor: float, shape: str = "1.9.3") -> Path:
    from benchmarks.generate import Sizes, generate

    root = workdir() / f"scale-{factor:g}x-{shape}"
    if not root.exists():
        root.mkdir()
        generate(root, Sizes().scaled(factor), seed=0, shape=shape)
    return root


def _cache_home() -> Path:
    return workdir() / "cache-home"


def _checkpoint(root: Path) -> Path:
    """Where the runs' checkpoint of `root` is (SddPaths.checkpoint, under their cache)."""
    return _cache_home() / "bernstein-tui" / "checkpoints" / SddPaths(root).checkpoint.name


def _run(script: str, root: Path, *args: str) -> list[float]:
    env = {**os.environ, "XDG_STATE_HOME": str(workdir() / "state-home"),  # its own key
           "XDG_CACHE_HOME": str(_cache_home())}  # and checkpoints
    out = subprocess.run([sys.executable, "-c", script, str(root), *args], env=env,
                         capture_output=True, text=True, timeout=3600, cwd=REPO,
                         check=True).stdout
    return [float(v) for v in out.split()]


def run(quick: bool) -> list[Figure]:
    scales = (0.1, 0.3) if quick else (1.0, 3.0, 10.0)
    figures: list[Figure] = []
    for factor in scales:
        root = _project(factor)
        repeats = 3 if factor <= 1 else 2 if factor <= 3 else 1
        _run(FLOOR, root)  # the page cache holds the files for both
        floor_runs = [_run(FLOOR, root) for _ in range(repeats)]
        cold_runs = [_run(READ, root, "cold") for _ in range(repeats)]
        _run(READ, root, "save")
        warm_runs = [_run(READ, root, "warm") for _ in range(repeats)]
        lines, size = int(floor_runs[0][2]), floor_runs[0][3]
        floor = Figure(f"full read floor (orjson parse), {factor:g}x", "s",
                       [r[0] for r in floor_runs],
                       notes={"lines": lines, "jsonl_mb": round(size / 1e6),
                              "rss_mb": round(max(r[1] for r in floor_runs) / 1024)})
        cold = Figure(f"cold full read, {factor:g}x", "s", [r[0] for r in cold_runs],
                      target="≤ 1.5x the floor (2x at most); RSS ≤ 300 MB at 1x",
                      notes={"rss_mb": round(max(r[1] for r in cold_runs) / 1024),
                             "tasks": int(cold_runs[0][2]),
                             "s_per_100mb": round(
                                 min(r[0] for r in cold_runs) / (size / 1e8), 2)})
        cold.notes["ratio_vs_floor"] = round(cold.median / floor.median, 2)
        warm = Figure(f"warm full read (from the checkpoint), {factor:g}x", "s",
                      [r[0] for r in warm_runs], target="≤ 0.25x the floor",
                      notes={"rss_mb": round(max(r[1] for r in warm_runs) / 1024),
                             "checkpoint_mb": round(
                                 _checkpoint(root).stat().st_size
                                 / 1e6),
                             "ratio_vs_floor": round(
                                 statistics.median(r[0] for r in warm_runs) / floor.median,
                                 2)})
        figures += [floor, cold, warm]
    figures += _as_bernstein_323(scales[0])
    return figures


def _as_bernstein_323(factor: float) -> list[Figure]:
    """The same project as Bernstein 3.23.0 writes it: task records with its two more
    keys and without ours, a gate's metadata in its line (benchmarks/generate.py)."""
    root = _project(factor, "3.23")
    _run(FLOOR, root)
    floor_runs = [_run(FLOOR, root) for _ in range(3)]
    cold_runs = [_run(READ, root, "cold") for _ in range(3)]
    floor = Figure(f"full read floor (orjson parse), {factor:g}x as Bernstein 3.23 writes it",
                   "s", [r[0] for r in floor_runs],
                   notes={"jsonl_mb": round(floor_runs[0][3] / 1e6)})
    cold = Figure(f"cold full read, {factor:g}x as Bernstein 3.23 writes it", "s",
                  [r[0] for r in cold_runs], target="as the 1.9.3-shaped read",
                  notes={"rss_mb": round(max(r[1] for r in cold_runs) / 1024)})
    cold.notes["ratio_vs_floor"] = round(cold.median / floor.median, 2)
    return [floor, cold]


if __name__ == "__main__":
    from benchmarks.run import print_table

    print_table(run("--quick" in sys.argv))
