"""Idle CPU and memory of the console with a project open, on a real pty.

The console starts on the project, paints its first rows, and reads the rest
(metrics stream in behind the first paint); "fully read" is when its CPU use first
drops below 5 % of a core over a second (the start of that second, sampled every
0.1 s). Then CPU time (all threads, from /proc/PID/stat) is sampled over two-second
windows while nothing changes, and RSS (now and peak) is read from /proc/PID/status.
Once cold (any checkpoint removed first: an earlier suite's console leaves one), then
warm, from the checkpoint the cold start wrote.
"""

from __future__ import annotations

import time

from benchmarks.common import REPO, Figure, console_argv, dataset, workdir
from benchmarks.terminal import Screen, proc_cpu_seconds, proc_rss_mb, wait_settled, wait_trace
from console.sdd.paths import SddPaths

WINDOW_S = 2


def measure(name: str, seconds: int, start: str) -> list[Figure]:
    """`start`: "cold" (no checkpoint: every file read) or "warm" (from the checkpoint
    the cold start left); idle CPU is sampled for `seconds` after a cold start."""
    root = dataset(name)
    checkpoint = SddPaths(root).checkpoint
    if start == "cold":
        checkpoint.unlink(missing_ok=True)  # (an earlier suite's console may have left one)
    elif not checkpoint.is_file():
        return []  # (a project too small for one: its start is the cold one)
    trace = workdir() / f"trace-idle-{name}-{start}.jsonl"
    screen = Screen(console_argv(root), cwd=REPO, env={"BERNSTEIN_TUI_TRACE": str(trace)})
    try:
        wait_trace(trace, lambda m: m["rows"] > 0, 120)
        settled = wait_settled(screen.pid, window=1.0, below=0.05, timeout=300) - screen.started
        cpu = []
        last = proc_cpu_seconds(screen.pid)
        for _ in range(seconds // WINDOW_S):
            time.sleep(WINDOW_S)
            now = proc_cpu_seconds(screen.pid)
            cpu.append((now - last) * 100 / WINDOW_S)
            last = now
        rss = proc_rss_mb(screen.pid)
        peak = proc_rss_mb(screen.pid, "VmHWM")
    finally:
        screen.close()
    figures = [
        Figure(f"RSS: {name} project, idle after a {start} start", "MB", [rss],
               target="≤ 300 MB", notes={"peak_MB": round(peak, 1)}),
        Figure(f"fully read: {name} project, {start} start", "s", [settled],
               notes={"meaning": "process start → CPU first under 5 % for 1 s (all read)"}),
    ]
    if cpu:
        figures.insert(0, Figure(f"idle CPU: {name} project", "%", cpu,
                                 target="< 2 % of one core", notes={"window_s": WINDOW_S}))
    return figures


def run(quick: bool) -> list[Figure]:
    name, seconds = ("small", 6) if quick else ("large", 30)
    return measure(name, seconds, "cold") + measure(name, 0, "warm")
