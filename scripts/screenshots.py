"""Make screenshots/*.svg from the real app, deterministically: `python scripts/screenshots.py`.

Until the embedded demo exists, the data is the .sdd/ recorded from a real Bernstein
3.23.0 run (tests/fixtures/bernstein-3.23.0), copied to a fixed path so every run
draws the same pixels. The app runs headless at 120x40 with no engine.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from console.tui.app import ConsoleApp  # noqa: E402
from console.tui.widgets.task_table import TaskTable  # noqa: E402

SIZE = (120, 40)
FIXTURE = REPO / "tests" / "fixtures" / "bernstein-3.23.0"


async def _shoot(app: ConsoleApp, out: Path, name: str, ready,
                 keys: tuple[str, ...] = (), then=None) -> None:
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(200):
            if ready(app):
                break
            await pilot.pause(0.05)
        for key in keys:
            await pilot.press(key)
        for _ in range(200):
            if then is None or then(app):
                break
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        app.save_screenshot(filename=f"{name}.svg", path=str(out))
    print(f"wrote {out / (name + '.svg')}")


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.gettempdir()) / "bernstein-tui-screenshots"
    shutil.rmtree(base, ignore_errors=True)
    project = base / "bernstein-project"
    shutil.copytree(FIXTURE, project)
    empty = base / "new-project"
    empty.mkdir()

    def has_rows(app: ConsoleApp) -> bool:
        return app.query_one(TaskTable).row_count > 0

    await _shoot(ConsoleApp(project), out, "main", has_rows)
    def proposals_shown(app: ConsoleApp) -> bool:
        screen = app.screen
        return (type(screen).__name__ == "ProposalsScreen"
                and screen.query_one("#proposals-table").row_count > 0
                and bool(str(screen.query_one("#proposal-body").content)))

    await _shoot(ConsoleApp(project), out, "proposals", has_rows, keys=("P",),
                 then=proposals_shown)
    await _shoot(ConsoleApp(empty), out, "no-sdd",
                 lambda app: "No .sdd/" in str(app.query_one("#empty").render()))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "screenshots"))
