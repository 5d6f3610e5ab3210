"""Operator actions for an engine running in another process, through files.

A request is a JSON file written atomically to runtime/control/inbox/, signed with the
running engine's key (console.engine.inbox_key: only the operator's own tools can); the
engine's tick takes it, carries it out when its signature holds, and writes the outcome
— signed too — to runtime/control/outbox/<id>.json, which the requester waits for.
A request that is unsigned, wrongly signed, stale, past its expires_at (its sender
stopped waiting), replayed, garbled or too big is answered with a refusal, logged in one
line naming its file, and not carried out. A requester waits KEY_WAIT_S for a starting
engine's key, then names the key file it expected; refused by a new engine that
replaced the one whose key it signed with, it signs anew and sends once more.
Every file is read, written and removed through the directories' descriptors
(console.sdd.confine.SddDir): a link swapped in for a directory redirects nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.control import Outcome
from console.engine.inbox_key import (
    MAX_REQUEST_BYTES,
    SIGNATURE,
    KeyNotReady,
    KeyRefused,
    Verifier,
    drop_key,
    key_file,
    make_key,
    read_key,
    reply_holds,
    reply_signature,
    sign,
)
from console.engine.lock import lock_path
from console.sdd.confine import SddDir, UnsafePath
from console.sdd.paths import SddPaths

if TYPE_CHECKING:
    from console.engine.events import EventLog

INBOX = ("runtime", "control", "inbox")
OUTBOX = ("runtime", "control", "outbox")
MAX_PER_PASS = 64  # requests taken in one tick; the rest wait for the next
KEY_WAIT_S = 5.0  # how long a requester waits for a running engine's key to appear
STARTING_S = 30.0  # ... and for the key of an engine that took the lock this long ago
Handler = Callable[[dict[str, object], Callable[[Outcome], None]], Outcome | None]


def _open(parts: tuple[str, ...], paths: SddPaths, create: bool = False) -> SddDir:
    """inbox/ or outbox/, held open; UnsafePath when it (or a directory above) is a link."""
    return SddDir(paths.root, *parts, create=create, what=f"control {parts[-1]}")


def _encode(obj: dict[str, object]) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _decode(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """One JSON object, or None and why not (one line)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 at byte {exc.start + 1}"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (line {exc.lineno})"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__}"
    return value, ""


def _starting_for(paths: SddPaths) -> float:
    """How much longer an engine that took the lock lately may take to make its key
    (its start loads the task log first): until STARTING_S after it took the lock."""
    try:
        locked_at = os.lstat(lock_path(paths)).st_mtime
    except OSError:
        return 0.0
    return min(STARTING_S, max(0.0, locked_at + STARTING_S - time.time()))


def _engine_key(paths: SddPaths, deadline: float, owner: str,
                alive: Callable[[], bool] | None) -> bytes | Outcome:
    """The running engine's key; while it has none yet (it is starting), wait for it —
    KEY_WAIT_S, or until STARTING_S after the engine took the lock, not the request's
    whole time (an engine that has no key here by then never will)."""
    checked = began = time.monotonic()
    give_up = min(deadline, checked + max(KEY_WAIT_S, _starting_for(paths)))
    why = "no file"
    while True:
        try:
            return read_key(paths.root)
        except KeyNotReady as exc:
            why = str(exc)
        except FileNotFoundError:
            pass
        except KeyRefused as exc:
            return Outcome.refused(f"cannot sign the request: {exc}; nothing was done")
        if alive is not None and time.monotonic() - checked > 0.5:
            checked = time.monotonic()
            if not alive():
                return Outcome.refused(f"{owner} stopped before answering; nothing was done")
        if time.monotonic() >= give_up:
            where = key_file(paths.root) if why == "no file" else why
            return Outcome.refused(
                f"{owner} has no control key ({where}) after "
                f"{time.monotonic() - began:.0f} s: likely an engine of an older "
                "bernstein-tui version, or one run by another user or with another "
                "XDG_STATE_HOME; nothing was done")
        time.sleep(0.05)


