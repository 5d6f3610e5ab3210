"""Where an approval is while it runs: `.sdd/runtime/approvals/<proposal>.json`.

Applying a proposal takes seconds to minutes (a sandbox worktree, the tests, the eval
suite, the benchmark, the merge), in whichever process carries it out: this console's
engine, another one through its inbox, or the CLI. Each step is written here as it
starts and the file is removed when the approval ends, so any console can show the step
(#19.7). Our own file, not Bernstein's; read bounded, like every file of a project.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from console.sdd.confine import SddDir, UnsafeId, UnsafePath, safe_id, sdd_path
from console.sdd.fileio import atomic_write_json, read_json_object

#: the steps in order, and what the console says while each runs
STEPS = {"sandbox": "preparing the sandbox worktree", "tests": "running the tests",
         "evals": "running the eval suite", "benchmark": "running the benchmark",
         "merge": "merging into the base branch"}


def progress_file(root: Path, proposal_id: str) -> Path:
    return sdd_path(root, "runtime", "approvals",
                    f"{safe_id(proposal_id, 'proposal id')}.json", what="approval progress")


def announce(root: Path, proposal_id: str, step: str) -> None:
    """Step `step` starts now (best effort: an approval never fails for its display)."""
    with contextlib.suppress(OSError, ValueError):
        path = progress_file(root, proposal_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {"proposal_id": proposal_id, "step": step,
                                 "started_at": time.time()})


def finished(root: Path, proposal_id: str) -> None:
    with contextlib.suppress(OSError, ValueError), SddDir(root, "runtime", "approvals") as at:
        at.unlink(progress_file(root, proposal_id).name)  # (through no link swapped in)


def current_step(root: Path, proposal_id: str) -> dict[str, Any] | None:
    """{step, started_at} of a running approval; None when none runs (or unreadable)."""
    try:
        path = progress_file(root, proposal_id)
    except (UnsafeId, UnsafePath):
        return None
    record, _problem = read_json_object(path, f".sdd/runtime/approvals/{proposal_id}.json")
    if record is None or record.get("step") not in STEPS:
        return None
    return record
