"""Running one agent process: own process group, scrubbed env, timeout, capped log.

The process is started in a new session (its own process group) so a timeout,
a cancel or an engine stop kills the agent *and* everything it spawned; and it
dies with the engine, even a `kill -9` one (lifecycle.die_with_parent). Its
output goes to `.sdd/runtime/<session>.log`, capped; the last characters are
kept in memory for the cascade's low-confidence check.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from console.engine.lifecycle import die_with_parent

TAIL_CHARS = 2000


@dataclass(frozen=True, slots=True)
class AgentCommand:
    argv: tuple[str, ...]
    stdin: bytes = b""
    env: Mapping[str, str] | None = None  # the complete environment (already scrubbed)


@dataclass(frozen=True, slots=True)
class AgentResult:
    exit_code: int | None
    timed_out: bool
    cancelled: bool
    duration_s: float
    output_tail: str
    log_bytes: int
    truncated: bool


def scrubbed_env(allow: Sequence[str], extra: Mapping[str, str],
                 source: Mapping[str, str] | None = None) -> dict[str, str]:
    """Only allow-listed variables (and LC_*) from `source`, plus `extra`."""
    src = os.environ if source is None else source
    env = {k: v for k, v in src.items() if k in allow or k.startswith("LC_")}
    env.update(extra)
    return env


def kill_group(pgid: int, grace_s: float, still_running: Callable[[], bool]) -> None:
    """SIGTERM the group, wait up to grace_s, then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while still_running() and time.monotonic() < deadline:
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _pump(stream, log_path: Path, cap: int, state: dict,
          on_output: Callable[[bytes], None] | None = None) -> None:
    """Copy the agent's output to its log (up to `cap` bytes) and keep its tail. A log
    that cannot be written (a full disk) stops the copy, never the reading: the agent
    must not block on a full pipe, and the tail still feeds the checks. Every chunk
    also goes to `on_output` (the live telemetry), all of it, capped log or not; if
    that fails it is dropped, never the copy."""
    tail = bytearray()
    written = 0
    log: BinaryIO | None = None
    # unopenable (a full disk): the engine's own next write fails too, and says so
    with contextlib.suppress(OSError):
        log = open(log_path, "ab")  # noqa: SIM115 (closed below, after the last chunk)
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        if log is not None and written < cap:
            part = chunk[: cap - written]
            try:
                log.write(part)
                log.flush()
                written += len(part)
                if written >= cap:
                    log.write(f"\n[bernstein-tui: output capped at {cap} bytes]\n".encode())
                    state["truncated"] = True
            except OSError:
                _closed(log)
                log = None
        if on_output is not None:
            try:
                on_output(chunk)
            except Exception:  # telemetry is advisory: the run and its log go on without it
                on_output = None
        tail += chunk
        if len(tail) > TAIL_CHARS * 4:
            del tail[: len(tail) - TAIL_CHARS * 4]
    if log is not None:
        _closed(log)
    state["tail"] = bytes(tail).decode("utf-8", errors="replace")[-TAIL_CHARS:]
    state["bytes"] = written


def _closed(log: BinaryIO) -> None:
    with contextlib.suppress(OSError):  # the buffered rest may not fit either
        log.close()


def run_agent(command: AgentCommand, cwd: Path, *, timeout_s: float, log_path: Path,
              cap_bytes: int, cancel: threading.Event, kill_grace_s: float = 3.0,
              on_start: Callable[[int], None] | None = None,
              on_output: Callable[[bytes], None] | None = None) -> AgentResult:
    """Run to completion, timeout or cancel. Raises OSError if it cannot start at all."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.Popen(
        list(command.argv), cwd=cwd, env=dict(command.env) if command.env is not None else None,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, close_fds=True, preexec_fn=die_with_parent(),
    )
    if on_start is not None:
        on_start(proc.pid)
    state: dict = {"tail": "", "bytes": 0, "truncated": False}
    pump = threading.Thread(target=_pump, args=(proc.stdout, log_path, cap_bytes, state, on_output),
                            name=f"agent-log-{proc.pid}", daemon=True)
    pump.start()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            assert proc.stdin is not None
            proc.stdin.write(command.stdin)
            proc.stdin.close()

    threading.Thread(target=feed, name=f"agent-stdin-{proc.pid}", daemon=True).start()
    timed_out = cancelled = False
    while proc.poll() is None:
        if time.monotonic() - started > timeout_s:
            timed_out = True
        elif cancel.is_set():
            cancelled = True
        if timed_out or cancelled:
            kill_group(proc.pid, kill_grace_s, lambda: proc.poll() is None)
            break
        cancel.wait(0.05)
    proc.wait()
    # whatever the agent left running in its group goes too
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    pump.join(timeout=5)
    return AgentResult(
        exit_code=proc.returncode, timed_out=timed_out, cancelled=cancelled,
        duration_s=time.monotonic() - started, output_tail=state["tail"],
        log_bytes=state["bytes"], truncated=state["truncated"],
    )
