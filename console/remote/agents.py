"""A task server's running agents in the State's shape (sdd/agent_live.AgentLive), for a
console attached with `--server` and `status --json --server`.

Bernstein 3.23's `GET /status` has `agents.items[{id, role, status, model, provider,
task_ids, runtime_s, tokens_used, context_utilization_pct, cost_usd}]` (bernstein-
formats.md §5): one total of tokens (no input/output/cached split: `tokens_total`,
the split None), its cost tracker's figure per agent (not a CLI's own: an estimate),
and no pid (a server's agents run on its machine). What the agent does now is the
task's latest progress message (`progress_log`, which `POST /tasks/{id}/progress`
fills), when the task record has one. Everything is the server's data: bounded here,
sanitised where shown.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from console.model import Task
from console.remote.client import ServerClient, ServerError
from console.sdd.agent_live import MAX_HEARTBEATS, AgentLive
from console.sdd.delta import Delta
from console.sdd.state import State


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _last_progress(task: Task | None) -> str:
    log = task.extra.get("progress_log") if task is not None else None
    if not isinstance(log, list | tuple) or not log or not isinstance(log[-1], dict):
        return ""
    message = log[-1].get("message")
    return " ".join(message.split())[:200] if isinstance(message, str) else ""


def agents_from_status(body: dict[str, Any], tasks: dict[str, Task],
                       now: float | None = None) -> list[AgentLive]:
    """The live (not `dead`) agents of a `/status` answer, oldest start first."""
    now = time.time() if now is None else now
    block = body.get("agents")
    items = block.get("items") if isinstance(block, dict) else None
    agents: list[AgentLive] = []
    for item in items[:MAX_HEARTBEATS] if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("status") == "dead":
            continue
        ids = [t for t in item.get("task_ids") or [] if isinstance(t, str) and t] \
            if isinstance(item.get("task_ids"), list) else []
        session = item.get("id")
        if not ids or not isinstance(session, str) or not session:
            continue
        runtime = _number(item.get("runtime_s")) or 0.0
        agents.append(AgentLive(
            session=session[:120], task_id=ids[0][:200],
            cli=str(item.get("provider") or "")[:40], model=str(item.get("model") or "")[:80],
            started=now - runtime, updated=now, tokens_total=_count(item.get("tokens_used")),
            cost_usd=_number(item.get("cost_usd")), cost_estimated=True,
            last=_last_progress(tasks.get(ids[0]))))
    agents.sort(key=lambda a: (a.started, a.session))
    return agents


def sync_agents(client: ServerClient, state: State, lock: threading.RLock) -> Delta:
    """`GET /status`'s agents into the State (ServerError for the caller to word). A
    server with no `/status` (404: one older than Bernstein 3.x) reports no agents: that
    is not a problem to show, as a task with no gate report is not."""
    try:
        body: dict[str, Any] = client.status()
    except ServerError as exc:
        if exc.status != 404:
            raise
        body = {}
    with lock:
        agents = agents_from_status(body, state.tasks)
        delta = state.set_file_error(client.where("/status"), None)
        return delta.merge(state.apply_agents(agents, []))
