"""What each running agent is doing and spending, live (issue #33): the one owner of
the telemetry the engine publishes while an attempt's agent runs, and of Bernstein's
`runtime/agents.json` snapshot (bernstein-formats.md §1.4).

- In each session's heartbeat (`runtime/heartbeats/<session>.json`, task_live.py owns
  the file) a `telemetry` object: `{task_id, cli, model, pid, started, tokens: {input,
  output, cached}, cost_usd, cost_estimated, last, turns}`. Bernstein's heartbeat reader
  takes the keys it knows and ignores this one.
- `runtime/agents.json`: `{"ts", "agents": [...]}`, one entry per running agent in the
  shape of Bernstein's orchestrator snapshot (its `/status` and `bernstein stop` read
  it), the same `telemetry` object added.
- `runtime/<session>.tokens`: Bernstein's token sidecar, one `{"ts", "in", "out"}` line
  per increase (Bernstein sums the lines).

Everything read here was written by someone we do not control: each heartbeat is one
bounded read (no link followed, no FIFO opened, no file over HEARTBEAT_BYTES), a bad
one is one line in `problems`, the others still show; the strings are data for the
sanitiser.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from console.model import Problem
from console.sdd.confine import UnsafePath, safe_id, sdd_path
from console.sdd.delta import Delta
from console.sdd.fileio import append_jsonl, atomic_write_json, read_json_object
from console.sdd.task_live import STALE_AFTER_S, heartbeat_file, read_heartbeat

#: heartbeats looked at, at most (a directory of a million files is not read whole)
MAX_HEARTBEATS = 512
MAX_LAST = 200


class AgentLive(msgspec.Struct, frozen=True):
    """One running agent as `status --json` shows it."""

    session: str
    task_id: str
    cli: str = ""
    model: str = ""
    pid: int | None = None
    started: float = 0.0  # epoch seconds
    updated: float = 0.0  # the heartbeat's timestamp
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    tokens_total: int | None = None  # a server's agent: only a total (remote/agents.py)
    cost_usd: float | None = None
    cost_estimated: bool = True
    last: str = ""
    turns: int = 0
    problem: str = ""  # the first line of its output that could not be read

    def elapsed_s(self, now: float | None = None) -> float:
        return round(max(0.0, (time.time() if now is None else now) - self.started), 1) \
            if self.started else 0.0

    def tokens(self) -> dict[str, int | None]:
        """{input, output, cached, total}; a server that gives only a total: the split
        is None."""
        if self.tokens_total is not None:
            return {"input": None, "output": None, "cached": None, "total": self.tokens_total}
        return {"input": self.tokens_in, "output": self.tokens_out,
                "cached": self.tokens_cached, "total": self.tokens_in + self.tokens_out}

    def as_json(self, now: float | None = None) -> dict[str, Any]:
        """The `agents` item of `status --json`."""
        return {"task_id": self.task_id, "session": self.session, "cli": self.cli,
                "model": self.model, "pid": self.pid, "elapsed_s": self.elapsed_s(now),
                "tokens": self.tokens(),
                "cost_usd": self.cost_usd, "cost_estimated": self.cost_estimated,
                "last": self.last, "turns": self.turns, "problem": self.problem or None}


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def agent_line(item: Mapping[str, Any]) -> str:
    """One `status --json` agent as a line: task, CLI and model, elapsed, tokens, cost,
    what it does (data: the caller shows it through the sanitiser)."""
    who = " ".join(str(item.get(k) or "") for k in ("cli", "model")).strip() or "agent"
    line = f"{item.get('task_id')}: {who}, {item.get('elapsed_s', 0):.0f} s, {spending(item)}"
    return f"{line} · {item['last']}" if item.get("last") else line


def spending(item: Mapping[str, Any]) -> str:
    """`12.3k in (9.0k cached) / 600 out, $0.0421 est.` of a `status --json` agent."""
    tokens = item.get("tokens") or {}
    if tokens.get("input") is None:
        spent = f"{_k(tokens.get('total') or 0)} tokens"
    else:
        spent = f"{_k(tokens['input'])} in ({_k(tokens.get('cached') or 0)} cached) / " \
                f"{_k(tokens.get('output') or 0)} out"
    cost = item.get("cost_usd")
    money = "cost ?" if cost is None else \
        f"${cost:.4f}{' est.' if item.get('cost_estimated') else ''}"
    return f"{spent}, {money}"


def telemetry(agent: AgentLive) -> dict[str, Any]:
    """The `telemetry` object a heartbeat and an agents.json entry carry."""
    return {"task_id": agent.task_id, "cli": agent.cli, "model": agent.model,
            "pid": agent.pid, "started": agent.started,
            "tokens": {"input": agent.tokens_in, "output": agent.tokens_out,
                       "cached": agent.tokens_cached},
            "cost_usd": agent.cost_usd, "cost_estimated": agent.cost_estimated,
            "last": agent.last, "turns": agent.turns, "problem": agent.problem}


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) \
            and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def _str(value: object, limit: int = 200) -> str:
    return value[:limit] if isinstance(value, str) else ""


def decode(session: str, raw: Mapping[str, Any], updated: float = 0.0) -> AgentLive | None:
    """An AgentLive from a `telemetry` object (None when it names no task)."""
    task_id = _str(raw.get("task_id"))
    if not task_id:
        return None
    said = raw.get("tokens")
    tokens: Mapping[str, Any] = said if isinstance(said, dict) else {}
    pid = raw.get("pid")
    return AgentLive(
        session=session, task_id=task_id, cli=_str(raw.get("cli"), 40),
        model=_str(raw.get("model"), 80), pid=pid if _count(pid) else None,
        started=_number(raw.get("started")) or 0.0, updated=updated,
        tokens_in=_count(tokens.get("input")), tokens_out=_count(tokens.get("output")),
        tokens_cached=_count(tokens.get("cached")), cost_usd=_number(raw.get("cost_usd")),
        cost_estimated=raw.get("cost_estimated") is not False,
        last=" ".join(_str(raw.get("last"), MAX_LAST * 2).split())[:MAX_LAST],
        turns=_count(raw.get("turns")), problem=_str(raw.get("problem"), MAX_LAST))


def read_agents(root: Path, now: float | None = None, stale_after_s: float = STALE_AFTER_S
                ) -> tuple[list[AgentLive], list[Problem]]:
    """The agents running in a local project, from their heartbeats (oldest start first),
    and one line per heartbeat that could not be read. A heartbeat older than
    STALE_AFTER_S (an engine that died) is not a running agent."""
    now = time.time() if now is None else now
    try:
        directory = sdd_path(root, "runtime", "heartbeats", what="heartbeats directory")
        with os.scandir(directory) as entries:
            names = []
            for entry in entries:
                if entry.name.endswith(".json") and not entry.name.startswith("."):
                    names.append(entry.name[:-5])
                if len(names) >= MAX_HEARTBEATS:
                    break
    except FileNotFoundError:
        return [], []
    except (UnsafePath, OSError) as exc:
        return [], [Problem(".sdd/runtime/heartbeats", None, f"not read: {exc}")]
    agents: list[AgentLive] = []
    problems: list[Problem] = []
    for session in sorted(names):
        beat, problem = read_heartbeat(root, session)
        if problem:  # "<file>: <why>", the file as task_live names it
            where, _, why = problem.partition(": ")
            problems.append(Problem(where, None, why))
        if not beat or not isinstance(beat.get("telemetry"), dict):
            continue
        updated = _number(beat.get("timestamp")) or 0.0
        if now - updated > stale_after_s:
            continue
        agent = decode(session, beat["telemetry"], updated)
        if agent is not None:
            agents.append(agent)
    agents.sort(key=lambda a: (a.started, a.session))
    return agents, problems


def load(root: Path, apply: Callable[[list[AgentLive], list[Problem]], Delta],
         lock: threading.Lock | threading.RLock) -> Delta:
    """A local project's running agents into its State (`State.apply_agents`), read
    outside the lock."""
    agents, problems = read_agents(root)
    with lock:
        return apply(agents, problems)


# -- written by the engine -------------------------------------------------------------

def agents_file(root: Path) -> Path:
    return sdd_path(root, "runtime", "agents.json", what="agents snapshot")


def agents_entry(agent: AgentLive, role: str, log_path: str, worktree: str,
                 now: float) -> dict[str, Any]:
    """One agent in Bernstein's `agents.json` shape (its `/status` builds an AgentSession
    from it: the reasons are strings, never null)."""
    return {"id": agent.session, "role": role, "status": "working", "exit_code": None,
            "model": agent.model, "task_ids": [agent.task_id], "pid": agent.pid or 0,
            "spawn_ts": agent.started, "runtime_s": agent.elapsed_s(now),
            "agent_source": "bernstein-tui", "provider": agent.cli, "cell_id": None,
            "parent_id": None, "log_path": log_path, "worktree_path": worktree,
            "tokens_used": agent.tokens_in + agent.tokens_out, "token_budget": 0,
            "context_window_tokens": 0, "context_utilization_pct": 0.0,
            "context_utilization_alert": False, "runtime_backend": "subprocess",
            "bridge_session_key": None, "bridge_run_id": None, "transition_reason": "",
            "abort_reason": "", "abort_detail": "", "finish_reason": "",
            "cost_usd": agent.cost_usd or 0.0, "telemetry": telemetry(agent)}


def write_agents(root: Path, entries: list[dict[str, Any]], now: float) -> None:
    atomic_write_json(agents_file(root), {"ts": now, "agents": entries})


def forget_agents(root: Path) -> int:
    """At an engine's start (it holds the project's lock: no attempt of ours runs): the
    heartbeats with telemetry a stopped engine left, and its agents.json entries, go
    (a Bernstein agent's heartbeat stays). Returns how many agents were forgotten."""
    agents, _problems = read_agents(root, stale_after_s=math.inf)
    for agent in agents:
        with contextlib.suppress(OSError, ValueError):  # (UnsafeId, UnsafePath)
            heartbeat_file(root, agent.session).unlink(missing_ok=True)
    with contextlib.suppress(OSError, ValueError):
        snapshot, problem = read_json_object(agents_file(root), "runtime/agents.json")
        if problem is not None or (snapshot is not None and snapshot.get("agents")):
            write_agents(root, [], time.time())
    return len(agents)


def append_tokens(root: Path, session: str, tokens_in: int, tokens_out: int,
                  now: float) -> None:
    """One line of Bernstein's `<session>.tokens` sidecar: the tokens since the last."""
    path = sdd_path(root, "runtime", f"{safe_id(session, 'session')}.tokens",
                    what="token sidecar")
    append_jsonl(path, [{"ts": now, "in": tokens_in, "out": tokens_out}], fsync=False)

