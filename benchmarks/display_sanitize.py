"""What the one sanitiser (console/sdd/sanitize.py) costs where it runs most.

- one call of `display_text` on a clean short cell (the common case: an id, a role),
  on a hostile one, and on a 10,000-character title cut to a cell;
- the rows of 10,000 tasks built for the table (`row_of`, which sanitises each
  row's title, role and model once), against the same rows with the sanitiser
  replaced by the identity — the sanitiser's share of the first load;
- `sgr_only` on a full agent-log tail (64 KB of coloured output with escapes).

`python -m benchmarks.display_sanitize` prints the figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from unittest import mock

from benchmarks.common import Figure
from console.sdd import sanitize
from console.sdd.fileio import LOG_TAIL_BYTES
from console.sdd.state import State
from console.sdd.task_codec import decode_task

HOSTILE = "\x1b]52;c;ZWNobw==\x07[/]\u202eevil\x1b[2J"


def _per_call_us(call: Callable[[], object], n: int) -> list[float]:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            call()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return samples


def _rows_ms(state: State, ids: list[str]) -> list[float]:
    from console.tui import task_rows

    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for task_id in ids:
            task_rows.row_of(state, task_id)
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def run(quick: bool) -> list[Figure]:
    n = 20_000 if quick else 100_000
    title = "T" * 10_000
    figures = [
        Figure("display_text, clean cell", "µs", _per_call_us(
            lambda: sanitize.display_text("T-0001 backend opus"), n)),
        Figure("display_text, hostile cell", "µs", _per_call_us(
            lambda: sanitize.display_text(HOSTILE), n)),
        Figure("display_text, 10k title to a cell", "µs", _per_call_us(
            lambda: sanitize.display_text(title, limit=sanitize.CELL_LIMIT), n // 10)),
    ]
    state = State()
    ids = [f"t{i:05d}" for i in range(10_000)]
    for task_id in ids:
        state.tasks[task_id] = decode_task({"id": task_id, "title": f"Task {task_id} title",
                                            "status": "open", "role": "backend"})
    with_sanitiser = _rows_ms(state, ids)
    with mock.patch("console.tui.task_rows.display_text", lambda value, **_: value):
        without = _rows_ms(state, ids)
    figures.append(Figure("10,000 table rows, sanitised", "ms", with_sanitiser,
                          notes={"identity instead": f"{min(without):.1f} ms"}))
    log = ("\x1b[32mok\x1b[0m line of agent output \x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\"
           "\n") * (LOG_TAIL_BYTES // 60)
    figures.append(Figure("sgr_only, 64 KB log tail", "ms",
                          [x / 1e3 for x in _per_call_us(lambda: sanitize.sgr_only(log), 20)]))
    return figures


if __name__ == "__main__":
    for figure in run(quick=False):
        notes = ", ".join(f"{k}={v}" for k, v in figure.notes.items())
        print(f"{figure.name:<36} median {figure.median:8.3f} {figure.unit}  "
              f"p99 {figure.p99:8.3f} {figure.unit}  {notes}")
