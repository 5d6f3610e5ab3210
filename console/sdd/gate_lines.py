"""metrics/quality_gates.jsonl in the State: one line at a time (`add_line`, any line
the decoder takes) and a block of lines at once (`add_block`, the large-project path).

A large project has a million of these lines; the console keeps only aggregates of
them — per-gate counts and totals, the last 40 runs of each gate, and each task's
latest line per gate — so a block is decoded by msgspec straight into slotted structs
(no dict, no GateLine per line) and folded into those aggregates with C-level passes.

A block is taken whole only when every line is in the strict shape below (the shape
Bernstein and the engine write); then each line is exactly what `decode_gate_line`
would make of it, and the aggregates are those of adding it line by line. Anything
else — a missing key, a number where a string goes, a timestamp not in ISO form, a
blank line — returns False, and the State decodes the block line by line with the
usual reasons (tests/test_gate_lines.py holds the two paths to the same State).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Sequence
from functools import partial
from itertools import compress, filterfalse
from operator import attrgetter, is_not
from typing import TYPE_CHECKING, Literal

import msgspec

from console.model import GateLine
from console.sdd.delta import Delta
from console.sdd.tail import whole_lines

if TYPE_CHECKING:
    from console.sdd.state import State

#: gate runs kept per gate for the quality screen's sparkline
GATE_RECENT = 40
_UNJUDGED = ("skipped", "bypassed")


class GateStats(msgspec.Struct):
    """Running totals for one gate over every line of quality_gates.jsonl."""

    runs: int = 0
    passed: int = 0
    skipped: int = 0  # skipped or bypassed: nothing was judged, so neither pass nor fail
    cached: int = 0
    total_ms: int = 0
    recent: deque[bool | None] = msgspec.field(default_factory=lambda: deque(maxlen=GATE_RECENT))

    def add(self, line: GateLine) -> None:
        judged = line.status not in _UNJUDGED
        ok = line.status == "pass"
        self.runs += 1
        self.passed += ok
        self.skipped += not judged
        self.cached += line.cached
        self.total_ms += max(0, line.duration_ms)
        self.recent.append(ok if judged else None)


def add_line(state: State, record: GateLine, display: str, line: int, delta: Delta) -> None:
    state.gate_counts[record.gate][record.status] += 1
    put_latest(state, (record.task_id,), (record.gate,), (record,))
    state.gate_stats[record.gate].add(record)
    delta.touched.add(record.task_id)


def reset(state: State, delta: Delta) -> None:
    state.flush_gate_frames()
    delta.touched |= state.gate_latest.keys()
    state.gate_ids.clear()
    state.gate_counts.clear()
    state.gate_latest.clear()
    state.gate_stats.clear()


# -- a block at once ------------------------------------------------------------------


#: Bernstein's own stamps (datetime.now(UTC).isoformat()), on a date every year has
#: (all but February 29): each one is what fromisoformat takes, so it needs no other
#: check (tests/test_gate_lines.py); year 0 is not a year to fromisoformat
CANONICAL_STAMP = (r"(?!0000)[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
                   r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
                   r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{6})?"
                   r"(?:\+00:00|Z)")


class RawGateLine(msgspec.Struct, gc=False):
    """The strict shape of a line (what decode_gate_line takes as is), as decoded; a
    task's latest line is kept so until it is read (`latest`), when it becomes the
    GateLine decode_gate_line would have made."""

    task_id: str
    gate: str
    status: Literal["pass", "fail", "warn", "timeout", "skipped", "bypassed"]
    timestamp: str | None = None
    result: str | None = None
    duration_ms: int | None = None
    cached: bool | None = None
    required: bool | None = None


_DECODER = msgspec.json.Decoder(RawGateLine)
#: what to_epoch tries as ISO first (4 ASCII digits, a dash, 10+ characters)
_ISO = re.compile(r"[0-9]{4}-.{5}", re.ASCII | re.DOTALL)
_CANONICAL = re.compile(CANONICAL_STAMP, re.ASCII)
_not_none = partial(is_not, None)


def _plain_id(value: str) -> bool:
    """req_str's common case: the value as written (anything else: line by line)."""
    return value.isascii() and value[:1].isalnum()


def _decode(data: bytes) -> list[RawGateLine] | None:
    try:
        lines = _DECODER.decode_lines(data)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        return None
    if not whole_lines(data, lines):
        return None
    stamps = filter(_not_none, map(attrgetter("timestamp"), lines))
    # what Bernstein writes (but on February 29) is valid as it stands; the rest
    # must be what to_epoch tries as ISO first, and what fromisoformat takes as it is
    others = list(filterfalse(_CANONICAL.fullmatch, stamps))
    if not all(map(_ISO.match, others)):
        return None
    try:  # (the value itself is made when the line is read)
        deque(map(dt.datetime.fromisoformat, others), maxlen=0)
    except ValueError:
        return None
    return lines


