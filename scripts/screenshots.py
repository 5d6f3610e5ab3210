"""Make screenshots/*.svg from the real app, deterministically: `python scripts/screenshots.py`.

The data is a recorded run of the demo (`bernstein-tui --demo`'s project, engine
and demo agent), frozen by scripts/freeze_demo.py into tests/fixtures/demo-frozen
with fixed timestamps; the clock is frozen after its last record. The app runs
headless at 120x40 with no engine — the same screens the snapshot tests check.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from console.tui.app import ConsoleApp  # noqa: E402
from tests.frozen_demo import SHOTS, SIZE, footer_up, frozen_app, settle  # noqa: E402


async def _shoot(app: ConsoleApp, out: Path, name: str, keys: tuple[str, ...],
                 screen: str) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, keys, screen)
        app.save_screenshot(filename=f"{name}.svg", path=str(out))
    print(f"wrote {out / (name + '.svg')}")


async def main(out: Path) -> None:
    out = out.resolve()  # the working directory changes for the last shot
    out.mkdir(parents=True, exist_ok=True)
    for name, (keys, screen) in SHOTS.items():
        with tempfile.TemporaryDirectory() as where:
            await _shoot(frozen_app(Path(where)), out, name, keys, screen)
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as where:  # a directory with no .sdd/ yet
        fresh = Path(where) / "new-project"
        fresh.mkdir()
        os.chdir(where)  # the text names the project as typed from here: new-project
        app = ConsoleApp(fresh, label="a new project")
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(200):  # the text, then the footer that follows it in
                if "No .sdd/" in str(app.query_one("#empty").render()) and footer_up(app):
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.1)
            app.save_screenshot(filename="no-sdd.svg", path=str(out))
        os.chdir(here)
        print(f"wrote {out / 'no-sdd.svg'}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "screenshots"))