def _reply(paths: SddPaths, name: str, key: bytes) -> tuple[dict[str, Any] | None, bytes]:
    """The engine's signed answer to `name`, once there (taken), and the key it holds
    with: `key`, or the engine's key read anew when that changed (the request went to an
    engine that has stopped, and another one answered); a forged one is removed."""
    with contextlib.suppress(OSError), _open(OUTBOX, paths) as outbox:
        data, _problem = outbox.read(name, MAX_REQUEST_BYTES)
        if data is None:
            return None, key
        outbox.unlink(name)
        reply, _why = _decode(data)
        if reply is None:
            return None, key
        if reply_holds(key, name, reply):
            return reply, key
        current = read_key(paths.root)
        if current != key and reply_holds(current, name, reply):
            return reply, current
    return None, key


def _withdraw(paths: SddPaths, name: str) -> bool:
    """Take back a request not taken yet; False when it is gone already (the engine took
    it, or something else removed it)."""
    try:
        with _open(INBOX, paths) as inbox:
            if not inbox.exists(name):
                return False
            inbox.unlink(name)
    except OSError:
        return False
    return True


def _write(paths: SddPaths, request: dict[str, object], key: bytes, deadline: float
           ) -> str | Outcome:
    """Sign `request` (valid until `deadline`, when the requester stops waiting) and put
    it in the inbox; its file name, or why not."""
    request_id = uuid.uuid4().hex
    name = f"{request_id}.json"
    now = time.time()
    signed = sign(key, {**request, "id": request_id, "requested_at": now,
                        "expires_at": now + max(0.0, deadline - time.monotonic()),
                        "requested_by": os.environ.get("USER") or str(os.getuid())})
    try:
        with _open(INBOX, paths, create=True) as inbox:
            inbox.write(name, _encode(signed))
    except (UnsafePath, ValueError) as exc:
        return Outcome.refused(str(exc))
    except OSError as exc:
        return Outcome.refused(f"cannot write the request: {exc.strerror or exc}")
    return name


def _await(paths: SddPaths, name: str, key: bytes, deadline: float, owner: str,
           alive: Callable[[], bool] | None) -> tuple[dict[str, Any] | Outcome | None, bytes]:
    """The answer to `name` and the key it holds with; None at the deadline."""
    checked = time.monotonic()
    while time.monotonic() < deadline:
        reply, answered_with = _reply(paths, name, key)
        if reply is not None:
            return reply, answered_with
        if alive is not None and time.monotonic() - checked > 0.5:
            checked = time.monotonic()
            if not alive():
                if _withdraw(paths, name):
                    return Outcome.refused(f"{owner} stopped before answering; "
                                           "nothing was done"), key
                return Outcome.refused(f"{owner} stopped before answering, after the "
                                       "request left the inbox; it may have been carried "
                                       "out (check)"), key
        time.sleep(0.05)
    return None, key


def submit(paths: SddPaths, request: dict[str, object], *, timeout: float = 10.0,
           owner: str = "the engine", alive: Callable[[], bool] | None = None) -> Outcome:
    """Sign and write a request, and wait for its answer; `alive` says whether the owner
    still runs (an owner that is gone answers nothing: refused at once, not after the
    timeout). An answer that holds only with the engine's key read anew (a new engine
    replaced the one whose key signed the request, and refused it) has the request
    signed anew and sent once more."""
    deadline = time.monotonic() + timeout
    key = _engine_key(paths, deadline, owner, alive)
    if isinstance(key, Outcome):
        return key
    for attempt in range(2):
        written = _write(paths, request, key, deadline)
        if isinstance(written, Outcome):
            return written
        name = written
        answer, answered_with = _await(paths, name, key, deadline, owner, alive)
        if isinstance(answer, Outcome):
            return answer
        if answer is None:
            break
        if answered_with == key or attempt:
            return Outcome(bool(answer.get("ok")), str(answer.get("message", "")))
        key = answered_with  # refused by a new engine: once more, with its key
    if not _withdraw(paths, name):
        return Outcome.refused(f"{owner} did not answer within {timeout:.0f} s, and the "
                               "request is no longer in the inbox (the engine took it, or "
                               "something else removed it): it may still be carried out "
                               "(check again)")
    return Outcome.refused(f"{owner} did not answer within {timeout:.0f} s; nothing was done "
                           "(the request was withdrawn, and has expired)")


