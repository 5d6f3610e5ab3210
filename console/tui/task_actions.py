"""The selected task's operator actions (DESIGN §5): retry, escalate (confirmed),
cancel (confirmed). A mixin of the main screen: it names the task and asks; the app
carries the request out (an `OperatorRequest` message, run in an "actions" worker)
and shows its real outcome. `--read-only` refuses them before anything is asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.action_rules import cancel_refusal, escalate_refusal, retry_refusal
from console.control import Outcome
from console.model import Ladders, Task
from console.tui.messages import OperatorRequest

if TYPE_CHECKING:
    from textual.screen import Screen

    from console.sdd.source_protocol import Source

    _Screen = Screen[None]
else:
    _Screen = object


class TaskActions(_Screen):
    read_only: bool
    selected: str | None
    source: Source
    #: the project's model ladders (each task's: its adapter's), for escalate's check
    ladders: Ladders = Ladders()

    def _refused(self, action: str, target: str,
                 rule: Callable[[Task], str | None]) -> bool:
        """Say at once why `action` cannot be done to the task (#19.7): no question is
        asked whose yes would only be refused. A task not in the State is left to the
        control to refuse."""
        with self.source.lock:
            task = self.source.state.tasks.get(target)
        refusal = rule(task) if task is not None else None
        if refusal is not None:
            self.notify(f"{action} refused: {refusal}", severity="warning")
        return refusal is not None

    def _target(self, action: str, task_id: str | None = None) -> str | None:
        if self.read_only:
            self.notify(f"{action} refused: the console is read-only", severity="warning")
            return None
        task_id = task_id or self.selected
        if task_id is None:
            self.notify(f"{action}: select a task first", severity="warning")
        return task_id

    def _request(self, name: str, call: Callable[[Any], Outcome]) -> None:
        self.post_message(OperatorRequest(name, call))

    def _confirmed(self, name: str, question: str, effect: str,
                   call: Callable[[Any], Outcome]) -> None:
        """Ask first (a modal naming the task and the effect); act only on yes."""
        from console.tui.screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self._request(name, call)

        self.app.push_screen(ConfirmScreen(question, effect), answered)

    def action_retry(self, task_id: str | None = None) -> None:
        target = self._target("retry", task_id)
        if target is not None and not self._refused("retry", target, retry_refusal):
            self._request("retry", lambda control: control.retry(target))

    def action_escalate(self, task_id: str | None = None) -> None:
        target = self._target("escalate", task_id)
        if target is not None and not self._refused(
                "escalate", target, lambda task: escalate_refusal(task, self.ladders.of(task))):
            self._confirmed("escalate", f"Escalate task {target}?",
                            "Its next attempt runs on the next, more expensive model tier; "
                            "a failed task is reopened for it.",
                            lambda control: control.escalate(target))

    def action_cancel_task(self, task_id: str | None = None) -> None:
        target = self._target("cancel", task_id)
        if target is not None and not self._refused("cancel", target, cancel_refusal):
            self._confirmed("cancel", f"Cancel task {target}?",
                            "It and its subtasks are cancelled (terminal: it cannot be "
                            "retried) and a running agent is killed.",
                            lambda control: control.cancel(target, "cancelled from the console"))
