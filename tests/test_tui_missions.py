"""#20.5 on screen: the Missions screen lists each gate with its decision, a halted
mission says by which gate, and `a` releases the selected gate (asked why, recorded)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from textual.widgets import DataTable

from console.tui.app import ConsoleApp
from console.tui.screens.missions import MissionsScreen
from console.tui.screens.proposals import ReasonScreen
from tests.conftest import append, task_record
from tests.test_tui import Notes, wait_for

MISSIONS = """
missions:
  - name: feature-x
    tasks: [A, B, C]
    qualityGates:
      - {name: code-review, afterTasks: [A, B], blocksTasks: [C], requireAllPassed: true}
      - {name: ship-check, afterTasks: [C], blocksTasks: []}
"""


async def test_the_missions_screen_shows_a_halt_and_releases_the_gate(project: Path) -> None:
    with open(project / "bernstein.yaml", "a") as handle:
        handle.write(MISSIONS)
    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl", task_record("A", "done"),
           task_record("B", "failed"),
           task_record("C", "blocked", metadata={"held_by": "code-review"},
                       result_summary="blocked: mission feature-x halted"))
    append(sdd / "metrics" / "phase_gates.jsonl", {
        "timestamp": time.time(), "event": "quality:gate:failed", "mission_id": "feature-x",
        "gate_name": "code-review", "reason": "after-task(s) did not pass: B failed"})
    app = ConsoleApp(project)
    notes = Notes()
    async with app.run_test(size=(120, 30), message_hook=notes) as pilot:
        await wait_for(pilot, lambda: app.main.table.row_count == 3)
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, MissionsScreen))
        screen = app.screen
        table = screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 2)
        line = str(screen.query_one("#missions-line").render())
        assert "feature-x: halted by code-review, 1/3 done" in line
        cells = [str(c) for c in table.get_row_at(0)]
        assert cells[1] == "code-review" and "failed" in cells[2] and "B failed" in cells[5]
        assert "waiting" in str(table.get_row_at(1)[2])
        await pilot.press("down", "a")  # ship-check: not decided — can be released too
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonScreen))
        await pilot.press("escape")
        await pilot.press("up", "a")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonScreen))
        await pilot.press(*"B is flaky, shipping anyway", "enter")
        await wait_for(pilot, lambda: notes.said("released by operator"), timeout=20)
        await wait_for(pilot, lambda: "released" in str(table.get_row_at(0)[2]), timeout=20)
        await pilot.press("a")  # released already: refused at once, no question
        await wait_for(pilot, lambda: notes.said("is already released"))
        assert isinstance(app.screen, MissionsScreen)
    records = [json.loads(line) for line in
               (sdd / "metrics" / "phase_gates.jsonl").read_text().splitlines()]
    assert records[-1]["event"] == "quality:gate:released"
    assert records[-1]["reason"] == "B is flaky, shipping anyway"
    held = [json.loads(line) for line in (sdd / "runtime" / "tasks.jsonl").read_text()
            .splitlines() if json.loads(line)["id"] == "C"][-1]
    assert held["metadata"].get("held_by") is None  # the task log let C go