class EngineInbox:
    """The engine's side: its key, made when it starts (requests waiting from before are
    refused), the requests it carries out, and the key removed when it stops."""

    def __init__(self, paths: SddPaths, events: EventLog,
                 clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self.events = events
        self.key: bytes | None = None
        try:
            self.key = make_key(paths.root)
        except OSError as exc:
            events.error(f"control inbox: cannot make the engine's key ({exc}); every "
                         "request to it is refused")
        self.verifier = Verifier(self.key, clock) if self.key is not None else None
        # a request waiting before this engine started was not made to it (it may have
        # been committed to the repository): answered, never carried out
        self.refuse_all("made before this engine started; not carried out (send it again)")

    def answer(self, name: str, outcome: Outcome) -> None:
        """Write the outcome the requester waits for (now, or later for long actions)."""
        reply: dict[str, object] = {"ok": outcome.ok, "message": outcome.message,
                                    "answered_at": time.time()}
        if self.key is not None:
            reply[SIGNATURE] = reply_signature(self.key, name, reply)
        with contextlib.suppress(OSError, ValueError), _open(OUTBOX, self.paths,
                                                            create=True) as outbox:
            outbox.write(name, _encode(reply))  # (a full disk or a link: it times out)

    def _waiting(self, inbox: SddDir) -> list[str]:
        try:
            return sorted(n for n in inbox.names() if n.endswith(".json")
                          and not n.startswith("."))
        except OSError:
            return []

    def refuse_all(self, reason: str) -> int:
        """Answer every waiting request with a refusal, carrying none out; how many."""
        try:
            with _open(INBOX, self.paths) as inbox:
                names = self._waiting(inbox)
                for name in names:
                    with contextlib.suppress(OSError):
                        inbox.unlink(name)
        except OSError:
            return 0
        for name in names:
            self.answer(name, Outcome.refused(reason))
        return len(names)

    def close(self, reason: str) -> None:
        """The engine stops: what waits is refused, and the key goes."""
        self.refuse_all(reason)
        if self.key is not None:
            drop_key(self.paths.root, self.key)

    def _take(self, inbox: SddDir, name: str) -> tuple[dict[str, Any] | None, str]:
        """The request in `name`, removed from the inbox, or None and why it is refused."""
        data, problem = inbox.read(name, MAX_REQUEST_BYTES)
        with contextlib.suppress(OSError):
            inbox.unlink(name)
        if data is None:
            return None, problem or "gone before it was read"
        request, why = _decode(data)
        if request is None:
            return None, why
        if self.verifier is None:
            return None, "the engine has no control key; nothing is carried out"
        refusal = self.verifier.refusal(name, request)
        return (None, refusal) if refusal else (request, "")

    def drain(self, handle: Handler) -> int:
        """Carry out the waiting requests that hold (oldest first, MAX_PER_PASS at a
        time); how many were answered or started. A handler that returns None answers
        later through the callback it was given (long actions)."""
        try:
            inbox = _open(INBOX, self.paths)
        except OSError:
            return 0  # the engine's start refused a link already (check_sdd_tree)
        done = 0
        with inbox:
            for name in self._waiting(inbox)[:MAX_PER_PASS]:
                request, why = self._take(inbox, name)
                done += 1
                if request is None:
                    self.events.warning(f"control request refused: {why}",
                                        file=f"{inbox.display}/{name}")
                    self.answer(name, Outcome.refused(f"request refused: {why}"))
                    continue
                outcome = self._carry_out(name, request, handle)
                if outcome is not None:
                    self.answer(name, outcome)
        return done

    def _carry_out(self, name: str, request: dict[str, Any], handle: Handler
                   ) -> Outcome | None:
        try:
            def answered(later: Outcome) -> None:
                self.answer(name, later)

            return handle(request, answered)
        except Exception as exc:  # every request is answered, whatever happens
            return Outcome.refused(f"{request.get('action')} failed: "
                                   f"{type(exc).__name__}: {exc}")
