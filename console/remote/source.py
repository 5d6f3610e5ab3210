"""`RemoteSource`: a Bernstein task server read into a `State`, and kept current.

The same surface as `LocalSource` (`state`, `lock`, `loaded`, `exists`, `describe()`,
`start(on_delta, on_error=)`, `stop()`, `stopping`), so the console runs on either
unchanged. A full sync reads `/tasks` (page by page), `/tasks/archive`, `/approvals`,
`/status` (the agents) and the gate reports of finished tasks; then
`/events` brings each change (`task_update` → `GET /tasks/{id}`). The server
drops events for slow readers and never replays, so every (re)connect of the stream,
and a cheap `/tasks/counts` check that disagrees with the state, leads to a full
re-sync; only what differs reaches `on_delta`. Without the stream, polled every `poll_s`.

`health` is a `ServerHealth` snapshot for the console's header; each change of
its status or of the stream's liveness comes as a Delta with section "server".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from console.remote.agents import sync_agents
from console.remote.client import ServerClient, ServerError
from console.remote.health import ServerHealth, decode_nodes
from console.remote.sse import BACKOFF_FIRST_S, EventStream, SseEvent
from console.sdd.state import Delta, State
from console.sdd.task_codec import SIGNAL_TYPES
from console.sdd.task_live import TaskLive, from_detail

#: gate reports are fetched for tasks in these states (a report exists once gates ran)
GATED_STATES = frozenset({"done", "closed", "failed", "blocked", "pending_approval"})
MAX_GATE_FETCHES = 50  # per sync: a big server must not cost a request per task
MONITOR_S = 5.0  # /health and /tasks/counts
POLL_S = 1.0  # full re-sync while the event stream is down
RESYNC_S = 60.0  # full re-sync even when all looks well (events dropped without a gap)


def normalise_task(record: Any) -> Any:
    """A TaskResponse as task_codec reads it: completion signals of a type this
    console does not know (3.23.0 adds several) are kept aside, not fatal."""
    if not isinstance(record, dict):
        return record
    signals = record.get("completion_signals")
    if isinstance(signals, list) and any(
            isinstance(s, dict) and s.get("type") not in SIGNAL_TYPES for s in signals):
        record = dict(record)
        record["completion_signals"] = [s for s in signals if not isinstance(s, dict)
                                        or s.get("type") in SIGNAL_TYPES]
        record["server_completion_signals"] = signals
    return record


def counts_match(counts: dict[str, int], mine: dict[str, int], total: int) -> bool:
    """The server's /tasks/counts against ours, comparing only what counts reports: 3.23.0
    leaves `blocked_by_failed_dep` at 0 (and an older server leaves out newer states) while
    its `total` counts those tasks. So a state the server says 0 of is compared as a group:
    ours in such states must add up to what the server's total has beyond its counts."""
    if counts.get("total", total) != total:
        return False
    reported = {status: n for status, n in counts.items() if status != "total" and n}
    if any(mine.get(status, 0) != n for status, n in reported.items()):
        return False
    unreported = counts.get("total", total) - sum(reported.values())
    return sum(n for status, n in mine.items() if status not in reported) == unreported


