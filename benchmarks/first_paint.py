"""Console first paint on a real pty, beside the floor measured in the same run.

Floor: `python -c "import textual.app"` (wall time of the process), and a minimal
Textual app on the same pty (process start → its one line is on the terminal).
Console: `bernstein-tui -C DIR --read-only` (process start → ...):
- empty project: the "No tasks yet" screen is on the terminal;
- small and large projects: the first repaint that shows task rows (its
  BERNSTEIN_TUI_TRACE mark), and the repaint that shows all of them.
Ratios are console medians over the minimal app's median.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, Figure, console_argv, dataset, workdir
from benchmarks.terminal import Screen, wait_trace

MINIMAL_APP = '''
from textual.app import App
from textual.widgets import Static

class Minimal(App):
    def compose(self):
        yield Static("FLOOR-READY")

Minimal().run()
'''


def _import_floor() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import textual.app"], check=True)
    return (time.perf_counter() - started) * 1000


def _text_paint(argv: list[str], needle: str) -> float:
    screen = Screen(argv, cwd=REPO, needles=(needle,))
    try:
        return (screen.wait_text(needle) - screen.started) * 1000
    finally:
        screen.close()


def _rows_paint(root: Path, total: int, timeout: float) -> tuple[float, float]:
    """(first rows, all rows) in ms after process start."""
    trace = workdir() / f"trace-{time.monotonic_ns()}.jsonl"
    screen = Screen(console_argv(root), cwd=REPO, env={"BERNSTEIN_TUI_TRACE": str(trace)})
    try:
        first = wait_trace(trace, lambda m: m["event"] == "rows" and m["rows"] > 0, timeout)
        full = wait_trace(trace, lambda m: m["event"] == "rows" and m["rows"] >= total,
                          timeout)
        return (first["t"] - screen.started) * 1000, (full["t"] - screen.started) * 1000
    finally:
        screen.close()
        trace.unlink(missing_ok=True)


def run(quick: bool) -> list[Figure]:
    repeats = 3 if quick else 7
    app = workdir() / "minimal_app.py"
    app.write_text(MINIMAL_APP)
    imports = [_import_floor() for _ in range(repeats)]
    minimal = [_text_paint([sys.executable, str(app)], "FLOOR-READY") for _ in range(repeats)]
    empty_root = dataset("empty")
    empty = [_text_paint(console_argv(empty_root), "No tasks yet") for _ in range(repeats)]
    floor = Figure("floor: minimal Textual app paint", "ms", minimal)
    figures = [Figure("floor: import textual.app", "ms", imports), floor]
    empty_fig = Figure("first paint: empty project", "ms", empty,
                       target="≤ 500 ms; ≤ 1.3x the minimal app")
    figures.append(empty_fig)
    sets = [("small", 200, 3 if quick else 7)]
    if not quick:
        sets.append(("large", 10_000, 5))
    for name, total, count in sets:
        root = dataset(name)
        pairs = [_rows_paint(root, total, 120) for _ in range(count)]
        first = Figure(f"first paint: {name} project, first rows", "ms", [p[0] for p in pairs],
                       target="≤ 1000 ms" if name == "large" else "")
        full = Figure(f"first paint: {name} project, all {total} rows", "ms",
                      [p[1] for p in pairs])
        figures += [first, full]
    for figure in figures[2:]:
        figure.notes["ratio_vs_floor"] = round(figure.median / floor.median, 2)
    return figures
