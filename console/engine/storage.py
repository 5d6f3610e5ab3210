"""A full disk is an error, not a crash (issue #15.6).

When a write to `.sdd/` fails for want of space or a working device (ENOSPC,
EDQUOT, EIO, EROFS, EFBIG), or because a directory there was swapped for a link,
the engine stops dispatching, says so once in one line,
and tries a small write on every tick; when one succeeds it says so and resumes.
Appends roll back their partial bytes (`fileio.append_jsonl`), so no torn line is
left behind.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.engine.recovery import settle
from console.model import TaskState
from console.sdd.confine import UnsafePath
from console.sdd.paths import Kind

if TYPE_CHECKING:
    from console.engine.engine import Engine

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG})


def is_storage_error(exc: BaseException) -> bool:
    """A write failed for want of space or a working device, or because a directory under
    `.sdd/` became a link (UnsafePath): writing stops until a probe succeeds."""
    return isinstance(exc, UnsafePath) or (isinstance(exc, OSError)
                                           and exc.errno in STORAGE_ERRNOS)


class WriteHealth:
    """Whether the engine can write `.sdd/`; `listener` hears every change (the reason,
    or None when writes work again), e.g. the console's header."""

    def __init__(self, listener: Callable[[str | None], None] | None = None) -> None:
        self.problem: str | None = None
        self.listener = listener
        self._lock = threading.Lock()

    def failed(self, exc: OSError, what: str) -> bool:
        """Record a failed write; True the first time (the caller says it once)."""
        reason = (f"cannot write .sdd/ ({exc.strerror or exc} while writing {what}); "
                  "no new attempts start until writes work again")
        with self._lock:
            first = self.problem is None
            self.problem = reason
        if first and self.listener is not None:
            self.listener(reason)
        return first

    def recovered(self) -> bool:
        """Writes work again; True when they had failed."""
        with self._lock:
            was, self.problem = self.problem, None
        if was is not None and self.listener is not None:
            self.listener(None)
        return was is not None


def resume_if_writable(engine: Engine) -> bool:
    """While writes fail, one small write a tick (the engine's status file); when it
    lands, say so and settle the tasks whose attempts the failure cut short."""
    try:
        engine.publish_status(strict=True)
    except OSError as exc:
        engine.write_failed(exc, engine.paths.display(engine.paths.of(Kind.ENGINE_STATUS)))
        return False
    engine.writes.recovered()
    engine.events.info("writes to .sdd/ work again; dispatching resumes")
    with engine.store.lock:
        stranded = [t for t in engine.store.snapshot() if t.id not in engine.running
                    and t.state in (TaskState.CLAIMED, TaskState.IN_PROGRESS)]
    for task in stranded:
        settle(task, engine.store, engine.repo, engine.events, engine.reopen,
               "a write to .sdd/ failed")
    return True
