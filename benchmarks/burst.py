"""A burst: 1,000 task changes written within about a second while the console runs
on a real pty. What matters is that the console coalesces them — a handful of
batches from the watcher and a bounded number of repaints — and that the last
change is on screen soon after the burst ends.

Each BERNSTEIN_TUI_TRACE mark is written after the repaint that showed one batch;
marks less than 2 ms apart came from the same repaint.
"""

from __future__ import annotations

import time

from benchmarks.common import REPO, Figure, console_argv, dataset, workdir
from benchmarks.latency import _records
from benchmarks.terminal import Screen, read_marks, wait_settled, wait_trace
from console.sdd.paths import Kind, SddPaths

CHANGES = 1_000
SAME_REPAINT_S = 0.002


def _burst(name: str) -> tuple[int, int, float, float]:
    """(batches, repaints, burst seconds, last change → on screen ms)."""
    root = dataset(name)
    trace = workdir() / f"trace-burst-{time.monotonic_ns()}.jsonl"
    screen = Screen(console_argv(root), cwd=REPO, env={"BERNSTEIN_TUI_TRACE": str(trace)})
    try:
        wait_trace(trace, lambda m: m["rows"] > 0, 120)
        wait_settled(screen.pid)
        before = len(read_marks(trace))
        records = _records(root, CHANGES)
        last_id = records[-1][0]
        with open(SddPaths(root).of(Kind.TASKS), "a", encoding="utf-8") as handle:
            start = time.monotonic()
            for index, (_task_id, line) in enumerate(records):
                delay = start + index / CHANGES - time.monotonic()  # one a millisecond
                if delay > 0:
                    time.sleep(delay)
                handle.write(line + "\n")
                handle.flush()
            took = time.monotonic() - start
            ended = time.time()
        shown = wait_trace(trace, lambda m: m["event"] == "rows" and m["t"] >= ended
                           and last_id in m["ids"], 30)
        time.sleep(1.0)
    finally:
        screen.close()
    marks = read_marks(trace)[before:]
    repaints = 0
    last = None
    for mark in marks:
        if last is None or mark["t"] - last > SAME_REPAINT_S:
            repaints += 1
        last = mark["t"]
    return len(marks), repaints, took, (shown["t"] - ended) * 1000


def run(quick: bool) -> list[Figure]:
    results = [_burst("small") for _ in range(2 if quick else 5)]
    note = {"changes": CHANGES, "burst_s": round(sum(r[2] for r in results) / len(results), 2)}
    return [Figure("burst of 1,000 changes: watcher batches", "n", [r[0] for r in results],
                   notes=note),
            Figure("burst of 1,000 changes: repaints", "n", [r[1] for r in results],
                   target="a few, not 1,000"),
            Figure("burst: last change → on screen", "ms", [r[3] for r in results])]
