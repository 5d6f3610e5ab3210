"""metrics/quality_gates.jsonl megabytes at a time, through Polars: the large-project
path, a million lines read as columns, never as a million Python objects.

`prepare` reads a read's lines (8 MB of them in a load) with Polars' NDJSON reader and
group-bys, which run in Rust on every core with the GIL released and need neither the
State nor its lock; `apply` folds what they come to into the State's gate aggregates
(sdd/gate_lines.py: counts, totals, the last runs of each gate). The lines themselves
wait as frames (`State.gate_pending`, a few bytes a line) until the read of the file
ends, or something needs the whole table (a checkpoint, the history): then `flush`
makes one GateLine per (task, gate), once, not one per line, and the read's delta
touches their tasks (State.gate_frames_read).

Polars is laxer than the line path: it makes a string of `5` or `[1]` in a string
column, keeps the first of two equal keys where msgspec keeps the last, and reads a
null as an absent field. So lines are taken only in a shape where both read the same
values, and anything else goes to the block path and then the line path with its
usual reasons:

- ASCII with no backslash: no escape, so a quote or a colon is what it looks like;
- every line a JSON object Polars reads with categorical string columns (which take
  only strings) and typed number and boolean columns (which refuse what is out of
  range or of another type), and as many rows as lines (Polars skips blank lines);
- as many colons in the text as fields with a value plus the colons inside those
  values (timestamps have some, ids and results none). Keys of no one's (Bernstein
  3.23 writes a gate's metadata into its line) are read too, as strings whatever
  their value (Polars gives a nested value's text), for this count alone. Every key is
  a colon outside any string, so no key is null or there twice, and none is unread;
- the required fields present, a status Bernstein knows, each timestamp in the
  canonical form gate_lines.CANONICAL_STAMP takes as it is, every task and gate
  id plain, and durations in a range whose sums cannot overflow.

tests/test_gate_frame.py holds this path to the line path's State, to the last bit.
"""

from __future__ import annotations

import io
import os
import re
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from console.model import GateLine
from console.sdd.delta import Delta
from console.sdd.gate_lines import _UNJUDGED, CANONICAL_STAMP, GATE_RECENT, put_latest
from console.sdd.tail import Block

if TYPE_CHECKING:
    import polars

    from console.sdd.state import State

#: a read smaller than this goes by the block path (a frame's fixed cost is ~2 ms)
MIN_FRAME_BYTES = 2 * 1024 * 1024
#: rows held in frames before they are cut to each key's last (memory, on huge files)
PENDING_ROWS = 2_000_000
#: and once they are this many times the rows the last cut kept: a cut reads every row
#: again, and at 10x (900,000 keys, 10M lines) cuts at twice took 2 s of the read
CUT_AFTER = 4
_IDS = ("task_id", "gate", "result")
_STATUSES = ("pass", "fail", "warn", "timeout", "skipped", "bypassed")
#: CANONICAL_STAMP for Rust's regex (no look-ahead: year 0000 is refused apart)
_STAMP = "^" + CANONICAL_STAMP.removeprefix("(?!0000)") + "$"
_MAX_MS = 1 << 40  # a duration above this (35 years) goes line by line
#: the lines whose keys name the other columns a read is parsed with (Bernstein 3.23
#: writes a gate's metadata into its line: "command", "mutation_score", ...); a key
#: only later lines have costs a second parse
SAMPLE_LINES = 64
MAX_OTHER_KEYS = 32  # (more: the block path)
_KEYS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_PATTERN = re.compile(r"\*|\^.*\$", re.DOTALL)
#: gate_lines._plain_id for an ASCII id (a frame's text is ASCII): the line path says
#: why one is not (every id of a frame is plain, so none is new and not plain)
_PLAIN = "^[A-Za-z0-9]"
_IMPORTING = threading.Lock()
_LOADED: list[Any] = []  # Polars once imported (None: it is not installed)


def _polars() -> Any:
    # Polars' allocator (jemalloc) holds freed pages for 10 s by default, so what one
    # read freed stays in the peak while Python's records grow beside it; returned after
    # 100 ms instead, the peak of a 1M-line read is ~90 MB lower (benchmarks/full_read.py).
    # It reads the setting as Polars loads: the processes we start do not inherit it.
    # Only the first call sets it, under a lock: reads are prepared on several threads
    # (sdd/frame_reads.py), and the environment must not change under Polars running.
    if not _LOADED:
        with _IMPORTING:
            if not _LOADED:
                _LOADED.append(_import_polars())
    return _LOADED[0]


def _import_polars() -> Any:
    ours = "_RJEM_MALLOC_CONF" not in os.environ
    if ours:
        os.environ["_RJEM_MALLOC_CONF"] = (
            "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0")
    try:
        import polars
    except ImportError:  # (a dependency; without it the block path reads everything)
        return None
    finally:
        if ours:
            os.environ.pop("_RJEM_MALLOC_CONF", None)
    return polars


