"""Idle CPU and memory of the console with a project open, on a real pty.

The console starts on the project, paints its first rows, and reads the rest
(metrics stream in behind the first paint); "fully read" is when its CPU use first
drops below 5 % of a core over a second (the start of that second, sampled every
0.1 s: a whole second's steps put up to a second on it before). Then CPU time (all threads, from
/proc/PID/stat) is sampled over one-second windows while nothing changes, and
RSS (now and peak) is read from /proc/PID/status.
"""

from __future__ import annotations

import time

from benchmarks.common import REPO, Figure, console_argv, dataset, workdir
from benchmarks.terminal import Screen, proc_cpu_seconds, proc_rss_mb, wait_settled, wait_trace

WINDOW_S = 2


def measure(name: str, seconds: int) -> list[Figure]:
    root = dataset(name)
    trace = workdir() / f"trace-idle-{name}.jsonl"
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
    return [
        Figure(f"idle CPU: {name} project", "%", cpu, target="< 2 % of one core",
               notes={"window_s": WINDOW_S}),
        Figure(f"RSS: {name} project, idle", "MB", [rss], target="≤ 300 MB",
               notes={"peak_MB": round(peak, 1)}),
        Figure(f"fully read: {name} project", "s", [settled],
               notes={"meaning": "process start → CPU first under 5 % for 1 s (all read)"}),
    ]


def run(quick: bool) -> list[Figure]:
    return measure("small", 6) if quick else measure("large", 30)
