"""Operator requests to a running engine, from the console, the CLI or the control inbox.

Quick actions (retry, escalate, cancel, pause, resume, reject) are carried out at
once; approve and evolve run the sandbox's tests, so from the inbox they run in their
own thread and answer when done. Every request gets an answer, whatever happens.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.control import Outcome
from console.engine import evolution_apply, operations
from console.engine.evolution_apply import parse_evolution

if TYPE_CHECKING:
    from console.engine.engine import Engine


def evolution(engine: Engine, action: str, request: dict[str, object]) -> Outcome:
    """approve, reject or evolve, with the evolution config as it is now."""
    try:
        config = parse_evolution(engine.config.raw.get("evolution"))
    except (ValueError, TypeError) as exc:
        return Outcome.refused(f"bernstein.yaml: {exc}")
    proposal_id = str(request.get("proposal_id") or "")
    reason = str(request.get("reason") or "")
    reviewer = str(request.get("requested_by") or "") or None
    if action == "approve":
        return evolution_apply.approve(engine.paths, engine.repo, proposal_id, reason, config,
                                       reviewer)
    if action == "reject":
        return evolution_apply.reject(engine.paths, proposal_id, reason, reviewer)

    return evolution_apply.evolve_outcome(engine.paths, engine.repo, config)


def from_inbox(engine: Engine, request: dict[str, object],
               reply: Callable[[Outcome], None]) -> Outcome | None:
    """Quick actions answer now; approve and evolve (sandbox tests) run in their own
    thread so dispatch never waits on them, and answer when done."""
    if request.get("action") not in ("approve", "evolve"):
        return handle(engine, request)

    def work() -> None:
        with engine.evolution_lock:
            try:
                outcome = handle(engine, request)
            except Exception as exc:  # answered, whatever happens
                outcome = Outcome.refused(f"{request.get('action')} failed: "
                                          f"{type(exc).__name__}: {exc}")
            reply(outcome)

    threading.Thread(target=work, name="engine-evolution", daemon=True).start()
    return None


def handle(engine: Engine, request: dict[str, object]) -> Outcome:
    """One operator action, from the console, the CLI or the control inbox."""
    action = str(request.get("action"))
    task_id = str(request.get("task_id") or "")
    if action == "retry":
        outcome = operations.retry(engine.store, task_id)
    elif action == "escalate":
        model = request.get("model")
        outcome = operations.escalate(engine.store, task_id, str(model) if model else None,
                                      engine.runner.chains.config.ladders)
    elif action == "cancel":
        reason = str(request.get("reason") or "cancelled by the operator")
        outcome = operations.cancel(engine.store, task_id, reason, engine.stop_agent)
    elif action in ("approve", "reject", "evolve"):
        outcome = evolution(engine, action, request)
    elif action == "pause":
        engine.paused = True
        outcome = Outcome.done("engine paused: running attempts finish, no new ones start")
    elif action == "resume":
        engine.paused = False
        outcome = Outcome.done("engine resumed")
    elif action == "release_gate":
        outcome = engine.missions.release(
            str(request.get("mission_id") or ""), str(request.get("gate_name") or ""),
            str(request.get("reason") or ""), str(request.get("requested_by") or "operator"))
    else:
        outcome = Outcome.refused(f"unknown action '{action}'")
    engine.events.emit("info" if outcome.ok else "warning", outcome.message,
                     task_id=task_id or None)
    engine.wake.set()
    return outcome