class Prepared(msgspec.Struct):
    """What a read's lines come to, before any of it is in the State."""

    frame: Any  # polars.DataFrame of GateLine's columns (timestamps in microseconds)
    per_status: list[tuple[str, str, int, int, int]]  # gate, status, runs, cached, ms
    recent: list[tuple[str, list[str]]]  # gate, its last GATE_RECENT statuses


def prepare(blocks: list[Block], max_line_bytes: int) -> Prepared | None:
    """A read's blocks (megabytes of whole lines) as columns and aggregates, without
    the State (nor a lock): None when they are few, a block has a problem or a line
    may be over-long, Polars is missing or the lines are not in shape."""
    if (sum(len(block.data) for block in blocks) < MIN_FRAME_BYTES
            or any(block.problem is not None or len(block.data) > max_line_bytes
                   for block in blocks)):
        return None  # (a line is within one block: none is over-long)
    pl = _polars()
    if pl is None:
        return None
    try:
        return _prepared(pl, b"".join(block.data for block in blocks),
                         sum(block.lines for block in blocks))
    except (Exception, pl.exceptions.PanicException):  # (a Rust panic: a BaseException)
        return None  # whatever Polars refuses goes by the block path, never lost


def _prepared(pl: Any, data: bytes, lines: int) -> Prepared | None:
    frame = _read(pl, data, lines)
    if frame is None:
        return None
    col = pl.col
    ids = [frame[name].unique().cast(pl.String) for name in _IDS]  # (in Rust: at 10x a
    # read has 35,000 task ids, too many to bring into Python at every read)
    if (any(values.str.contains(":", literal=True).any() for values in ids)
            or not all(values.str.contains(_PLAIN).all() for values in ids[:2])):
        return None  # (the colon count in _read took them to have none; the line path
        # says why an id is not plain)
    per_status = frame.group_by("gate", "status", maintain_order=True).agg(
        runs=pl.len(), cached=col("cached").sum(),
        ms=col("duration_ms").filter(col("duration_ms") > 0).sum())
    recent = frame.group_by("gate", maintain_order=True).agg(col("status").tail(GATE_RECENT))
    return Prepared(frame, per_status.rows(), recent.rows())


def _read(pl: Any, data: bytes, lines: int) -> polars.DataFrame | None:
    """The lines (`lines` of them) as a frame of GateLine's columns, when they are in
    the shape the module docstring says."""
    if not data.isascii() or b"\\" in data:
        return None
    sampled = _other_keys(data, SAMPLE_LINES)
    if sampled is None:
        return None
    frame, counted = _columns(pl, data, lines, sampled)
    if frame is None and not counted:  # (a key the first lines do not have: all keys)
        every = _other_keys(data, None)
        if every is not None and every != sampled:
            frame, _ = _columns(pl, data, lines, every)
    return frame


def _other_keys(data: bytes, first: int | None) -> list[str] | None:
    """The keys other than GateLine's in the first `first` lines (None: in all), or
    None when one is not a JSON object or there are more than MAX_OTHER_KEYS."""
    end = len(data)
    if first is not None:
        end = 0
        for _ in range(first):
            end = data.find(b"\n", end) + 1 or len(data)
    try:
        rows = _KEYS.decode_lines(data[:end])
    except msgspec.DecodeError:
        return None
    keys = set().union(*rows).difference(GateLine.__struct_fields__)
    if len(keys) > MAX_OTHER_KEYS or any(map(_PATTERN.fullmatch, keys)):
        return None  # (a name pl.col would take as a pattern, not as the name: "*", "^…$")
    return sorted(keys)


