"""`LocalSource`: a project's `.sdd/` read into a `State`, and kept current.

`load()` reads everything once (tasks first, painted while the metrics stream in);
`refresh(paths)` re-reads what changed (JSONL from its offsets, whole files again);
`start()` runs the watcher thread: `refresh` on file events, each non-empty `Delta` to
the callback. All mutation happens under `lock`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from console.model import Ticket
from console.sdd import agent_live, frame_reads
from console.sdd.fileio import Signature, file_signature, read_json_object, read_regular_file
from console.sdd.kinds import KINDS, Section
from console.sdd.paths import JSONL_KINDS, Kind, SddPaths
from console.sdd.state import Delta, State
from console.sdd.tail import JsonlTail
from console.sdd.task_live import TaskLive, read_local
from console.sdd.tickets import MAX_TICKET_BYTES, TICKET_SUFFIXES, TicketError, parse_ticket

if TYPE_CHECKING:
    from console.sdd.checkpoint_files import Saved

#: bytes read per step of the initial load, so deltas stream to the console
LOAD_STEP_BYTES = 8 * 1024 * 1024
#: the first step of the task log is small: the first rows paint while the rest streams
FIRST_TASKS_BYTES = 256 * 1024
#: when more than this is left after the first step, the load waits for the first paint
HOLD_IF_LEFT_BYTES = 8 * 1024 * 1024
HOLD_FOR_PAINT_S = 1.0  # ... but never longer than this
#: a checkpoint is written once this much JSONL was read since the last one (smaller
#: projects read fast enough cold and never get one)
CHECKPOINT_AFTER_BYTES = 4 * 1024 * 1024

class LocalSource:
    """State from files under `root/.sdd/`, written by anyone."""

    def __init__(self, root: Path, *, checkpoint_after: int | None = CHECKPOINT_AFTER_BYTES
                 ) -> None:
        """`checkpoint_after`: JSONL bytes read before a checkpoint is worth writing;
        None: no checkpoint is read or written."""
        self.paths = SddPaths(root.resolve())
        self.checkpoint_after = checkpoint_after
        self.restored: frozenset[Kind] = frozenset()  # kinds the checkpoint put back
        self._checkpointed = 0  # the tails' offsets summed, at the last checkpoint
        self.state = State()
        self.lock = threading.RLock()
        self.tails = {
            kind: JsonlTail(self.paths.of(kind), self.paths.display(self.paths.of(kind)))
            for kind in JSONL_KINDS
        }
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self.loaded = threading.Event()
        self.shown = threading.Event()  # set by the console once the first rows are on screen
        self.signatures: dict[str, Signature] = {}  # whole files as read, by absolute path
        #: whole files a checkpoint holds, by the State's name, until their first listing
        #: (sdd/checkpoint_files.py)
        self.saved_files: dict[Kind, dict[str, Saved]] = {}
        self._load_total = 0  # bytes of JSONL the first full read has to read
        self._ahead = frame_reads.Ahead()  # bytes read and not yet in the State

    @property
    def exists(self) -> bool:
        return self.paths.sdd.is_dir()

    @property
    def root(self) -> Path:
        return self.paths.root

    def has_no_tasks(self) -> bool:
        """No task log, or an empty one (one stat, for the console's first frame)."""
        try:
            return os.stat(self.tails[Kind.TASKS].path).st_size == 0
        except OSError:
            return True

    def health_line(self) -> str | None:
        return None  # no server: the engine line says who runs the project

    def task_live(self, task_id: str) -> TaskLive:
        """Progress, last heartbeat and agent log tail of a task (a thread's job)."""
        with self.lock:
            task = self.state.tasks.get(task_id)
            metadata = dict(task.metadata) if task else {}
            if task is not None and task.assigned_agent and "session" not in metadata:
                metadata["session"] = task.assigned_agent  # Bernstein's own agents
        return read_local(self.paths.root, task_id, metadata)

    def describe(self) -> str:
        return str(self.paths.root)

    # -- reading ---------------------------------------------------------------

    def _read_jsonl(self, kind: Kind, max_bytes: int | None = None) -> tuple[Delta, bool]:
        done = frame_reads.read(self.tails[kind], KINDS[kind].frame, max_bytes)
        delta, ok = self._fold(kind, done)
        return delta, ok and done.batch is not None and done.batch.more

    def _fold(self, kind: Kind, done: frame_reads.Read) -> tuple[Delta, bool]:
        """A read of a JSONL kind into the State; False when it failed (what it raised:
        the file's problem)."""
        display = self.tails[kind].display
        try:
            if done.error is not None:
                raise done.error
            assert done.batch is not None
            with self.lock:
                return self.state.apply_jsonl(kind, display, done.batch, done.prepared), True
        except Exception as exc:
            with self.lock:
                return self.state.set_file_error(
                    display, f"unreadable: {type(exc).__name__}: {exc}"), False

    def _guarded(self, path: Path, read: Callable[[Path], Delta]) -> Delta:
        """One file's read; anything unexpected becomes that file's problem, not a crash."""
        try:
            return read(path)
        except Exception as exc:
            with self.lock:
                return self.state.set_file_error(
                    self.paths.display(path), f"unreadable: {type(exc).__name__}: {exc}")

    def _read_if_changed(self, path: Path, read: Callable[[Path], Delta]) -> Delta:
        """Re-read a whole-file kind only when its signature changed."""
        key = str(path)
        try:
            signature: Signature | None = file_signature(os.stat(path))
        except OSError:
            signature = None
        if signature is not None and self.signatures.get(key) == signature:
            return Delta()
        if signature is None:
            self.signatures.pop(key, None)
        else:
            self.signatures[key] = signature
        return self._guarded(path, read)

    def _read_gate_report(self, path: Path) -> Delta:
        obj, problem = read_json_object(path, self.paths.display(path))
        with self.lock:
            return self.state.apply_gate_report(self.paths.display(path), obj, problem)

    def _read_engine_status(self, path: Path) -> Delta:
        obj, problem = read_json_object(path, self.paths.display(path))
        with self.lock:
            return self.state.apply_engine_status(self.paths.display(path), obj, problem)

    def _read_ticket(self, path: Path) -> Delta:
        display = self.paths.display(path)
        data, problem = read_regular_file(path, display, MAX_TICKET_BYTES, follow=False)
        parsed: Ticket | TicketError | None = None
        if problem is not None:
            parsed = TicketError(display, problem.reason)
        elif data is not None:
            parsed = parse_ticket(data, display)
        with self.lock:
            return self.state.apply_ticket(display, parsed)

    def _sync_dir(self, kind: Kind) -> Delta:
        """Re-list a directory kind: read new/changed files (or put back what a checkpoint
        holds of them), drop vanished ones. The quiet-time poll runs this every second,
        so an unchanged file costs one stat and no Path: only what changed is read."""
        delta = Delta()
        directory, suffixes, reader = (
            (self.paths.gates_dir, (".json",), self._read_gate_report)
            if kind is Kind.GATE_REPORT
            else (self.paths.backlog_open, TICKET_SUFFIXES, self._read_ticket))
        shown = self.paths.display(directory) + os.sep  # the State's names for the files
        full = str(directory) + os.sep
        found: set[str] = set()
        changed: dict[str, Signature | None] = {}
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith(".") or not name.endswith(suffixes):
                        continue
                    found.add(shown + name)
                    try:
                        signature = file_signature(entry.stat())
                    except OSError:
                        signature = None
                    if signature is None or self.signatures.get(full + name) != signature:
                        changed[name] = signature
        except OSError:  # missing, not a directory, unreadable: nothing to list
            pass
        saved = self.saved_files.pop(kind, {})
        for name in sorted(changed):
            item = saved.get(shown + name)
            if item is not None and item.signature == changed[name]:
                with self.lock:  # (unchanged since the checkpoint: put back, not read)
                    delta.merge(item.put(self.state))
                self.signatures[full + name] = item.signature
                self.restored |= {kind}
            else:
                delta.merge(self._read_if_changed(directory / name, reader))
        with self.lock:
            gone = set(self.state.files_of(kind)) - found
        for display in sorted(gone):
            delta.merge(self._read_if_changed(self.paths.root / display, reader))
        return delta

    def load(self, on_step: Callable[[Delta], None] | None = None) -> Delta:
        """Read everything: tasks first, then the rest in steps (each step to `on_step`).

        A task that changes later in the log may first show an earlier state for the
        moment the load takes; the last record wins as soon as it is read. The cyclic
        collector waits meanwhile: millions of new records, none of them garbage.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._load(on_step)
        finally:
            if enabled:
                gc.enable()

    def _load(self, on_step: Callable[[Delta], None] | None) -> Delta:
        total = Delta()
        self._load_total = self.jsonl_bytes()

        def step(delta: Delta) -> None:
            if on_step is not None and delta:
                on_step(delta)
            total.merge(delta)

        if self.checkpoint_after is not None and self._load_total:
            step(self._restore())  # (no JSONL: no checkpoint worth a look; an empty
            # project's first paint neither hashes its path nor imports the module)

        delta, more = self._read_jsonl(Kind.TASKS, FIRST_TASKS_BYTES)
        step(delta)
        if on_step is not None and delta and self.jsonl_bytes(unread=True) > HOLD_IF_LEFT_BYTES:
            # A long read competes with the first paint for the interpreter (the GIL):
            # the console says when the first rows are on screen, and the rest follows.
            deadline = time.monotonic() + HOLD_FOR_PAINT_S
            while not (self.shown.wait(0.05) or self._stop.is_set()
                       or time.monotonic() > deadline):
                pass
        if more:
            self._read_all(Kind.TASKS, step)
        step(self._guarded(self.paths.of(Kind.ENGINE_STATUS), self._read_engine_status))
        step(agent_live.load(self.paths.root, self.state.apply_agents, self.lock))
        step(self._sync_dir(Kind.TICKET))
        for kind in JSONL_KINDS:
            if kind is not Kind.TASKS:
                self._read_all(kind, step)
        step(self._sync_dir(Kind.GATE_REPORT))
        self.loaded.set()
        return total

    def _read_all(self, kind: Kind, step: Callable[[Delta], object]) -> None:
        """A JSONL kind's unread lines, in steps, to its end (or the source's stop)."""
        frame = KINDS[kind].frame
        if frame is not None and frame_reads.worth_pipelining(self.tails[kind],
                                                              LOAD_STEP_BYTES):
            frame_reads.fold_pipelined(self.tails[kind], frame, LOAD_STEP_BYTES, self._stop,
                                       self._ahead, partial(self._fold, kind), step)
        else:
            more = True
            while more and not self._stop.is_set():
                delta, more = self._read_jsonl(kind, LOAD_STEP_BYTES)
                step(delta)
        if frame is not None:
            with self.lock:  # the latest gate lines out of the frames read (gate_frame.py)
                step(self.state.gate_frames_read())

    def _restore(self) -> Delta:
        """The checkpoint's State, for each file still as it was (sdd/checkpoint.py)."""
        restored: set[Kind] = set()
        if os.path.lexists(self.paths.checkpoint):  # (else not even its module: first paint)
            from console.sdd import checkpoint

            with contextlib.suppress(Exception):  # damaged: a cold start, never a crash
                restored = checkpoint.restore(self)
        self.restored = frozenset(restored)
        self._checkpointed = self._read_to()
        delta = Delta()
        with self.lock:
            if Kind.TASKS in restored:
                delta.upserts.update(self.state.tasks)
            delta.sections.update(KINDS[k].section for k in restored)
            if restored:
                delta.sections.add(Section.PROBLEMS)
        return delta

    def _read_to(self) -> int:
        return sum(tail.offset for tail in list(self.tails.values()))

    def save_checkpoint(self, force: bool = False) -> bool:
        """Write a checkpoint when enough was read since the last one (or `force`)."""
        if self.checkpoint_after is None or not self.loaded.is_set():
            return False
        read_to = self._read_to()
        if not force and abs(read_to - self._checkpointed) < self.checkpoint_after:
            return False
        from console.sdd import checkpoint

        try:
            saved = checkpoint.save(self)
        except Exception:  # a checkpoint is a cache: failing to write one costs nothing
            saved = False
        if saved:
            self._checkpointed = read_to
        return saved

    def jsonl_bytes(self, *, unread: bool = False) -> int:
        """The size of every JSONL file the State is read from (`unread`: of what is
        not read yet). A stat per file."""
        total = 0
        for tail in self.tails.values():
            try:
                size = os.stat(tail.path).st_size
            except OSError:
                continue
            total += max(0, size - tail.offset) if unread else size
        return total

    def load_progress(self) -> tuple[int, int] | None:
        """(bytes read, bytes to read) while the first full read runs; None before it
        starts and once it is done (read from another thread: two ints, no lock)."""
        if self.loaded.is_set() or not self._load_total:
            return None
        done = sum(tail.offset for tail in list(self.tails.values())) - self._ahead.bytes
        return min(done, self._load_total), self._load_total

    def load_kinds(self, kinds: Iterable[Kind]) -> None:
        """Only these JSONL kinds, whole: for a command that needs the task or proposal
        ids, not the metrics."""
        for kind in kinds:
            self._read_all(kind, lambda _delta: None)

    def refresh(self, paths: Iterable[Path]) -> Delta:
        """Re-read what these changed paths touch."""
        delta = Delta()
        changes = self.paths.changes(paths)
        for kind, path in changes.files:  # an event: read it even if it looks unchanged
            self.signatures.pop(str(path), None)
            delta.merge(self._read_if_changed(path, self._read_gate_report
                                              if kind is Kind.GATE_REPORT else self._read_ticket))
        for kind in sorted(changes.kinds):
            self._read_all(kind, delta.merge)
        for kind in sorted(changes.dirs):
            delta.merge(self._sync_dir(kind))
        if changes.status:
            delta.merge(self._read_if_changed(self.paths.of(Kind.ENGINE_STATUS),
                                              self._read_engine_status))
        if changes.agents:
            delta.merge(agent_live.load(self.paths.root, self.state.apply_agents, self.lock))
        return delta

    def poll(self) -> Delta:
        """A full cheap re-check (offset reads and listings), for missed events."""
        return self.refresh([self.paths.sdd])

    # -- watching --------------------------------------------------------------

    def start(self, on_delta: Callable[[Delta], None], *, on_error: Callable[[str], None]
              | None = None) -> None:
        """Load, then follow changes in a daemon thread until `stop()`."""
        from console.sdd.watcher import watch_loop

        self._watcher = threading.Thread(
            target=watch_loop, args=(self, on_delta, self._stop, on_error),
            name="sdd-watcher", daemon=True)
        self._watcher.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop watching (the watcher checkpoints what it read since the last one)."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout)

    @property
    def stopping(self) -> threading.Event:
        return self._stop
