"""Snapshot tests: each screen at 120x40 on a recorded demo run with a frozen clock
(tests/fixtures/demo-frozen, made by scripts/freeze_demo.py). Update after a
deliberate UI change with `pytest tests/test_snapshots.py --snapshot-update`,
look at the SVGs, and run `python scripts/screenshots.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.frozen_demo import SHOTS, SIZE, frozen_app, settle


@pytest.mark.parametrize("name", list(SHOTS))
def test_screen(name: str, snap_compare, tmp_path: Path) -> None:
    keys, screen = SHOTS[name]

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await settle(pilot, keys, screen)

    assert snap_compare(frozen_app(tmp_path), terminal_size=SIZE, run_before=run_before)
