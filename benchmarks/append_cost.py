"""The cost of one appended line against the size of the file it is appended to.

A metrics/quality_gates.jsonl of 1 MB, 100 MB and 1 GB (10 MB in between for
--quick, which stops at 100 MB) of real gate lines; a LocalSource that has read
it to the end; then, repeatedly, one gate line is appended and `refresh` (the
watcher's call: read what is new, decode it, apply it to the State) is timed.
The ratio to the 1 MB figure should stay close to 1. The big file lives in a temp
dir under /tmp and is deleted afterwards; it is skipped when /tmp has < 5 GB free.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.common import Figure
from console.sdd.paths import Kind
from console.sdd.skeleton import init_project
from console.sdd.source import LocalSource

MB = 1024 * 1024
WARMUP = 20
LINE = ('{{"timestamp": "2026-01-01T00:15:10.381204+00:00", "task_id": "{tid:012x}", '
        '"gate": "lint", "result": "pass", "status": "pass", "duration_ms": 1840, '
        '"cached": false, "required": true}}\n')


def _fill(path: Path, size: int) -> None:
    block = "".join(LINE.format(tid=i) for i in range(MB // len(LINE.format(tid=0))))
    data = block.encode()
    with open(path, "wb") as handle:
        written = 0
        while written < size:
            handle.write(data)
            written += len(data)
        handle.flush()
        os.fsync(handle.fileno())  # no writeback of the fill running under the samples


def measure(size: int, repeats: int) -> tuple[list[float], float]:
    """(per-append refresh times in ms, seconds the first full read took)."""
    with tempfile.TemporaryDirectory(prefix="bench-append-", dir="/tmp") as tmp:
        root = Path(tmp)
        init_project(root)
        source = LocalSource(root)
        path = source.paths.of(Kind.GATE_LINES)
        _fill(path, size)
        tail = source.tails[Kind.GATE_LINES]
        started = time.perf_counter()
        while tail.read(64 * MB).more:
            pass  # the initial read (its records are dropped: only the offset matters here)
        primed = time.perf_counter() - started
        samples = []
        with open(path, "a", encoding="utf-8") as handle:
            for index in range(repeats + WARMUP):
                handle.write(LINE.format(tid=index))
                handle.flush()
                started = time.perf_counter()
                delta = source.refresh([path])
                if index >= WARMUP:
                    samples.append((time.perf_counter() - started) * 1000)
                assert "gates" in delta.sections
        return samples, primed


def run(quick: bool) -> list[Figure]:
    sizes = [1, 10, 100] if quick else [1, 100, 1024]
    repeats = 200 if quick else 500
    free = shutil.disk_usage("/tmp").free
    figures: list[Figure] = []
    for size_mb in sizes:
        label = f"{size_mb // 1024} GB" if size_mb >= 1024 else f"{size_mb} MB"
        if size_mb >= 1024 and free < 5 * 1024 * MB:
            figures.append(Figure(f"append one line: {label} file", "ms", [float("nan")],
                                  notes={"skipped": f"/tmp has {free // MB} MB free (< 5 GB)"}))
            continue
        samples, primed = measure(size_mb * MB, repeats)
        figure = Figure(f"append one line: {label} file", "ms", samples,
                        target="same cost at 1 MB and 1 GB",
                        notes={"first_read_s": round(primed, 1)})
        if figures:
            figure.notes["ratio_vs_1MB"] = round(figure.median / figures[0].median, 2)
        figures.append(figure)
    return figures
