"""#19.4 / #22.3: loading shown as loading. While the first full read runs the header
says how far it is (bytes read of the total) and marks the cost and counts as figures
so far; once it is done, the final figures, unmarked."""

from __future__ import annotations

import json
from pathlib import Path

from console.sdd.source import LocalSource
from console.tui.app import ConsoleApp
from tests.conftest import append, task_record
from tests.test_tui import wait_for

GATE_LINE = {"timestamp": 1767225600.0, "task_id": "T0", "gate": "lint", "status": "pass",
             "required": True, "duration_ms": 12, "details": "ok"}


def _big_metrics(project: Path, lines: int) -> int:
    path = project / ".sdd" / "metrics" / "quality_gates.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(GATE_LINE) + "\n").encode()
    with open(path, "wb") as handle:
        handle.write(line * lines)
    return path.stat().st_size


def test_the_source_reports_bytes_read_of_the_total_as_it_loads(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("T0", "done"))
    size = _big_metrics(project, 200_000)
    source = LocalSource(project)
    assert source.load_progress() is None  # not started
    seen: list[tuple[int, int]] = []
    source.load(on_step=lambda _delta: seen.append(source.load_progress() or (-1, -1)))
    assert source.load_progress() is None  # done
    totals = {total for _done, total in seen if total > 0}
    assert len(totals) == 1 and totals.pop() >= size
    done = [d for d, _total in seen if d >= 0]
    assert done == sorted(done) and len(set(done)) > 2  # it grows, step by step


async def test_the_header_says_reading_then_the_final_figures(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("T0", "done"))
    app = ConsoleApp(project)
    async with app.run_test(size=(140, 30)) as pilot:
        status = app.query_one("#status")
        await wait_for(pilot, lambda: "1 tasks" in str(status.render()))
        await pilot.pause(1.0)  # the app's own reading line has said "done" by now
        app.main.show_reading((5_000_000, 10_000_000))
        await pilot.pause()
        text = str(status.render())
        assert "reading .sdd/: 5.0 of 10.0 MB (50%) — figures so far" in text
        assert "cost ~$" in text and "~1 tasks:" in text
        app.main.show_reading(None)
        await pilot.pause()
        text = str(status.render())
        assert "reading .sdd" not in text and "~" not in text


async def test_a_large_project_shows_its_read_in_progress(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           *(task_record(f"T{i}", "done") for i in range(50)))
    _big_metrics(project, 400_000)
    app = ConsoleApp(project)
    async with app.run_test(size=(140, 30)) as pilot:
        status = app.query_one("#status")
        await wait_for(pilot, lambda: "reading .sdd/" in str(status.render()), timeout=30)
        await wait_for(pilot, lambda: app.source.loaded.is_set(), timeout=120)
        await wait_for(pilot, lambda: "reading .sdd" not in str(status.render()), timeout=10)
        assert "50 tasks:" in str(status.render())


async def test_an_empty_project_says_so_on_its_first_frame(project: Path) -> None:
    """#22.4: no task log (or an empty one) means the load will find no task, so the
    first frame already says "No tasks yet" (one stat), without waiting for the
    watcher; a project with tasks says it is reading until its rows come."""
    empty = ConsoleApp(project)
    assert "No tasks yet" in empty.main.first_text
    (project / ".sdd" / "runtime").mkdir(parents=True, exist_ok=True)
    (project / ".sdd" / "runtime" / "tasks.jsonl").write_bytes(b"")
    assert "No tasks yet" in ConsoleApp(project).main.first_text
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("T0", "done"))
    busy = ConsoleApp(project)
    assert busy.main.first_text == "Reading .sdd/ …"
    async with busy.run_test() as pilot:  # the rows replace it
        await wait_for(pilot, lambda: busy.main.table.row_count == 1)
