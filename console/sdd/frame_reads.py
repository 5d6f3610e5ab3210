"""A large read of a kind read as columns (the gate lines: sdd/gate_frame.py),
pipelined: worker threads prepare a few reads at once while the loader's thread reads
the next and folds the last into the State.

A read is two kinds of work. `JsonlTail.read` and the byte checks of `prepare` (its
lines joined, its colons counted) run in Python, holding the interpreter (the GIL), on
one core; Polars' parse and group-bys run in Rust with it released, partly on every
core and partly on one. One read after the other, a core idles through much of each;
several at once, one read's Python runs beside another's Rust.

The reads are handed on in file order, each a `Read` (its batch and what `prepare`
made of it, or what reading raised), and every read taken from the tail is handed on,
even once `stop` is set (then no more are taken): the State must have every line the
tail is past, or a checkpoint would say the file was read further than it was.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from concurrent.futures import Future

    from console.sdd.kinds import FrameReader
    from console.sdd.tail import JsonlTail, TailBatch

#: reads prepared at once: each spends part of its time in Python (one core) and part
#: in Polars' own serial parts, so a few at once fill both cores (the 1x gate lines on
#: 2 cores, medians of 5: one read after the other 0.85 s; pipelined with 1 worker
#: 0.81, 2 0.76, 3 0.68, 4 0.66)
WORKERS = 3
#: reads in flight: one more than the workers prepare, read while they do
DEPTH = WORKERS + 1


class Read(msgspec.Struct):
    """One read of a file: its batch and what `prepare` made of it, or what it raised."""

    batch: TailBatch | None = None
    prepared: Any = None
    error: BaseException | None = None


class Ahead(msgspec.Struct):
    """What a pipeline has read and not yet handed on, in bytes (a load's progress
    counts what the State has: read from another thread, an int)."""

    bytes: int = 0


def read(tail: JsonlTail, frame: FrameReader | None, max_bytes: int | None) -> Read:
    """The next read of `tail` (at most `max_bytes`), prepared when its kind has a frame."""
    try:
        batch = tail.read(max_bytes, blocks=True)
    except Exception as exc:
        return Read(error=exc)
    done = Read(batch)
    if frame is not None and batch.blocks:  # (should prepare raise: the block path, as
        with contextlib.suppress(Exception):  # for None; the tail is past the lines)
            done.prepared = frame.prepare(batch.blocks, batch.max_line_bytes)
    return done


def worth_pipelining(tail: JsonlTail, step_bytes: int) -> bool:
    """Whether what is unread of `tail` makes several reads (a stat)."""
    try:
        return os.stat(tail.path).st_size - tail.offset > step_bytes
    except OSError:
        return False


def fold_pipelined(tail: JsonlTail, frame: FrameReader, step_bytes: int,
                   stop: threading.Event, ahead: Ahead,
                   fold: Callable[[Read], tuple[Any, bool]],
                   step: Callable[[Any], object]) -> None:
    """Every read of `pipelined` folded (`fold`: its delta, and False when it failed)
    and its delta handed to `step`, in order. A fold that fails stops the reads taken
    after it, as one read after the other stops at it; a step that raises too, and it
    raises once the reads already taken are folded (the tail is past them)."""
    halt = threading.Event()
    raised: Exception | None = None
    for done in pipelined(tail, frame, step_bytes, stop, ahead, halt):
        delta, ok = fold(done)
        if not ok:
            halt.set()
        if raised is None:
            try:
                step(delta)
            except Exception as exc:
                raised = exc
                halt.set()
    if raised is not None:
        raise raised


def pipelined(tail: JsonlTail, frame: FrameReader, step_bytes: int,
              stop: threading.Event, ahead: Ahead | None = None,
              halt: threading.Event | None = None) -> Iterator[Read]:
    """`tail`'s reads of `step_bytes` to its end (or to `stop`, or `halt`), in order,
    prepared by worker threads while the next are read; `ahead` counts the bytes read
    and not yet handed on (a read's until the caller asks for the next)."""
    from concurrent.futures import ThreadPoolExecutor  # (logging and more: 3 ms, only
    # for a large read, not at every start)

    ahead = ahead or Ahead()
    halt = halt or threading.Event()
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="frame-read") as pool:
        flight: deque[tuple[Read, Future[Any] | None, int]] = deque()
        more = True
        while True:
            while (more and len(flight) < DEPTH and not stop.is_set()
                   and not halt.is_set()):
                before = tail.offset
                try:
                    batch = tail.read(step_bytes, blocks=True)
                except Exception as exc:
                    flight.append((Read(error=exc), None, 0))
                    more = False
                    break
                more = batch.more
                size = max(0, tail.offset - before)  # (0 when it started the file again)
                ahead.bytes += size
                flight.append((Read(batch), pool.submit(
                    frame.prepare, batch.blocks, batch.max_line_bytes)
                    if batch.blocks else None, size))
            if not flight:
                return
            done, future, size = flight.popleft()
            if future is not None:  # (prepare says None when it cannot: should it raise,
                with contextlib.suppress(Exception):  # the block path reads the lines)
                    done.prepared = future.result()
            try:
                yield done
            finally:
                ahead.bytes -= size
