"""Ticket files on their way through backlog/open/ → claimed/ → closed/ (and back).

Every move names its file relative to directories held open (console.sdd.confine.
SddDir: reached from the project root without following a link, then `renameat`), so a
`backlog/closed` or `backlog/claimed` swapped for a link to somewhere outside while the
engine runs moves nothing there: opening it is refused, in one line, and a directory
swapped after it was opened still gets the file (it is the real one, inside the
project). A ticket that is a link is never read and never moved.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from console.engine.events import EventLog
from console.model import Task, TaskState
from console.sdd.confine import SddDir, UnsafePath
from console.sdd.fields import brief
from console.sdd.paths import SddPaths

CLOSING = frozenset({TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED, TaskState.CLOSED})


def backlog_dir(root: Path, folder: str, create: bool = False) -> SddDir:
    return SddDir(root, "backlog", folder, create=create, what=f"backlog/{folder}")


class Backlog:
    """open/, claimed/ (made when missing) and closed/ (when there), held open for one
    ingest pass; UnsafePath when one of them or a directory above is a link."""

    def __init__(self, root: Path) -> None:
        self.open = backlog_dir(root, "open")
        try:
            self.claimed = backlog_dir(root, "claimed", create=True)
            try:
                self.closed: SddDir | None = backlog_dir(root, "closed")
            except FileNotFoundError:
                self.closed = None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for folder in (self.open, getattr(self, "claimed", None), getattr(self, "closed", None)):
            if folder is not None:
                folder.close()

    def __enter__(self) -> Backlog:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def taken(self, name: str) -> bool:
        """A ticket of that name is claimed or closed already."""
        return self.claimed.exists(name) or (self.closed is not None
                                             and self.closed.exists(name))

    def claimed_name(self, name: str) -> str:
        """A name in claimed/ that no ticket, claimed or closed, uses yet."""
        stem, dot, suffix = name.rpartition(".")
        candidate, counter = name, 1
        while self.taken(candidate):
            candidate = f"{stem}.{counter}{dot}{suffix}" if dot else f"{name}.{counter}"
            counter += 1
        return candidate

    def claim(self, name: str, claimed_name: str) -> None:
        """open/<name> → claimed/<claimed_name>: the entry itself, only a regular file."""
        if not self.open.is_file(name):
            raise UnsafePath(f"backlog/open/{name} is not a regular file; not moved")
        self.open.move(name, self.claimed, claimed_name)


class TicketCloser:
    """A task that ended takes its ticket from claimed/ to closed/; reopened, it takes
    it back. What cannot be moved is said once (one line naming the ticket and why)."""

    def __init__(self, paths: SddPaths, events: EventLog | None = None) -> None:
        self.paths = paths
        self.report: Callable[[str], object] = (
            events.warning if events is not None else lambda message: None)
        self._said: set[str] = set()

    def __call__(self, task: Task) -> None:
        name = str(task.metadata.get("ticket", ""))
        if not name.startswith("claimed/"):
            return
        leaf = name.removeprefix("claimed/")
        if "/" in leaf or "\0" in leaf or leaf in ("", ".", ".."):
            self._say(f"{task.id}: metadata.ticket {brief(name)} is not claimed/<file name>; "
                      "no ticket moved")
            return
        source, target = ("claimed", "closed") if task.state in CLOSING else ("closed",
                                                                               "claimed")
        try:
            with backlog_dir(self.paths.root, source) as here:
                if not here.is_file(leaf):
                    return  # not there (moved already), or a link: left where it is
                with backlog_dir(self.paths.root, target, create=True) as there:
                    if not there.exists(leaf):
                        here.move(leaf, there, leaf)
        except FileNotFoundError:
            return
        except OSError as exc:  # a link swapped in, a full disk: the ticket stays
            self._say(f"ticket {brief(leaf)} of {task.id} not moved to backlog/{target}/: "
                      f"{exc if isinstance(exc, UnsafePath) else exc.strerror or exc}")

    def _say(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            self.report(message)


def close_ticket(paths: SddPaths, task: Task) -> None:
    """One move for a task that changed, nothing said (the file-only control)."""
    TicketCloser(paths)(task)
