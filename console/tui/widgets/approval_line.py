"""One line under the proposals table while an approval runs (#19.7): which step it is
on (sandbox, tests, evals, benchmark, merge) and for how long, read each second by a
thread worker from `.sdd/runtime/approvals/<id>.json` (sdd/approval_progress.py), so it
shows the step whichever process carries the approval out. Hidden once it is over."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.timer import Timer
from textual.widgets import Static

from console.sdd.approval_progress import STEPS, current_step

POLL_S = 1.0


class ApprovalLine(Static):
    DEFAULT_CSS = """
    ApprovalLine {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-accent;
        display: none;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, **kwargs)
        self.proposal_id: str | None = None
        self._root: Path | None = None
        self._since = 0.0
        self._seen = False
        self._timer: Timer | None = None

    def start(self, root: Path | None, proposal_id: str) -> None:
        """An approval of `proposal_id` was asked for (root None: a task server's, whose
        steps are not visible from here)."""
        self.proposal_id, self._root = proposal_id, root
        self._since, self._seen = time.monotonic(), False
        self.display = True
        self._show(None)
        if self._timer is None:
            self._timer = self.set_interval(POLL_S, self._poll)

    def _poll(self) -> None:
        root, pid = self._root, self.proposal_id
        if pid is None:
            return
        self.run_worker(lambda: self.app.call_from_thread(
            self._show, current_step(root, pid) if root is not None else None),
            thread=True, group="approval-line", exclusive=True, exit_on_error=False)

    def _actions_busy(self) -> bool:
        return any(w.group == "actions" and w.is_running for w in self.app.workers)

    def _show(self, step: dict[str, object] | None) -> None:
        if self.proposal_id is None:
            return
        self._seen = self._seen or step is not None
        waited = time.monotonic() - self._since
        if step is None and not self._actions_busy() and waited > POLL_S:
            self.display = False  # over: its outcome is in the notification
            self.proposal_id = None
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
            return
        what = STEPS.get(str(step.get("step")), "") if step else (
            "finishing" if self._seen else "starting")
        self.update(f"⟳ approving {self.proposal_id}: {what}… ({waited:.0f} s)")
