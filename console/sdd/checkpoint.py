"""A checkpoint of what the full read derived (#22.2): the State's JSONL parts and where
each file's tail stood, so the next start reads only what was appended since.

Written atomically to this user's cache, `$XDG_CACHE_HOME/bernstein-tui/checkpoints/
<sha256 of the project's real path>.ckpt` (SddPaths.checkpoint), never into the
project: a console that only looks, and `status`, write nothing there (DESIGN §7). On
quit, and at quiet moments once enough was read since the last one; read on start by
the console and `status --json`. A file resumes from its offset only when it is still
the same file — same device and inode, no smaller, the same mtime and ctime if the same
size (an in-place rewrite that puts the mtime back still moves the ctime), the same
first bytes and the same last 4 KB before the offset — else its kind is read from the
start.

What it holds was read from files anyone may write, and the cache is only a cache, so
it is never trusted: it is msgpack decoded into the exact record types (no pickle,
nothing that runs), and it is sealed with this user's key (sdd/sealed.py): one written
by anyone else, by another version (its schema is in the MAC), for another project or
damaged is ignored, and the read starts cold.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import time
from collections import Counter, defaultdict, deque
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import msgspec
import msgspec.inspect

from console import __version__
from console.model import (
    ArchiveRecord,
    Chain,
    Decision,
    EngineEvent,
    Experiment,
    GateLine,
    PhaseGateEvent,
    Problem,
    Proposal,
    Reflection,
    Review,
    ReviewFlag,
    SlaEvent,
    Task,
    TaskMetric,
)
from console.records import NO_ITEMS
from console.sdd import sealed
from console.sdd.chain_state import SavedChains
from console.sdd.checkpoint_files import SavedReport, SavedTicket, offer, saved_files
from console.sdd.fileio import atomic_write_bytes
from console.sdd.gate_lines import GATE_RECENT, GateStats, RawGateLine
from console.sdd.paths import JSONL_KINDS, Kind
from console.sdd.tail import Position
from console.sdd.user_dirs import private_dir

if TYPE_CHECKING:
    from console.sdd.source import LocalSource
    from console.sdd.state import State
    from console.sdd.tail import JsonlTail

MAGIC = b"BTUICKP2"
PROBE_BYTES = 4096
#: a checkpoint bigger than this many times the JSONL it stands for (+ 64 MB) is refused
MAX_RATIO = 4
#: the other projects' checkpoints kept: written in the last KEEP_DAYS, KEEP_BYTES at most
KEEP_DAYS = 30
KEEP_BYTES = 2 * 1024 ** 3


class Mark(msgspec.Struct, frozen=True):
    """Where one JSONL tail stood, and how to know the file is still the one it read."""

    kind: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    offset: int
    line_no: int
    head: bytes
    probe_sha: bytes  # sha256 of the PROBE_BYTES before `offset`
    pending: bytes
    skipping: int


class Parts(msgspec.Struct):
    """The State's parts that the JSONL kinds fill (see PARTS)."""

    tasks: dict[str, Task]
    archive: dict[str, ArchiveRecord]
    archive_records: int
    gate_counts: dict[str, dict[str, int]]
    gate_latest: dict[str, dict[str, GateLine]]  # as State.gate_latest, all read
    gate_stats: dict[str, tuple[int, int, int, int, int, list[bool | None]]]
    chains: list[Chain]  # State.chains' values (read back undecoded: _PartsRead)
    chain_count: int
    chain_escalated: int  # (State.chain_stats, while the chains are undecoded)
    chain_cost: float
    last_chain: dict[str, Chain]  # (a task's row shows its latest chain's model)
    task_metrics: dict[str, TaskMetric]
    reflections: dict[str, list[Reflection]]
    reflection_count: int
    reviews: dict[str, list[Review]]
    review_count: int
    sla_latest: dict[str, SlaEvent]
    review_queue: list[ReviewFlag]
    phase_events: list[PhaseGateEvent]
    proposals: dict[str, Proposal]
    decisions: dict[str, list[Decision]]
    experiments: list[Experiment]
    engine_events: list[EngineEvent]
    engine_event_levels: dict[str, int]
    engine_event_total: int
    problems: dict[str, tuple[list[Problem], int]]  # file → listed, and how many more


