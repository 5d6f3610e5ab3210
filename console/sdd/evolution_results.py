"""`.sdd/evolution/results.tsv`: the evolution gate's score per merged proposal
(timestamp, proposal_id, commit, score), as auto-harness keeps it. Read with a size
cap, appended through no link (the one owner of this file)."""

from __future__ import annotations

import os
import time

from console.sdd.confine import check_write_path
from console.sdd.fileio import read_regular_file
from console.sdd.paths import SddPaths

HEADER = "timestamp\tproposal_id\tcommit\tscore\n"
MAX_RESULTS_BYTES = 16 * 1024 * 1024


def best_score(paths: SddPaths) -> float | None:
    """The best score merged so far, or None (no file, or no row with a score)."""
    path = paths.sdd / "evolution" / "results.tsv"
    data, _problem = read_regular_file(path, paths.display(path), MAX_RESULTS_BYTES)
    scores = []
    for row in (data or b"").decode("utf-8", "replace").splitlines()[1:]:
        cells = row.split("\t")
        try:
            scores.append(float(cells[3]))
        except (IndexError, ValueError):
            continue
    return max(scores) if scores else None


def append_result(paths: SddPaths, proposal_id: str, commit: str, score: float | None) -> None:
    path = paths.sdd / "evolution" / "results.tsv"
    check_write_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        header = HEADER if os.fstat(fd).st_size == 0 else ""
        handle.write(f"{header}{time.time():.3f}\t{proposal_id}\t{commit}\t"
                     f"{'' if score is None else score}\n")
