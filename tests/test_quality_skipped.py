"""Skipped or bypassed gate runs are not passes on the Quality screen (#20.8): the pass
rate is over the runs that judged something, and the recent-runs strip shows – for them."""

from __future__ import annotations

from pathlib import Path

from console.tui.app import ConsoleApp
from console.tui.screens.quality import QualityScreen
from tests.conftest import append, task_record
from tests.test_tui import plain, wait_for


async def test_skipped_runs_are_neither_passes_nor_failures(project: Path) -> None:
    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl", task_record("d1", "done", title="Shipped"))
    append(sdd / "metrics" / "quality_gates.jsonl", *(
        {"task_id": "d1", "gate": "tests", "status": status, "result": result,
         "duration_ms": 10}
        for status, result in (("fail", "blocked"), ("skipped", "pass"), ("pass", "pass"),
                               ("skipped", "pass"), ("bypassed", "pass"))))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, QualityScreen))
        await wait_for(pilot, lambda: "tests" in plain(app.screen.query_one("#quality")))
        row = next(line for line in plain(app.screen.query_one("#quality")).splitlines()
                   if line.strip().startswith("tests"))
    assert row.split()[:4] == ["tests", "5", "50%", "✗–✓––"]  # was 80%, ✗✓✓✓✓