#: per JSONL kind, the Parts it alone fills (and how its file is named in problems)
PARTS: dict[Kind, tuple[str, ...]] = {
    Kind.TASKS: ("tasks",),
    Kind.ARCHIVE: ("archive", "archive_records"),
    Kind.GATE_LINES: ("gate_counts", "gate_latest", "gate_stats"),
    Kind.CHAINS: ("chains", "chain_count", "chain_escalated", "chain_cost", "last_chain"),
    Kind.TASK_METRICS: ("task_metrics",),
    Kind.REFLECTIONS: ("reflections", "reflection_count"),
    Kind.REVIEWS: ("reviews", "review_count"),
    Kind.SLA_EVENTS: ("sla_latest",),
    Kind.REVIEW_QUEUE: ("review_queue",),
    Kind.PHASE_GATES: ("phase_events",),
    Kind.DEFERRED: ("proposals",),
    Kind.DECISIONS: ("decisions",),
    Kind.EXPERIMENTS: ("experiments",),
    Kind.ENGINE_EVENTS: ("engine_events", "engine_event_levels", "engine_event_total"),
}


class Checkpoint(msgspec.Struct):
    root: str
    marks: list[Mark]
    parts: Parts
    reports: list[SavedReport]  # (whole files: sdd/checkpoint_files.py)
    tickets: list[SavedTicket]


def _enc_hook(value: object) -> object:
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise NotImplementedError(f"cannot checkpoint {type(value).__name__}")


def _dec_hook(kind: type, value: object) -> object:
    if type(value) is dict and getattr(kind, "__origin__", kind) is MappingProxyType:
        return MappingProxyType(value) if value else NO_ITEMS  # (most are empty)
    raise NotImplementedError(f"cannot restore {kind}")


#: Parts and Checkpoint as a checkpoint is read: the same keys, the chains left as their
#: bytes (msgspec.Raw) for State.chains to decode when first asked (half the decoding of
#: a warm start: 50 ms of 125 at 1x; the first paint and `status` need their counts only)
_PartsRead = msgspec.defstruct("PartsRead", [
    (f.name, msgspec.Raw if f.name == "chains" else f.type)
    for f in msgspec.structs.fields(Parts)])
_CheckpointRead = msgspec.defstruct("CheckpointRead", [
    (f.name, _PartsRead if f.name == "parts" else f.type)
    for f in msgspec.structs.fields(Checkpoint)])
_ENCODER = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_DECODER = msgspec.msgpack.Decoder(_CheckpointRead, dec_hook=_dec_hook)
_CHAINS = msgspec.msgpack.Decoder(list[Chain], dec_hook=_dec_hook)
#: this version's schema: a checkpoint made by any other is ignored
SCHEMA = hashlib.sha256(__version__.encode()
                        + repr(msgspec.inspect.type_info(Checkpoint)).encode()).digest()


# -- files --------------------------------------------------------------------------


def _probe_sha(fd: int, offset: int) -> bytes:
    start = max(0, offset - PROBE_BYTES)
    return hashlib.sha256(os.pread(fd, offset - start, start)).digest()


