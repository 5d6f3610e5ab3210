"""Bernstein's own console, `bernstein live --no-splash`, time to first task rows.

Needs a Bernstein install (Python ≥ 3.12, `pip install bernstein`); looked for at
$BERNSTEIN_BIN or /tmp/bern-venv/bin/bernstein. Without one the figure is skipped
with a note.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.common import Figure

CANDIDATES = (os.environ.get("BERNSTEIN_BIN", ""), "/tmp/bern-venv/bin/bernstein")


def find() -> Path | None:
    for candidate in CANDIDATES:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def run(quick: bool) -> list[Figure]:
    binary = find()
    name = "bernstein live --no-splash: first task rows"
    if binary is None:
        return [Figure(name, "ms", [float("nan")],
                       notes={"skipped": "no Bernstein install (set BERNSTEIN_BIN)"})]
    return [Figure(name, "ms", [float("nan")], notes={
        "skipped": "not automated: `bernstein live` reads tasks from a running "
                   "`bernstein serve` over HTTP (not from .sdd/ files), so the same data "
                   "must be loaded into a server first; see the README"})]
