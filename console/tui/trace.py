"""Timing marks for `benchmarks/`: when rows reached the screen.

Off unless `BERNSTEIN_TUI_TRACE` names a file. Each mark is one JSON line
`{"t": <epoch seconds>, "event": ..., "ids": [...], "rows": <row count>}`,
written after the repaint that shows the change (so a benchmark measures file
write → pixels, not file write → memory). Task ids are capped per line so a
first load of 10,000 rows stays one small line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from typing import TextIO

MAX_IDS_PER_MARK = 2_000


class Trace:
    def __init__(self, path: str | None) -> None:
        self._file: TextIO | None = None
        if path:
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the app

    @classmethod
    def from_env(cls) -> Trace:
        return cls(os.environ.get("BERNSTEIN_TUI_TRACE"))

    @property
    def on(self) -> bool:
        return self._file is not None

    def mark(self, event: str, ids: Iterable[str] = (), rows: int = 0) -> None:
        if self._file is None:
            return
        listed = list(ids)[:MAX_IDS_PER_MARK]
        self._file.write(json.dumps({"t": time.time(), "event": event, "ids": listed,
                                     "rows": rows}) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
