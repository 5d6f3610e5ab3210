"""#20.6 on screen: the review queue lists what a check flagged for a human (newest
first, following the file live), Enter goes to the task; status --json has it too."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from textual.widgets import DataTable

from console.tui.app import ConsoleApp
from console.tui.screens.review_queue import ReviewQueueScreen
from tests.conftest import append, task_record
from tests.test_tui import wait_for


def _flag(task_id: str, when: float, detail: str) -> dict:
    return {"timestamp": when, "task_id": task_id, "attempt": 1, "source": "llm_judge",
            "signal": "is the change complete?", "detail": detail}


async def test_the_review_queue_lists_flags_and_goes_to_the_task(project: Path) -> None:
    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl", task_record("A", "done"), task_record("B", "done"),
           task_record("C", "done"))
    now = time.time()
    queue = sdd / "metrics" / "review_queue.jsonl"
    append(queue, _flag("A", now - 60, "accepted with confidence 0.55 (below 0.7): "
                                       "review by a human"))
    with open(queue, "a") as handle:  # a torn line between two good ones: said, skipped
        handle.write('{"task_id": \n')
    append(queue, _flag("B", now - 30, "accepted with confidence 0.6 (below 0.7)"))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.main.table.row_count == 3)
        await pilot.press("V")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewQueueScreen))
        screen = app.screen
        table = screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 2)
        assert [str(table.get_row_at(i)[1]) for i in range(2)] == ["B", "A"]  # newest first
        assert "confidence 0.55" in str(table.get_row_at(1)[4])
        assert "2 flags on 2 tasks" in str(screen.query_one("#review-line").render())
        append(queue, _flag("C", now, "accepted with confidence 0.5"))  # live
        await wait_for(pilot, lambda: table.row_count == 3, timeout=10)
        assert str(table.get_row_at(0)[1]) == "C"
        # the cursor stayed on B as C came in above it; g: the top (C), j: B
        await pilot.press("g", "j", "enter")
        await wait_for(pilot, lambda: app.screen is app.main)
        await wait_for(pilot, lambda: app.main.selected == "B")
    status = subprocess.run([sys.executable, "-m", "console", "-C", str(project), "status",
                             "--json"], capture_output=True, text=True, timeout=60)
    summary = json.loads(status.stdout)
    assert [f["task_id"] for f in summary["review_queue"]] == ["A", "B", "C"]
    assert summary["review_queue"][0]["source"] == "llm_judge"
    assert any(p["file"].endswith("review_queue.jsonl") and p["line"] == 2
               for p in summary["problems"])
