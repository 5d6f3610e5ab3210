"""Operator actions for an engine running in another process, through files.

A request is a JSON file written atomically to runtime/control/inbox/; the
engine's tick takes it, carries it out, and writes the outcome to
runtime/control/outbox/<id>.json, which the requester waits for.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from console.control import Outcome
from console.sdd.confine import UnsafePath, sdd_path
from console.sdd.fileio import atomic_write_json, read_json_object
from console.sdd.paths import SddPaths


def _dirs(paths: SddPaths) -> tuple[Path, Path]:
    """inbox/ and outbox/; UnsafePath when either (or a directory above) is a link."""
    return (sdd_path(paths.root, "runtime", "control", "inbox", what="control inbox"),
            sdd_path(paths.root, "runtime", "control", "outbox", what="control outbox"))


def submit(paths: SddPaths, request: dict[str, object], *, timeout: float = 10.0,
           owner: str = "the engine", alive: Callable[[], bool] | None = None) -> Outcome:
    """Write a request and wait for its answer; `alive` says whether the owner still runs
    (an owner that is gone answers nothing: refused at once, not after the timeout)."""
    try:
        inbox, outbox = _dirs(paths)
    except UnsafePath as exc:
        return Outcome.refused(str(exc))
    request_id = uuid.uuid4().hex
    request = {**request, "id": request_id, "requested_at": time.time(),
               "requested_by": os.environ.get("USER") or str(os.getuid())}
    atomic_write_json(inbox / f"{request_id}.json", request)
    reply_path = outbox / f"{request_id}.json"
    deadline = time.monotonic() + timeout
    checked = time.monotonic()
    while time.monotonic() < deadline:
        data, _problem = read_json_object(reply_path, str(reply_path))
        if data is not None:
            with contextlib.suppress(FileNotFoundError):
                reply_path.unlink()
            return Outcome(bool(data.get("ok")), str(data.get("message", "")))
        if alive is not None and time.monotonic() - checked > 0.5:
            checked = time.monotonic()
            if not alive():
                with contextlib.suppress(FileNotFoundError):
                    (inbox / f"{request_id}.json").unlink()
                return Outcome.refused(f"{owner} stopped before answering; nothing was done")
        time.sleep(0.05)
    try:
        (inbox / f"{request_id}.json").unlink()
    except FileNotFoundError:  # taken: it is being carried out, just not finished yet
        return Outcome.refused(f"{owner} took the request but did not finish within "
                               f"{timeout:.0f} s; it may still complete (check again)")
    return Outcome.refused(f"{owner} did not answer within {timeout:.0f} s; nothing was done")


def answer(paths: SddPaths, name: str, outcome: Outcome) -> None:
    """Write the outcome the requester waits for (now, or later for long actions)."""
    with contextlib.suppress(OSError):  # a full disk or a link: the requester times out
        _inbox, outbox = _dirs(paths)
        atomic_write_json(outbox / name, {"ok": outcome.ok, "message": outcome.message,
                                          "answered_at": time.time()})


def _waiting(inbox: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(inbox) if n.endswith(".json")
                      and not n.startswith("."))
    except OSError:
        return []


def refuse_all(paths: SddPaths, reason: str) -> int:
    """Answer every waiting request with a refusal, carrying none out; returns how many."""
    try:
        inbox, _outbox = _dirs(paths)
    except UnsafePath:
        return 0
    names = _waiting(inbox)
    for name in names:
        with contextlib.suppress(OSError):
            (inbox / name).unlink()
        answer(paths, name, Outcome.refused(reason))
    return len(names)


def drain(paths: SddPaths, handle: Callable[[dict[str, object], Callable[[Outcome], None]],
                                            Outcome | None]) -> int:
    """Carry out every waiting request (oldest first); returns how many. A handler that
    returns None answers later through the callback it was given (long actions)."""
    try:
        inbox, _outbox = _dirs(paths)
    except UnsafePath:
        return 0  # the engine's start refused it already (check_sdd_tree)
    done = 0
    for name in _waiting(inbox):
        path = inbox / name
        data, problem = read_json_object(path, str(path))
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if data is None:
            outcome: Outcome | None = Outcome.refused(problem.reason if problem
                                                      else "empty request")
        else:
            try:
                def answered(later: Outcome, name: str = name) -> None:
                    answer(paths, name, later)

                outcome = handle(data, answered)
            except Exception as exc:  # every request is answered, whatever happens
                outcome = Outcome.refused(f"{data.get('action')} failed: "
                                          f"{type(exc).__name__}: {exc}")
        if outcome is not None:
            answer(paths, name, outcome)
        done += 1
    return done
