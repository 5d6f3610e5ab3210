"""The deterministic router of seed 001: (model, effort) from role, scope and complexity.

No LLM involved. An explicit model/effort on the task (from its ticket, or set by
an operator's escalate) wins; the reason for every choice is returned with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.engine.roles import Role
from console.model import Task


@dataclass(frozen=True, slots=True)
class Route:
    model: str
    effort: str
    reason: str


def route(task: Task, role: Role) -> Route:
    if task.model and task.effort:
        return Route(task.model, task.effort, "model and effort pinned on the task")
    if task.role in ("manager", "security"):
        chosen = Route("opus", "max", f"role={task.role}: needs deep, exhaustive reasoning")
    elif task.scope == "large" and task.complexity == "high":
        chosen = Route("opus", "high", "scope=large, complexity=high: complex architecture")
    elif task.complexity == "low":
        chosen = Route(role.model if role.source != "built-in" else "sonnet", "normal",
                       "complexity=low: quick fix")
    else:
        chosen = Route(role.model if role.source != "built-in" else "sonnet", "high",
                       f"complexity={task.complexity}: standard implementation")
    if task.model:
        return Route(task.model, chosen.effort, f"model pinned on the task; {chosen.reason}")
    if task.effort:
        return Route(chosen.model, task.effort, f"effort pinned on the task; {chosen.reason}")
    return chosen
