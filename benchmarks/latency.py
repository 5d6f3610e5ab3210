"""File change → on screen: a writer appends task records at a steady rate to
runtime/tasks.jsonl while the console runs on a real pty; each record's latency is
from the moment its line was written (after flush) to the console's trace mark for
the repaint that shows its row. Half the records are new tasks, half change the
state of a task already on screen.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from benchmarks.common import REPO, Figure, console_argv, dataset, workdir
from benchmarks.terminal import Screen, read_marks, wait_settled, wait_trace
from console.sdd.paths import Kind, SddPaths
from console.sdd.task_codec import decode_task, encode_task

#: how long after the last write a row may still arrive before it counts as not shown
GRACE_S = 5.0
STATES = ("claimed", "in_progress", "done", "failed", "open")


def _records(root: Path, count: int) -> list[tuple[str, str]]:
    """(task id, line) pairs: alternately a new task and a state change of an old one."""
    existing = []
    with open(SddPaths(root).of(Kind.TASKS), encoding="utf-8") as handle:
        for line in handle:
            existing.append(json.loads(line)["id"])
            if len(existing) >= 500:
                break
    out = []
    for index in range(count):
        if index % 2:
            task_id = existing[index % len(existing)]
            status = STATES[index % len(STATES)]
        else:
            task_id, status = f"lat{index:06d}", "open"
        task = decode_task({"id": task_id, "title": f"Latency probe {index}",
                            "description": "bench", "role": "qa", "status": status})
        out.append((task_id, json.dumps(encode_task(task))))
    return out


def measure(name: str, rate: float, count: int) -> list[float]:
    root = dataset(name)
    trace = workdir() / f"trace-latency-{name}-{time.monotonic_ns()}.jsonl"
    screen = Screen(console_argv(root), cwd=REPO, env={"BERNSTEIN_TUI_TRACE": str(trace)})
    written: dict[str, list[float]] = {}
    try:
        wait_trace(trace, lambda m: m["rows"] > 0, 120)
        wait_settled(screen.pid)
        path = SddPaths(root).of(Kind.TASKS)
        records = _records(root, count)
        with open(path, "a", encoding="utf-8") as handle:
            start = time.monotonic()
            for index, (task_id, line) in enumerate(records):
                delay = start + index / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                handle.write(line + "\n")
                handle.flush()
                written.setdefault(task_id, []).append(time.time())
        time.sleep(GRACE_S)
    finally:
        screen.close()
    marks = read_marks(trace)
    latencies = []
    for task_id, times in written.items():
        for at in times:
            shown = [m["t"] for m in marks
                     if m["event"] == "rows" and m["t"] >= at and task_id in m["ids"]]
            if shown:
                latencies.append((min(shown) - at) * 1000)
    missing = sum(len(t) for t in written.values()) - len(latencies)
    # a row never shown counts as infinitely late (the table prints "lost")
    return latencies + [float("inf")] * missing


def run(quick: bool) -> list[Figure]:
    rate = 20.0
    figures = []
    sets = [("small", 60 if quick else 400)]
    if not quick:
        sets.append(("large", 200))
    for name, count in sets:
        samples = measure(name, rate, count)
        figures.append(Figure(f"change → screen: {name} project", "ms", samples,
                              target="p50 ≤ 30 ms, p99 ≤ 100 ms",
                              notes={"rate_per_s": rate, "records": count}))
    return figures