class RemoteSource:
    """State from a Bernstein task server (HTTP + SSE)."""

    def __init__(self, client: ServerClient, *, events: bool = True, poll_s: float = POLL_S,
                 monitor_s: float = MONITOR_S, resync_s: float = RESYNC_S,
                 backoff_s: float | None = None) -> None:
        self.client = client
        self.state = State()
        self.lock = threading.RLock()
        self.loaded = threading.Event()
        self.shown = threading.Event()  # the console's first rows are on screen (unused here)
        self.health = ServerHealth(client.where(""))
        self.server_counts: dict[str, int] = {}  # the last /tasks/counts answer
        self.events = events
        self.poll_s = poll_s
        self.monitor_s = monitor_s
        self.resync_s = resync_s
        self.backoff_s = backoff_s
        self.resyncs = 0  # full syncs done (the first load included)
        self._stop = threading.Event()
        self._sync_lock = threading.Lock()  # one fetch-and-apply at a time
        self._emit_lock = threading.Lock()  # on_delta is never called concurrently
        self._threads: list[threading.Thread] = []
        self._on_delta: Callable[[Delta], None] = lambda delta: None
        self._on_error: Callable[[str], None] = lambda message: None
        self._last_error: str | None = None
        self._reached = False
        self._last_sync = 0.0
        self._stream: EventStream | None = None
        self._unanswered = False  # a request of this sync got no answer (deadline, drop)

    @property
    def exists(self) -> bool:
        """The server has answered (a local project's `.sdd/` exists)."""
        return self._reached

    def describe(self) -> str:
        tenant = f" (tenant {self.client.tenant})" if self.client.tenant else ""
        return self.client.url + tenant

    # -- health ----------------------------------------------------------------

    def _set_health(self, **changes: Any) -> None:
        old = self.health
        new = replace(old, latency_ms=self.client.last_latency_ms, **changes)
        self.health = new
        if (old.status, old.live, old.detail, old.draining, old.workers) != (
                new.status, new.live, new.detail, new.draining, new.workers):
            self._emit(Delta(sections={"server"}))

    def check_health(self) -> ServerHealth:
        """`GET /health` (public); the snapshot afterwards."""
        try:
            body = self.client.health()
        except ServerError as exc:
            self._set_health(status="unreachable" if exc.unreachable else f"http {exc.status}",
                             detail=str(exc))
        else:
            status = body.get("status")
            self._set_health(status=str(status) if status else "answering",
                             detail="" if self.health.live or not self.events
                             else self.health.detail, checked_at=time.time())
        return self.health

    def check_workers(self) -> None:
        """`GET /cluster/nodes`: the workers' load for the header (a server without a
        node registry, or one that refuses the read, shows none)."""
        try:
            nodes = decode_nodes(self.client.get("/cluster/nodes"))
        except ServerError:
            nodes = ()
        self._set_health(workers=nodes)

    # -- syncing ---------------------------------------------------------------

    def sync(self) -> Delta:
        """Read everything the console shows from the server; the difference as a Delta.
        ServerError when the tasks cannot be read (the state is left as it was)."""
        with self._sync_lock:
            self._unanswered = False
            records = [normalise_task(r) for r in self.client.all_tasks()]
            self._reached = True
            with self.lock:
                delta = self.state.apply_server_tasks(self.client.where("/tasks"), records,
                                                      complete=True)
            for part in (self._sync_archive, self._sync_approvals, self._sync_agents):
                delta.merge(part())
            delta.merge(self._sync_gates(delta))
            self.resyncs += 1
            self._last_sync = time.monotonic()
        if not self.health.live and self.health.status in ("unknown", "unreachable"):
            self._set_health(status="answering", detail="")
        return delta

    def _optional(self, what: str, read: Callable[[], Delta]) -> Delta:
        """A part of the state the console can do without: its failure is a problem line."""
        try:
            return read()
        except ServerError as exc:
            self._unanswered = self._unanswered or exc.unreachable
            with self.lock:
                return self.state.set_file_error(self.client.where(what), str(exc))

    def _sync_archive(self) -> Delta:
        def read() -> Delta:
            records = self.client.archive()
            with self.lock:
                delta = self.state.set_file_error(self.client.where("/tasks/archive"), None)
                return delta.merge(self.state.apply_server_archive(
                    self.client.where("/tasks/archive"), records))
        return self._optional("/tasks/archive", read)

    def _sync_approvals(self) -> Delta:
        def read() -> Delta:
            items = self.client.approvals()
            with self.lock:
                delta = self.state.set_file_error(self.client.where("/approvals"), None)
                return delta.merge(self.state.apply_server_approvals(
                    self.client.where("/approvals"), items))
        return self._optional("/approvals", read)

    def _sync_agents(self) -> Delta:  # the running agents (remote/agents.py)
        return self._optional("/status", lambda: sync_agents(self.client, self.state, self.lock))

    def _sync_gates(self, changed: Delta) -> Delta:
        """Gate reports of finished tasks that changed (all of them on the first sync)."""
        delta = Delta()
        with self.lock:
            wanted = [t.id for t in changed.upserts.values()
                      if t.status in GATED_STATES][:MAX_GATE_FETCHES]
            gone = [t for t in changed.removed if t in self.state.gate_reports]
        for task_id in wanted:
            if self._unanswered:  # a server that gave no answer just now: not 50 more tries
                break
            delta.merge(self._sync_gate(task_id))
        for task_id in gone:
            with self.lock:
                delta.merge(self.state.apply_gate_report(self._gate_display(task_id), None,
                                                         None))
        return delta

    def _gate_display(self, task_id: str) -> str:
        return self.client.where(f"/tasks/{task_id}/gates")

    def _sync_gate(self, task_id: str) -> Delta:
        def read() -> Delta:
            report = self.client.gates(task_id)
            with self.lock:
                if report is None and task_id not in self.state.gate_reports:
                    return Delta()
                return self.state.apply_gate_report(self._gate_display(task_id), report, None)
        return self._optional(f"/tasks/{task_id}/gates", read)

    def refresh_task(self, task_id: str) -> Delta:
        """One task again (after an event, or an action on it); a 404 removes it."""
        with self._sync_lock:
            try:
                record = normalise_task(self.client.task(task_id))
            except ServerError as exc:
                if exc.status != 404:
                    raise
                with self.lock:
                    return self.state.remove_task(task_id)
            with self.lock:
                delta = self.state.apply_server_tasks(self.client.where(f"/tasks/{task_id}"),
                                                      [record], complete=False)
            if any(t.status in GATED_STATES for t in delta.upserts.values()):
                delta.merge(self._sync_gate(task_id))
            return delta

    @property
    def root(self) -> None:
        return None  # a task server's project is on its host, not here

    def health_line(self) -> str:
        return self.health.line()

    def load_progress(self) -> tuple[int, int] | None:
        """A server's first sync is a few pages, with no byte total to show."""
        return None

    def task_live(self, task_id: str) -> TaskLive:
        """Progress, agent status and log tail from `GET /dashboard/tasks/{id}` (a
        thread's job); a refusal is the problem line, never an exception."""
        try:
            return from_detail(self.client.task_detail(task_id))
        except (ServerError, ValueError) as exc:
            return TaskLive(problem=str(exc))

    def counts_agree(self) -> bool:
        """`GET /tasks/counts` against the state's counts (a cheap drift check)."""
        counts = self.client.counts()
        self.server_counts = counts
        with self.lock:
            mine = self.state.state_counts()
            total = len(self.state.tasks)
        return counts_match(counts, mine, total)

    def check_drain(self) -> None:
        """`GET /drain` into the header (needs the token; a server without it: unknown)."""
        try:
            body = self.client.drain()
        except ServerError:
            return
        self._set_health(draining=body.get("draining") is True)

    def set_draining(self, draining: bool) -> None:
        """What a drain or resume just made true (the console's z)."""
        self._set_health(draining=draining)

    # -- following -------------------------------------------------------------

    def _emit(self, delta: Delta) -> None:
        with self._emit_lock:
            self._on_delta(delta)

    def _send(self, delta: Delta) -> None:
        if delta:
            self._emit(delta)

    def _report(self, message: str) -> None:
        """An error for on_error, once: a server that stays down is said once, not per poll."""
        if message != self._last_error:
            self._last_error = message
            self._on_error(message)

    def _resync(self, why: str) -> None:
        try:
            self._send(self.sync())
            self._last_error = None
        except ServerError as exc:
            self._report(f"re-sync after {why} failed: {exc}")
            self._set_health(status="unreachable" if exc.unreachable else f"http {exc.status}",
                             detail=str(exc))

    def _on_event(self, event: SseEvent) -> None:
        if event.event not in ("task_update", "task_progress"):
            return
        body = event.json()
        task_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(task_id, str) or not task_id:
            return
        try:
            self._send(self.refresh_task(task_id))
        except ServerError as exc:
            self._report(f"task {task_id}: {exc}")

    def _on_connect(self) -> None:
        self._set_health(live=True, detail="")
        if self.loaded.is_set():  # events may have been dropped while it was down
            self._resync("the event stream reconnected")

    def _on_gap(self, reason: str) -> None:
        self._set_health(live=False, detail=reason)

    def _first_load(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            self.check_health()
            try:
                self._send(self.sync())
            except ServerError as exc:
                self._report(str(exc))
                self._set_health(status="unreachable" if exc.unreachable
                                 else f"http {exc.status}", detail=str(exc))
                self._stop.wait(delay)
                delay = min(10.0, delay * 2)
                continue
            self.check_drain()
            self.check_workers()
            self.loaded.set()
            self._emit(Delta())  # the load is complete, even if it found nothing
            return

    def _main(self) -> None:
        self._first_load()
        if self._stop.is_set() or not self.events:
            return
        self._stream = EventStream(
            self.client, self._stop, on_event=self._on_event, on_connect=self._on_connect,
            on_gap=self._on_gap, on_problem=self._report,
            first_s=self.backoff_s or BACKOFF_FIRST_S)
        self._stream.run()

    def _monitor(self) -> None:
        """Health and drift: /health + /tasks/counts every monitor_s; full re-syncs while
        the stream is down (every poll_s) and every resync_s regardless."""
        last_check = time.monotonic()
        while not self._stop.wait(self.poll_s):
            if not self.loaded.is_set():
                continue
            now = time.monotonic()
            if not self.health.live or now - self._last_sync >= self.resync_s:
                self._resync("polling" if not self.health.live else "the periodic check")
            if now - last_check < self.monitor_s:
                continue
            last_check = now
            if self.check_health().status == "unreachable":
                continue
            self.check_drain()
            self.check_workers()
            try:
                agree = self.counts_agree()
            except ServerError as exc:
                self._report(str(exc))
                continue
            if not agree:
                self._resync("a count that disagreed with /tasks/counts")

    def start(self, on_delta: Callable[[Delta], None], *,
              on_error: Callable[[str], None] | None = None) -> None:
        """Load, then follow the server in daemon threads until `stop()`."""
        self._on_delta = on_delta
        self._on_error = on_error or (lambda message: None)
        for target, name in ((self._main, "remote-events"), (self._monitor, "remote-monitor")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._stream is not None:
            self._stream.abort()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.client.close()

    @property
    def stopping(self) -> threading.Event:
        return self._stop
