"""`RemoteControl`: operator actions mapped onto what a Bernstein task server offers.

- retry: `POST /tasks/batch-ops {"action": "retry", "ids": [id]}` (there is no
  `/tasks/{id}/retry`);
- escalate: `PATCH /tasks/{id} {"model", "escalation_ladder_step"}`, then a
  failed task is retried;
- cancel: `POST /tasks/{id}/cancel {"reason"}`;
- approve / reject: `POST /approvals/{task_id}/approve|reject {"reason"}` for task
  reviews; evolution proposals have no route, so those are refused;
- pause / resume: `POST /drain` / `POST /drain/cancel` (claims stop, start again);
  the console's z reads `GET /drain` and does whichever is not the case;
- evolve: refused, no route.

Every refusal is an `Outcome` whose message says what the server meant; after
a 409 the task is read again, so the console shows what changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.control import Outcome
from console.model import DEFAULT_LADDER, next_model, tier_of
from console.remote.client import ServerClient, ServerError


class RemoteControl:
    """Actions on a Bernstein task server."""

    def __init__(self, client: ServerClient, *, ladder: tuple[str, ...] = DEFAULT_LADDER,
                 refresh: Callable[[str], object] | None = None,
                 on_drain: Callable[[bool], object] | None = None) -> None:
        self.client = client
        self.ladder = ladder
        #: called with the server's drain state after a drain or resume (the header)
        self.on_drain = on_drain
        #: called with a task id after a 409, so the view shows the task as it is now
        self.refresh = refresh

    def _refused(self, exc: ServerError, task_id: str | None = None) -> Outcome:
        message = str(exc)
        if exc.status == 409 and task_id is not None and self.refresh is not None:
            try:
                self.refresh(task_id)
                message += " — refreshed"
            except ServerError as again:
                message += f" — refreshing it failed too: {again}"
        return Outcome.refused(message)

    # -- tasks -----------------------------------------------------------------

    def retry(self, task_id: str) -> Outcome:
        """The server decides what may be retried (a failed task) and says why not."""
        try:
            succeeded, failed = self.client.batch_ops("retry", [task_id])
        except ServerError as exc:
            return self._refused(exc, task_id)
        if task_id in succeeded:
            return Outcome.done(f"task {task_id} reopened on {self.client.url}")
        reason = failed.get(task_id, "the server gave no reason")
        return Outcome.refused(f"task {task_id}: the server did not retry it: {reason}")

    def escalate(self, task_id: str, model: str | None = None) -> Outcome:
        try:
            task = self.client.task(task_id)
        except ServerError as exc:
            return self._refused(exc, task_id)
        status = str(task.get("status"))
        if status in ("done", "closed", "cancelled", "abandoned", "refused"):
            return Outcome.refused(f"task {task_id} is {status}; only a task that will run "
                                   "again can be escalated")
        current = task.get("model") if isinstance(task.get("model"), str) else None
        raw = task.get("metadata")
        metadata: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if model:
            step = tier_of(model, self.ladder)
            target = model
        else:
            found = next_model(current, self.ladder)
            if found is None:
                return Outcome.refused(f"task {task_id} already runs on the top tier "
                                       f"({current})")
            target, step = found
        changes: dict[str, Any] = {"model": target}
        if step is not None:
            changes["escalation_ladder_step"] = step
        try:
            try:
                self.client.patch_task(task_id, changes)
            except ServerError as exc:
                if exc.status != 422 or "escalation_ladder_step" not in changes:
                    raise
                del changes["escalation_ladder_step"]  # an older server: the model alone
                self.client.patch_task(task_id, changes)
            reopened = False
            if status == "failed":
                succeeded, failed = self.client.batch_ops("retry", [task_id])
                if task_id not in succeeded:
                    return Outcome.refused(
                        f"task {task_id}: model set to {target}, but the server did not "
                        f"reopen it: {failed.get(task_id, 'no reason given')}")
                reopened = True
        except ServerError as exc:
            return self._refused(exc, task_id)
        was = current or metadata.get("last_model") or "the server's default"
        if reopened:
            return Outcome.done(f"task {task_id} reopened on {target} (was {was})")
        return Outcome.done(f"task {task_id}: the next attempt runs on {target} (was {was})")

    def cancel(self, task_id: str, reason: str) -> Outcome:
        try:
            task = self.client.cancel_task(task_id, reason)
        except ServerError as exc:
            return self._refused(exc, task_id)
        return Outcome.done(f"task {task_id} {task.get('status', 'cancelled')} on "
                            f"{self.client.url}")

    # -- approvals -------------------------------------------------------------

    def _resolve(self, item_id: str, approve: bool, reason: str) -> Outcome:
        try:
            pending = {str(a.get("task_id")) for a in self.client.approvals()
                       if isinstance(a, dict)}
            if item_id not in pending:
                return Outcome.refused(
                    f"{item_id}: no pending task approval on {self.client.url}; evolution "
                    "proposals have no REST route on a Bernstein server, so decide them "
                    f"on its host: bernstein evolve {'approve' if approve else 'reject'} "
                    f"{item_id}")
            answer = self.client.resolve_approval(item_id, approve, reason)
        except ServerError as exc:
            return self._refused(exc)
        return Outcome.done(f"task {item_id}: {answer.get('status', 'decided')} "
                            f"on {self.client.url}")

    def approve(self, proposal_id: str, reason: str = "") -> Outcome:
        return self._resolve(proposal_id, True, reason)

    def reject(self, proposal_id: str, reason: str) -> Outcome:
        return self._resolve(proposal_id, False, reason)

    # -- the server ------------------------------------------------------------

    def release_gate(self, mission_id: str, gate_name: str, reason: str) -> Outcome:
        return Outcome.refused("release-gate: a Bernstein task server keeps no phase gates "
                               "(missions are the console's engine's); release them on the "
                               "project the engine runs")

    def evolve(self) -> Outcome:
        return Outcome.refused("evolve: a Bernstein task server has no route for it; run "
                               "`bernstein evolve run` on the server's host")

    def _drain(self, draining: bool) -> Outcome:
        try:
            self.client.request("POST", "/drain" if draining else "/drain/cancel")
        except ServerError as exc:
            return self._refused(exc)
        if self.on_drain is not None:
            self.on_drain(draining)
        if draining:
            return Outcome.done(f"{self.client.url} drains: no new claims until resume "
                                "(running tasks finish)")
        return Outcome.done(f"{self.client.url} accepts claims again")

    def pause(self) -> Outcome:
        return self._drain(True)

    def resume(self) -> Outcome:
        return self._drain(False)

    def toggle_drain(self) -> Outcome:
        """Drain a server that is not draining, resume one that is (`GET /drain` says)."""
        try:
            draining = self.client.drain().get("draining") is True
        except ServerError as exc:
            return self._refused(exc)
        return self._drain(not draining)
