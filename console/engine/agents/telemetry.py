"""Live telemetry of a running attempt (issue #33): its agent's output read as it is
written (sdd/agent_transcript.py's LiveReader, one reader per CLI format), and what it
shows — tokens so far, cost so far, the current tool call or last message, turns,
elapsed — published in Bernstein's runtime formats (sdd/agent_live.py owns them):

- the session's heartbeat, with a `telemetry` object (`runtime/heartbeats/<s>.json`);
- `runtime/agents.json`, every running agent of this engine (Fleet, below);
- `runtime/<session>.tokens`, a line per increase (Bernstein's cost ledger reads it).

Cost: the CLI's own figure when it reports one (claude's `total_cost_usd`, at its end),
else tokens × the cascade's price table (engine/cascade.py, its one owner), marked as
an estimate (None for a model the table does not know: no made-up $0). The pump
thread only parses; the attempt's beat thread writes, at most once per PUBLISH_S per
agent and only when something changed (a liveness heartbeat every HEARTBEAT_S
otherwise), so an agent that says nothing costs no extra write.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

from console.engine.cascade import CascadeConfig, cost_usd, usage_from_output
from console.sdd.agent_live import (
    AgentLive,
    agents_entry,
    append_tokens,
    telemetry,
    write_agents,
)
from console.sdd.agent_transcript import LiveReader
from console.sdd.task_live import write_heartbeat

PUBLISH_S = 1.0  # at most one telemetry write per agent per second
HEARTBEAT_S = 2.0  # a heartbeat at least this often, changed or not


class Fleet:
    """The running agents of one engine on one project: `runtime/agents.json`, written
    by the agents' beats (`flush`: at most once per PUBLISH_S, when something changed)
    and at once when an agent that is in it ends. An attempt shorter than a beat never
    gets into it (nor costs a write)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}
        self._written = 0.0  # monotonic time of the last write
        self._listed: set[str] = set()  # sessions the file on disk has
        self._pending = False  # a change not written yet

    def update(self, session: str, entry: dict[str, Any]) -> None:
        with self._lock:
            self._entries[session] = entry
            self._pending = True

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self._pending and time.monotonic() - self._written >= PUBLISH_S:
            self._write()

    def remove(self, session: str) -> None:
        with self._lock:
            self._entries.pop(session, None)
            if session in self._listed:
                self._write()

    def _write(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # advisory, as the heartbeat
            write_agents(self.root, list(self._entries.values()), time.time())
            self._listed = set(self._entries)
        self._written = time.monotonic()
        self._pending = False


_fleets: dict[Path, Fleet] = {}
_fleets_lock = threading.Lock()


def fleet_of(root: Path) -> Fleet:
    with _fleets_lock:
        return _fleets.setdefault(root, Fleet(root))


class AgentTelemetry:
    """One attempt's live figures and its heartbeat (phase, message, percent too)."""

    def __init__(self, root: Path, session: str, task_id: str, role: str, model: str,
                 prices: CascadeConfig, log_path: str, worktree: str) -> None:
        self.root, self.session, self.task_id, self.role = root, session, task_id, role
        self.model, self.prices = model, prices
        self.log_path, self.worktree = log_path, worktree
        self.cli = ""
        self.pid: int | None = None
        self.started = time.time()
        self.stage_of: tuple[str, str, int] = ("agent", "running", 10)
        self.problem = ""  # the first output line that could not be read
        self._reader: LiveReader | None = None
        self._usage = (0, 0)  # from BERNSTEIN_USAGE lines (the script contract)
        self._lock = threading.Lock()
        self._dirty = False
        self._written = 0.0  # monotonic time of the last heartbeat
        self._sent = (0, 0)  # tokens already in the .tokens sidecar
        self._fleet = fleet_of(root)
        self._closed = False
        self._spawned = False  # its agent started (it is in agents.json from then on)

    # -- fed by the attempt ------------------------------------------------------------

    def start(self, cli: str) -> None:
        with self._lock:
            self.cli = cli
            self._reader = LiveReader(cli)

    def started_pid(self, pid: int) -> None:
        with self._lock:
            self.pid = pid
            self._spawned = self._dirty = True

    def exited(self) -> None:
        """Its agent is gone (the attempt goes on: janitor, gates): no pid is shown for
        it any more, so none that the system may give another process."""
        with self._lock:
            self.pid = None
            self._dirty = True

    def feed(self, chunk: bytes) -> None:
        """The agent's output, as the pump reads it (parsing only: no I/O here)."""
        with self._lock:
            if self._reader is None:
                return
            for line in self._reader.feed(chunk):
                if line.startswith("BERNSTEIN_USAGE"):
                    more = usage_from_output(line)
                    self._usage = (self._usage[0] + more[0], self._usage[1] + more[1])
            self.problem = self._reader.problem
            self._dirty = True

    # -- what it shows -----------------------------------------------------------------

    def snapshot(self) -> AgentLive:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> AgentLive:
        report = self._reader.report if self._reader is not None else None
        tokens_in = (report.tokens_in if report else 0) + self._usage[0]
        tokens_out = (report.tokens_out if report else 0) + self._usage[1]
        own = report.cost_usd if report else None
        priced = any(name.lower() in self.model.lower() for name in self.prices.prices)
        cost = own if own is not None else round(cost_usd(
            self.model, tokens_in, tokens_out, self.prices), 6) if priced else None
        return AgentLive(
            session=self.session, task_id=self.task_id, cli=self.cli, model=self.model,
            pid=self.pid, started=self.started, updated=time.time(), tokens_in=tokens_in,
            tokens_out=tokens_out, tokens_cached=report.tokens_cached if report else 0,
            cost_usd=cost, cost_estimated=own is None, last=report.last if report else "",
            turns=report.turns if report else 0, problem=self.problem)

    # -- publishing --------------------------------------------------------------------

    def stage(self, phase: str, message: str, percent: int) -> None:
        """A new stage of the attempt: its heartbeat now."""
        with self._lock:
            self.stage_of = (phase, message, percent)
            self._publish()

    def beat(self) -> None:
        """From the beat thread: publish what changed (at most once per PUBLISH_S), and
        a heartbeat at least every HEARTBEAT_S."""
        with self._lock:
            since = time.monotonic() - self._written
            if (self._dirty and since >= PUBLISH_S) or since >= HEARTBEAT_S:
                self._publish()
        self._fleet.flush()

    def run_beats(self, stop: threading.Event) -> None:
        while not stop.wait(PUBLISH_S):
            with contextlib.suppress(OSError, ValueError):
                self.beat()

    def _publish(self) -> None:
        if self._closed:
            return
        agent = self._snapshot()
        self._dirty = False
        self._written = time.monotonic()
        phase, message, percent = self.stage_of
        write_heartbeat(self.root, self.session, phase, message, percent,
                        telemetry=telemetry(agent))
        if self._spawned:
            self._fleet.update(self.session, agents_entry(
                agent, self.role, self.log_path, self.worktree, time.time()))
        self._tokens(agent)

    def _tokens(self, agent: AgentLive) -> None:
        more_in = agent.tokens_in - self._sent[0]
        more_out = agent.tokens_out - self._sent[1]
        if more_in > 0 or more_out > 0:
            append_tokens(self.root, self.session, max(0, more_in), max(0, more_out),
                          time.time())
            self._sent = (agent.tokens_in, agent.tokens_out)

    def close(self) -> int:
        """The attempt ended: the last tokens to the sidecar, out of agents.json, no
        heartbeat after this. Returns the percent its last stage reached."""
        with self._lock:
            self._closed = True
            with contextlib.suppress(OSError, ValueError):
                self._tokens(self._snapshot())
        self._fleet.remove(self.session)
        return self.stage_of[2]