def _epoch(stamp: str) -> float:
    """to_epoch of a stamp _decode let through (fromisoformat takes it as it is)."""
    when = dt.datetime.fromisoformat(stamp)
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def gate_line(raw: RawGateLine) -> GateLine:
    status, result = raw.status, raw.result
    if result is None:  # (msgspec refuses lone surrogates: a str here is clean already)
        result = "pass" if status in ("pass", "skipped") else "flagged"
    return GateLine(task_id=raw.task_id, gate=raw.gate, status=status, result=result,
                    timestamp=None if raw.timestamp is None else _epoch(raw.timestamp),
                    duration_ms=raw.duration_ms or 0, cached=bool(raw.cached),
                    required=bool(raw.required))


def latest(state: State, task_id: str) -> dict[str, GateLine]:
    """A task's latest line per gate (in the order its gates first ran), each a
    GateLine (made now from a line read in a block). Lines still in frames — a read
    of the file under way (sdd/gate_frame.py) — are not here yet: they come when that
    read ends, and its delta touches their tasks. (Making them here would do it on the
    console's event loop, for every task's lines, at every read of a large load.)"""
    row = state.gate_latest.get(task_id)
    if row is None:
        return {}
    out: dict[str, GateLine] = {}
    for gate, line in row.items():
        if isinstance(line, RawGateLine):
            line = row[gate] = gate_line(line)  # (a value replaced: the order stays)
        out[gate] = line
    return out


def add_block(state: State, data: bytes, delta: Delta) -> bool:
    """Fold a block of whole lines into the State, as add_line would one by one; False
    (the State untouched) when a line is not in the strict shape."""
    lines = _decode(data)
    if lines is None:
        return False
    tasks = list(map(attrgetter("task_id"), lines))
    gates = list(map(attrgetter("gate"), lines))
    block_tasks = set(tasks)  # (small sets: a lookup per line in the large ones is not)
    known = state.gate_ids
    new_ids = (block_tasks | set(gates)) - known
    if new_ids:
        if not all(map(_plain_id, new_ids)):
            return False
        known |= new_ids
    statuses = list(map(attrgetter("status"), lines))
    counts = Counter(zip(gates, statuses, strict=True))
    cached = Counter(compress(gates, map(attrgetter("cached"), lines)))
    for (gate, status), number in counts.items():
        state.gate_counts[gate][status] += number
        stats = state.gate_stats[gate]
        stats.runs += number
        stats.passed += number if status == "pass" else 0
        stats.skipped += number if status in _UNJUDGED else 0
    for gate, number in cached.items():
        state.gate_stats[gate].cached += number
    _add_durations(state, gates, map(attrgetter("duration_ms"), lines))
    _recent(state, gates, statuses)
    put_latest(state, tasks, gates, lines)
    delta.touched |= block_tasks
    return True


def _add_durations(state: State, gates: list[str], durations: Iterable[int | None]) -> None:
    """Each gate's total_ms += its lines' durations (none or negative: 0)."""
    totals: defaultdict[str, int] = defaultdict(int)
    for gate, ms in zip(gates, durations, strict=True):
        if ms and ms > 0:
            totals[gate] += ms
    for gate, ms in totals.items():
        state.gate_stats[gate].total_ms += ms


def _recent(state: State, gates: list[str], statuses: list[str]) -> None:
    """Each gate's sparkline gets this block's last GATE_RECENT runs, in order."""
    tails: dict[str, list[bool | None]] = {}
    full = 0
    wanted = len(set(gates))
    for gate, status in zip(reversed(gates), reversed(statuses), strict=True):
        kept = tails.setdefault(gate, [])
        if len(kept) < GATE_RECENT:
            kept.append(None if status in _UNJUDGED else status == "pass")
            full += len(kept) == GATE_RECENT
            if full == wanted:
                break
    for gate, kept in tails.items():
        state.gate_stats[gate].recent.extend(reversed(kept))


def put_latest(state: State, tasks: Sequence[str], gates: Sequence[str],
               lines: Sequence[RawGateLine | GateLine]) -> None:
    """Lines read at once into `gate_latest` (each a GateLine once read), in order: a
    (task, gate) that is new goes after that task's others."""
    state.flush_gate_frames()
    table = state.gate_latest
    get = table.get
    for task, gate, line in zip(tasks, gates, lines, strict=True):
        row = get(task)
        if row is None:
            row = table[task] = {}
        row[gate] = line
