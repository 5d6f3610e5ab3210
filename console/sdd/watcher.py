"""The watcher thread: file events under `.sdd/` → `LocalSource.refresh` → deltas.

watchfiles (inotify) with a short step, so a change reaches the console in a
few milliseconds; a cheap poll on every quiet second catches anything an event
missed (network filesystems, a watch set up after the write). If `.sdd/` does
not exist yet, it waits for it; if the watcher itself fails, it falls back to
polling and says so once.
"""

from __future__ import annotations

import functools
import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from console.sdd.state import Delta

if TYPE_CHECKING:
    from console.sdd.source import LocalSource

STEP_MS = 8  # wait this long for more changes before handing a batch over
DEBOUNCE_MS = 50  # never hold a batch longer than this
POLL_S = 1.0  # quiet-time consistency poll
CHECKPOINT_QUIET_S = 30.0  # no change for this long: a moment to write a checkpoint
FALLBACK_POLL_S = 0.25
FREEZE_AFTER_BYTES = 32 * 1024 * 1024  # records read before the load's objects are frozen
BURST_GAP_S = 0.025  # a batch this soon after the last one: a burst is on
BURST_SLICE_S = 0.1  # in a burst, batches are read at most this often
LOAD_SEND_S = 0.5  # while loading, the steps' changes go to the console at most this often


class _Pacer:
    """A change on its own is read at once; in a burst (a batch within BURST_GAP_S of
    the last) the watcher waits out BURST_SLICE_S before reading, so 1,000 changes in
    a second reach the screen as ~10 batches and repaints, not one per 16 ms step."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.last = -1.0  # monotonic time of the last batch that changed something

    def before_read(self) -> None:
        since = time.monotonic() - self.last
        if since < BURST_GAP_S:
            self.stop.wait(BURST_SLICE_S - since)

    def after_read(self, delta: Delta) -> None:
        if delta:
            self.last = time.monotonic()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _safe(source: LocalSource, work: Callable[[], Delta],
          on_error: Callable[[str], None]) -> Delta:
    """Run one read; a reader bug is reported, never ends the watcher."""
    try:
        return work()
    except Exception as exc:
        on_error(f"reading {source.paths.display(source.paths.sdd)} failed: "
                 f"{type(exc).__name__}: {exc}")
        return Delta()


def _freeze_if_large(source: LocalSource) -> None:
    """What a large load read lives as long as the console: out of the collector's sight
    it is never scanned again, so a full collection over millions of records no longer
    stalls the screen for a third of a second (benchmarks/latency.py: p99 300 → 50 ms at
    10,000 tasks and 1M gate lines). Small projects are left to the collector."""
    if source.restored or sum(
            tail.bytes_read for tail in source.tails.values()) >= FREEZE_AFTER_BYTES:
        gc.freeze()  # (a checkpoint is only kept for a large read)


def watch_loop(source: LocalSource, on_delta: Callable[[Delta], None], stop: threading.Event,
               on_error: Callable[[str], None] | None = None) -> None:
    report = on_error or (lambda message: None)

    def send(delta: Delta) -> None:
        if delta:
            on_delta(delta)

    if not source.exists:
        on_delta(Delta())  # an empty delta: "no .sdd/ (yet)"
    while not stop.is_set() and not source.exists:
        stop.wait(FALLBACK_POLL_S)
    if stop.is_set():
        return
    # While loading, what the steps changed reaches the console at most every
    # LOAD_SEND_S (the first step, the first rows, at once): each send makes the rows of
    # every task it touched again, and a large project's steps touch thousands each.
    held, sent = [Delta()], [-LOAD_SEND_S]

    def loaded_step(delta: Delta) -> None:
        held[0].merge(delta)
        if time.monotonic() - sent[0] >= LOAD_SEND_S:
            sent[0] = time.monotonic()
            send(held[0])
            held[0] = Delta()
        _freeze_if_large(source)

    _safe(source, lambda: source.load(on_step=loaded_step), report)
    send(held[0])  # what the last steps changed
    source.save_checkpoint()  # a long cold read is not paid again on the next start
    with source.lock:
        source.state.index_chains()  # (here, not on the event loop at the first redraw)
    _freeze_if_large(source)
    on_delta(Delta())  # the load is complete, even if it found nothing
    import watchfiles  # (17 ms: after the load, not before the console's first rows)

    polling = False
    present = True
    while not stop.is_set():
        if source.exists != present:
            present = not present
            on_delta(_safe(source, source.poll, report))  # appeared or vanished: always said
        if not present or polling:
            send(_safe(source, source.poll, report))
            stop.wait(FALLBACK_POLL_S)
            continue
        try:
            ident = _identity(source.paths.sdd)
            last_poll = quiet_since = time.monotonic()
            pacer = _Pacer(stop)
            for changes in watchfiles.watch(
                source.paths.sdd, debounce=DEBOUNCE_MS, step=STEP_MS, stop_event=stop,
                rust_timeout=int(POLL_S * 1000), yield_on_timeout=True, raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                if changes:
                    paths = [Path(p) for _, p in changes]
                    pacer.before_read()
                    delta = _safe(source, functools.partial(source.refresh, paths), report)
                    pacer.after_read(delta)
                    send(delta)
                # a poll at least every POLL_S, busy or not, catches what no event announced
                if not changes or time.monotonic() - last_poll >= POLL_S:
                    send(_safe(source, source.poll, report))
                    last_poll = time.monotonic()
                if not changes and time.monotonic() - quiet_since >= CHECKPOINT_QUIET_S:
                    source.save_checkpoint()  # a quiet moment: keep what was read
                    quiet_since = time.monotonic()
                elif changes:
                    quiet_since = time.monotonic()
                if _identity(source.paths.sdd) != ident:
                    break  # .sdd/ was removed or replaced: the watch must be set up again
        except Exception as exc:
            polling = True
            report(f"file watcher stopped ({type(exc).__name__}: {exc}); "
                   f"polling every {FALLBACK_POLL_S} s instead")
        else:
            # the watched directory went away or the generator ended: re-sync once
            send(_safe(source, source.poll, report))
    source.save_checkpoint()  # on quit, here where the tails are read: not on the UI's loop