def _mark(kind: Kind, tail: JsonlTail) -> Mark | None:
    """Where `tail` stands, if its file is still there (else the kind starts cold)."""
    state = tail.position()
    if state is None:
        return None
    try:
        fd = os.open(tail.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if ((info.st_dev, info.st_ino) != state.ident or info.st_size < state.offset
                or os.pread(fd, len(state.probe), state.offset - len(state.probe))
                != state.probe):
            return None  # changed since it was read: what the State holds is not in it
        return Mark(kind.name, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
                    info.st_ctime_ns, state.offset, state.line_no, state.head,
                    _probe_sha(fd, state.offset), state.pending, state.skipping)
    finally:
        os.close(fd)


def _still(mark: Mark, path: Path) -> bool:
    """The file `mark` was made from, unchanged up to its offset."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        return ((info.st_dev, info.st_ino) == (mark.dev, mark.ino)
                and info.st_size >= mark.offset
                and (info.st_size != mark.size  # (grown: appended to, read from offset)
                     or (info.st_mtime_ns, info.st_ctime_ns) == (mark.mtime_ns,
                                                                 mark.ctime_ns))
                and os.pread(fd, len(mark.head), 0) == mark.head
                and hmac.compare_digest(_probe_sha(fd, mark.offset), mark.probe_sha))
    except OSError:
        return False
    finally:
        os.close(fd)


# -- saving -------------------------------------------------------------------------


def _parts(state: State) -> Parts:
    latest = {task_id: state.latest_gates(task_id) for task_id in state.gate_tasks()}
    return Parts(
        tasks=state.tasks, archive=state.archive, archive_records=state.archive_records,
        gate_counts={g: dict(c) for g, c in state.gate_counts.items()},
        gate_latest=latest,
        gate_stats={g: (s.runs, s.passed, s.skipped, s.cached, s.total_ms, list(s.recent))
                    for g, s in state.gate_stats.items()},
        chains=list(state.chains.values()), chain_count=len(state.chains),
        chain_escalated=state.chain_stats()[1], chain_cost=state.chain_cost,
        last_chain=state.last_chain,
        task_metrics=state.task_metrics, reflections=dict(state.reflections),
        reflection_count=state.reflection_count, reviews=dict(state.reviews),
        review_count=state.review_count, sla_latest=state.sla_latest,
        review_queue=state.review_queue, phase_events=state.phase_events,
        proposals=state.proposals, decisions=dict(state.decisions),
        experiments=state.experiments, engine_events=list(state.engine_events),
        engine_event_levels=dict(state.engine_event_levels),
        engine_event_total=state.engine_event_total,
        problems=state.problem_files())


def save(source: LocalSource) -> bool:
    """Write the checkpoint of `source` (False, and nothing written, when it cannot).
    Run it where the tails are read (the watcher thread) or once reading stopped: a
    tail read but not yet applied would put its offset past what the State holds."""
    key = sealed.user_key(create=True)
    if key is None:
        return False
    head = len(MAGIC) + sealed.MAC_BYTES
    data = bytearray(head)  # (the body encoded after room for the magic and the MAC:
    # one buffer of the checkpoint's size, not three; the console's peak is 40 MB less)
    with source.lock:
        parts = _parts(source.state)  # (first: it decodes a checkpoint's chains, and a
        # decode that fails leaves the chains file out: read cold at the next start)
        lost = {Kind.CHAINS} if source.state.chains_lost else set()
        marks = [m for kind, tail in source.tails.items()
                 if kind not in lost and (m := _mark(kind, tail))]
        _ENCODER.encode_into(Checkpoint(str(source.paths.root), marks, parts,
                                        *saved_files(source)), data, head)
    with memoryview(data) as view:
        data[:head] = MAGIC + sealed.mac(key, view[head:], SCHEMA)
    target = source.paths.checkpoint
    try:  # (in a directory of this user's alone, never the project: see the top)
        private_dir(target.parent)
        atomic_write_bytes(target, data, mode=0o600)
    except OSError:
        return False
    prune(target.parent, keep=target)
    return True


def prune(directory: Path, keep: Path) -> None:
    """The cache stays bounded (one checkpoint a project ever opened, each up to a few
    hundred MB, would not): checkpoints not written for KEEP_DAYS go, then the least
    recently written past KEEP_BYTES; `keep` (just written) stays. Temporary files a
    crashed write left go after an hour."""
    now = time.time()
    found: list[tuple[float, int, str]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if entry.name.endswith(".tmp") and now - info.st_mtime > 3600:
                        os.unlink(entry.path)
                    elif entry.name.endswith(".ckpt") and entry.path != str(keep):
                        found.append((info.st_mtime, info.st_size, entry.path))
    except OSError:
        return
    total = 0
    for mtime, size, path in sorted(found, reverse=True):  # newest first
        total += size
        if now - mtime > KEEP_DAYS * 86400 or total > KEEP_BYTES:
            with contextlib.suppress(OSError):
                os.unlink(path)


# -- restoring ----------------------------------------------------------------------


def _read(source: LocalSource) -> Any:  # (a _CheckpointRead, or None)
    limit = MAX_RATIO * source.jsonl_bytes() + 64 * 1024 * 1024
    body = sealed.read_sealed(source.paths.checkpoint, MAGIC, SCHEMA, limit)
    if body is None:
        return None
    try:
        checkpoint: Any = _DECODER.decode(body)
    except (msgspec.MsgspecError, ValueError, TypeError, NotImplementedError):
        return None
    return checkpoint if checkpoint.root == str(source.paths.root) else None


def _put(state: State, parts: Any, kind: Kind, display: str) -> None:
    """Restore one kind's parts (a _PartsRead) into a State that has none of it yet;
    `display`: the kind's file, as problems name it."""
    p = parts
    if kind is Kind.TASKS:
        state.restore_tasks(p.tasks)
    elif kind is Kind.GATE_LINES:
        for gate, counts in p.gate_counts.items():
            state.gate_counts[gate] = Counter(counts)
        state.gate_latest.update(cast(dict[str, dict[str, GateLine | RawGateLine]],
                                      p.gate_latest))  # (all GateLines: none raw)
        state.gate_ids.update(p.gate_latest)
        for gate, (runs, passed, skipped, cached, total_ms, recent) in p.gate_stats.items():
            state.gate_stats[gate] = GateStats(runs, passed, skipped, cached, total_ms,
                                               deque(recent, maxlen=GATE_RECENT))
            state.gate_ids.add(gate)
    elif kind is Kind.CHAINS:
        raw = p.chains
        state.save_chains(SavedChains(display, p.chain_count, p.chain_escalated,
                                      lambda: _CHAINS.decode(raw)))
        state.chain_cost = p.chain_cost
        state.last_chain.update(p.last_chain)
    elif kind is Kind.REFLECTIONS:
        state.reflections = defaultdict(list, p.reflections)
        state.reflection_count = p.reflection_count
    elif kind is Kind.REVIEWS:
        state.reviews = defaultdict(list, p.reviews)
        state.review_count = p.review_count
    elif kind is Kind.DECISIONS:
        state.decisions = defaultdict(list, p.decisions)
    elif kind is Kind.ENGINE_EVENTS:
        state.engine_events.extend(p.engine_events)
        state.engine_event_levels.update(p.engine_event_levels)
        state.engine_event_total = p.engine_event_total
    else:
        for name in PARTS[kind]:
            setattr(state, name, getattr(p, name))


def restore(source: LocalSource) -> set[Kind]:
    """Put back what the checkpoint holds for each JSONL file still as it was, and offer
    its gate reports and tickets to the first listing of their directories; the JSONL
    kinds restored (the others are read from the start as usual). Called from
    LocalSource.load, with the cyclic collector paused."""
    checkpoint = _read(source)
    if checkpoint is None:
        return set()
    done: set[Kind] = set()
    with source.lock:
        for mark in checkpoint.marks:
            kind = Kind.__members__.get(mark.kind)
            if kind is None or kind not in JSONL_KINDS or kind in done:
                continue
            tail = source.tails[kind]
            if not _still(mark, tail.path):
                continue
            _put(source.state, checkpoint.parts, kind, tail.display)
            listed, more = checkpoint.parts.problems.get(tail.display, ([], 0))
            source.state.restore_problems(tail.display, listed, more)
            tail.resume(Position((mark.dev, mark.ino), mark.offset, mark.line_no, mark.head,
                                 mark.pending, mark.skipping))
            done.add(kind)
    offer(source, checkpoint.reports, checkpoint.tickets)  # (put back as they are listed)
    return done

