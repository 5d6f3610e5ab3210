"""What a task's agent says while it works: its progress entries and its last heartbeat.

The one owner of two of Bernstein's runtime formats (bernstein-formats.md §runtime):

- `.sdd/runtime/progress/<task_id>.jsonl` — lines `{"kind": "entry", "timestamp",
  "message", "percent"}` (Bernstein's server replays them into a task's `progress_log`;
  other kinds, such as its `snapshot` lines, are skipped here);
- `.sdd/runtime/heartbeats/<session_id>.json` — `{timestamp, files_changed, status,
  current_file, phase, progress_pct, message}`, one per running agent session.

Both are written by an agent or an orchestrator we do not control: every read is
bounded, confined to `.sdd/runtime/`, and the values are data for the sanitiser.
A `--server` project gets the same `TaskLive` from `GET /dashboard/tasks/{id}`.
"""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path
from typing import Any

import msgspec

from console.sdd.agent_transcript import STRUCTURED, readable
from console.sdd.confine import UnsafeId, UnsafePath, safe_id, sdd_path
from console.sdd.fileio import append_jsonl, atomic_write_json, read_log_tail, read_tail

#: how much of a progress file is read (its end), and how many entries are kept
PROGRESS_TAIL_BYTES = 64 * 1024
MAX_ENTRIES = 50
#: a heartbeat file is a few hundred bytes; anything bigger is not one
HEARTBEAT_BYTES = 16 * 1024
#: Bernstein's own escalation starts after 60 s without a heartbeat (WAKEUP)
STALE_AFTER_S = 60.0


class TaskLive(msgspec.Struct, frozen=True):
    """The live side of one task, read off the event loop when it is selected."""

    progress: tuple[dict[str, Any], ...] = ()
    heartbeat: dict[str, Any] | None = None
    log: str | None = None      # the agent log's tail, when the source has one
    problem: str | None = None  # one line: what could not be read, and why


def progress_file(root: Path, task_id: str) -> Path:
    return sdd_path(root, "runtime", "progress", f"{safe_id(task_id, 'task id')}.jsonl",
                    what="progress file")


def heartbeat_file(root: Path, session: str) -> Path:
    return sdd_path(root, "runtime", "heartbeats", f"{safe_id(session, 'session')}.json",
                    what="heartbeat file")


def append_progress(root: Path, task_id: str, message: str, percent: int) -> None:
    """One progress entry, as Bernstein's `POST /tasks/{id}/progress` writes it."""
    append_jsonl(progress_file(root, task_id), [{
        "kind": "entry", "timestamp": time.time(), "message": message,
        "percent": max(0, min(100, int(percent)))}], fsync=False)


def write_heartbeat(root: Path, session: str, phase: str, message: str,
                    progress_pct: int | None = None,
                    telemetry: dict[str, Any] | None = None) -> None:
    """An agent session's heartbeat (`AgentHeartbeat` in Bernstein's tasks/models.py,
    whose reader takes `int(progress_pct)`), with what its agent is doing and spending
    (`telemetry`: sdd/agent_live.py) while it runs."""
    beat: dict[str, Any] = {
        "timestamp": time.time(), "files_changed": 0, "status": "working",
        "current_file": "", "phase": phase, "progress_pct": int(progress_pct or 0),
        "message": message}
    if telemetry is not None:
        beat["telemetry"] = telemetry
    atomic_write_json(heartbeat_file(root, session), beat)


def _entries(data: bytes, partial_first: bool) -> list[dict[str, Any]]:
    lines = data.split(b"\n")
    if partial_first:
        lines = lines[1:]  # the read began inside a line
    kept: list[dict[str, Any]] = []
    for raw in lines:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue  # a torn last line or a corrupt one: the others still show
        if isinstance(record, dict) and record.get("kind", "entry") == "entry":
            kept.append(record)
    return kept[-MAX_ENTRIES:]


def read_progress(root: Path, task_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """The task's latest progress entries (oldest first) and a problem, if any."""
    try:
        data, size = read_tail(progress_file(root, task_id), PROGRESS_TAIL_BYTES)
    except FileNotFoundError:
        return [], None
    except (UnsafeId, UnsafePath, OSError) as exc:
        return [], f".sdd/runtime/progress/{task_id}.jsonl: {_why(exc)}"
    return _entries(data, size > PROGRESS_TAIL_BYTES), None


def read_heartbeat(root: Path, session: str) -> tuple[dict[str, Any] | None, str | None]:
    """A session's last heartbeat, or (None, problem). Absent is (None, None)."""
    where = f".sdd/runtime/heartbeats/{session}.json"
    try:
        data, size = read_tail(heartbeat_file(root, session), HEARTBEAT_BYTES)
    except FileNotFoundError:
        return None, None
    except (UnsafeId, UnsafePath, OSError) as exc:
        return None, f"{where}: {_why(exc)}"
    if size > HEARTBEAT_BYTES:
        return None, f"{where}: {size} bytes, over the {HEARTBEAT_BYTES}-byte limit"
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None, f"{where}: not valid JSON"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"timestamp": value, "status": "working"}, None  # an older wrapper's: a time
    if not isinstance(value, dict):
        return None, f"{where}: expected a JSON object"
    return value, None


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        return "is a symbolic link, not read"
    if isinstance(exc, OSError) and exc.errno == errno.EINVAL:
        return "is not a regular file, not read"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def read_local(root: Path, task_id: str, metadata: dict[str, Any]) -> TaskLive:
    """Progress, heartbeat and log tail of a task in a local project (a thread's job)."""
    progress, problem = read_progress(root, task_id)
    heartbeat = None
    session = metadata.get("session")
    if isinstance(session, str) and session:
        heartbeat, beat_problem = read_heartbeat(root, session)
        problem = problem or beat_problem
    log = metadata.get("log")
    text = read_log_tail(root, str(log)) if log else None
    adapter = str(metadata.get("adapter") or "")
    if text is not None and adapter in STRUCTURED:  # a CLI's JSON mode: as a transcript
        text = readable(adapter, text) or text
    return TaskLive(progress=tuple(progress), heartbeat=heartbeat, log=text, problem=problem)


def from_detail(body: dict[str, Any]) -> TaskLive:
    """A TaskLive from Bernstein's `GET /dashboard/tasks/{id}` answer (already size-
    and time-bounded by the client): `progress_entries`, `log_tail`, `agent_status`."""
    entries = body.get("progress_entries")
    progress = tuple(e for e in entries if isinstance(e, dict))[-MAX_ENTRIES:] \
        if isinstance(entries, list) else ()
    status = body.get("agent_status")
    heartbeat = {"status": status} if isinstance(status, str) and status else None
    log = body.get("log_tail")
    return TaskLive(progress=progress, heartbeat=heartbeat,
                    log=log if isinstance(log, str) and log else None)