def _columns(pl: Any, data: bytes, lines: int, others: list[str]
             ) -> tuple[polars.DataFrame | None, bool]:
    """The lines' frame, or None; and whether their colons were all accounted for."""
    schema = {"timestamp": pl.String, **dict.fromkeys(_IDS, pl.Categorical),
              "status": pl.Enum(_STATUSES), "duration_ms": pl.Int64,
              "cached": pl.Boolean, "required": pl.Boolean,
              **dict.fromkeys(others, pl.String)}  # (any value: only its colons count)
    frame: polars.DataFrame = pl.read_ndjson(io.BytesIO(data), schema=schema)
    if frame.height != lines:
        return None, True
    col = pl.col
    stamps = col("timestamp")
    fields, inner_colons, missing, odd_stamp, odd_ms = frame.select(
        fields=pl.sum_horizontal(pl.all().is_not_null().sum()),
        inner_colons=pl.sum_horizontal(
            col("timestamp", *others).str.count_matches(":", literal=True).sum()),
        missing=pl.any_horizontal(col("task_id", "gate", "status").is_null().any()),
        odd_stamp=(stamps.str.contains(_STAMP).not_() | stamps.str.starts_with("0000")).any(),
        odd_ms=((col("duration_ms") >= _MAX_MS) | (col("duration_ms") <= -_MAX_MS)).any(),
    ).row(0)
    if data.count(b":") != fields + inner_colons:
        return None, False
    if missing or odd_stamp or odd_ms:
        return None, True
    status = col("status")
    fraction = stamps.str.slice(20, 6).cast(pl.Int64, strict=False)  # (6 digits if ".")
    micros = stamps.str.slice(0, 19).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S", time_unit="us").dt.epoch("us") + pl.when(
        stamps.str.slice(19, 1) == ".").then(fraction).otherwise(0)
    return frame.select(  # GateLine's fields, with decode_gate_line's defaults
        "task_id", "gate", "status",
        result=pl.coalesce(col("result"), pl.when(status.is_in(("pass", "skipped")))
                           .then(pl.lit("pass")).otherwise(pl.lit("flagged"))
                           .cast(pl.Categorical)),
        timestamp=micros,  # (seconds once it is a key's latest: _latest_columns)
        duration_ms=col("duration_ms").fill_null(0),
        cached=col("cached").fill_null(False),
        required=col("required").fill_null(False)), True


def apply(state: State, prepared: Prepared, delta: Delta) -> bool:
    """Fold prepared lines into the State, as the line path would one by one. Their
    tasks are said to be touched once, when the read ends (State.gate_frames_read): a
    console loading a large project makes each task's row again once, not at every
    read."""
    for gate, status, runs, cached, ms in prepared.per_status:
        state.gate_counts[gate][status] += runs
        stats = state.gate_stats[gate]
        stats.runs += runs
        stats.passed += runs if status == "pass" else 0
        stats.skipped += runs if status in _UNJUDGED else 0
        stats.cached += cached
        stats.total_ms += ms
    for gate, statuses in prepared.recent:
        state.gate_stats[gate].recent.extend(
            None if status in _UNJUDGED else status == "pass" for status in statuses)
    pending = state.gate_pending
    pending.append(prepared.frame)
    # (memory: a key's last line is enough; at CUT_AFTER times what the last cut kept,
    # so that neither many keys nor ever new ones are cut again and again)
    if sum(map(len, pending)) > max(PENDING_ROWS, CUT_AFTER * state.gate_pending_kept):
        pending[:] = [latest_lines(pending)]
        state.gate_pending_kept = len(pending[0])
    return True  # (the tasks are touched when their latest lines are made: flush)


def latest_lines(frames: list[polars.DataFrame]) -> polars.DataFrame:
    """Each (task, gate)'s last line, in the order the keys first came. (A key is the
    two ids' category codes in one integer, and the rows are found by distinctness, not
    grouped: a group-by of a million lines by the two ids took 75 MB more at its peak;
    this takes 30.)"""
    import polars as pl

    frame = pl.concat(frames)
    key = frame.select(pl.col("task_id").to_physical().cast(pl.UInt64) * (1 << 32)
                       + pl.col("gate").to_physical()).to_series()
    last = key.is_last_distinct()
    rows = key.filter(key.is_first_distinct()).to_frame("key").join(
        pl.DataFrame({"key": key.filter(last), "row": pl.arg_where(last, eager=True)}),
        on="key", how="left", maintain_order="left")["row"]
    return frame[rows]


def flush(state: State) -> None:
    """Each task's latest line per gate from the frames `apply` left (in
    `State.gate_pending`) into `gate_latest`, a new (task, gate) after the task's others
    in the order they came: once however many frames there were
    (State.flush_gate_frames)."""
    frames, state.gate_pending, state.gate_pending_kept = state.gate_pending, [], 0
    if frames:
        columns = _latest_columns(frames)
        put_latest(state, columns[0], columns[1], list(map(GateLine, *columns)))
        state.gate_touched.update(columns[0])


def _latest_columns(frames: list[polars.DataFrame]) -> list[list[Any]]:
    """latest_lines as GateLine's fields, a list each: one str per distinct string, and
    the timestamp in epoch seconds as to_epoch makes them (microseconds / 10**6 in
    Python, correctly rounded: Polars divides by multiplying with 1e-6, which is not)."""
    latest = latest_lines(frames)
    columns = []
    for name in GateLine.__struct_fields__:
        values = latest[name].to_list()
        if name == "timestamp":
            values = [None if micros is None else micros / 1_000_000 for micros in values]
        elif latest[name].dtype.is_numeric() or name in ("cached", "required"):
            pass
        else:
            shared: dict[str, str] = {}
            values = list(map(shared.setdefault, values, values))
        columns.append(values)
    return columns
