"""A recorded demo run as fixed data (made by scripts/freeze_demo.py), opened with a
frozen clock: what the snapshot tests and scripts/screenshots.py draw."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App
    from textual.pilot import Pilot

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "demo-frozen"
FROZEN_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the run's first task
LABEL = "inventory (the demo, recorded)"
SIZE = (120, 40)


def frozen_now() -> float:
    """A few seconds after the last thing the run wrote."""
    latest = FROZEN_START
    for path in (FIXTURE / ".sdd").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for key in ("timestamp", "completed_at", "closed_at", "deferred_at", "decided_at"):
                value = record.get(key)
                if isinstance(value, int | float):
                    latest = max(latest, float(value))
    return latest + 5.0


def frozen_project(where: Path) -> Path:
    """A copy of the recorded project (the console never writes, but tests stay apart)."""
    project = where / "inventory"
    shutil.copytree(FIXTURE, project)
    return project


def frozen_app(where: Path, **kwargs):  # type: ignore[no-untyped-def]
    from console.tui.app import ConsoleApp

    now = frozen_now()
    return ConsoleApp(frozen_project(where), clock=lambda: now, label=LABEL, **kwargs)


#: the screens drawn from the recording: name → (keys pressed, screen class name)
SHOTS: dict[str, tuple[tuple[str, ...], str]] = {
    "main": (("down",) * 4, "MainScreen"),  # DEMO-05, blocked: its Summary tab says why
    "main-chain": (("down", "tab", "right", "right"), "MainScreen"),  # DEMO-02, its Chain tab
    "main-reflections": (("down", "tab", "right", "right", "right"), "MainScreen"),
    "proposals": (("P",), "ProposalsScreen"),
    "chains": (("C",), "ChainsScreen"),
    "quality": (("M",), "QualityScreen"),
    "help": (("question_mark",), "HelpScreen"),
}


def footer_up(app: App[int]) -> bool:
    """The footer is mounted (after the first paint) and has its keys."""
    from textual.widgets import Footer

    footer = app.screen.query(Footer)
    return bool(footer) and bool(footer.first().children)


def no_blink(app: App[int]) -> None:
    """Inputs on the screen stop blinking their cursor (a snapshot is one instant)."""
    from textual.widgets import Input

    for box in app.screen.query(Input):
        box.cursor_blink = False


async def settle(pilot: Pilot[int], keys: tuple[str, ...], screen: str) -> None:
    """Wait for the whole recording to load, press the keys, wait for the screen."""
    from console.tui.app import ConsoleApp
    from console.tui.widgets.task_detail import TaskDetail
    from console.tui.widgets.task_table import TaskTable

    app = pilot.app
    assert isinstance(app, ConsoleApp)
    expected = {json.loads(line)["id"] for line in
                (FIXTURE / ".sdd" / "runtime" / "tasks.jsonl").read_text().splitlines()}
    for _ in range(400):
        if app.loaded and len(app.main.query_one(TaskTable).rows) == len(expected) \
                and app.main.query_one(TaskDetail).active and footer_up(app):
            break
        await pilot.pause(0.05)
    await pilot.pause(0.2)  # the first row's detail
    for key in keys:
        await pilot.press(key)
    for _ in range(400):
        if type(app.screen).__name__ == screen:
            break
        await pilot.pause(0.05)
    await pilot.pause(0.5)
    await pilot.wait_for_scheduled_animations()
