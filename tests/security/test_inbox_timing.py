"""#32 point 5, the review's timing findings on the signed control inbox:

- an engine whose key cannot be found (one of an older version, or run by another user
  or with another XDG_STATE_HOME) gets the CLI's one line within seconds, naming the
  key path expected, not a wait until the request's own deadline (900 s for approve);
  one that took the lock lately (it is starting) is given until 30 s after that;
- the key is replaced whole (a temporary file renamed into place): a reader never sees
  none or a short one, a short one (an older engine writing in place) is "not yet", and
  a request signed with a dead engine's key, refused by the new engine, is signed anew
  with the new key and sent once more;
- a signed request is valid only while its sender waits (`expires_at`): one an agent
  copied out of the inbox and puts back after the CLI said "nothing was done" is
  refused; a requester whose request left the inbox without an answer says it may
  still be carried out.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from console.control import Outcome
from console.engine.events import EventLog
from console.engine.inbox import EngineInbox, submit
from console.engine.inbox_key import Verifier, key_file, make_key, read_key, sign
from console.sdd.paths import SddPaths
from tests.engine_kit import make_repo

WAIT_S = 60.0  # upper bound for what takes well under a second; never asserted


def _until(what: str, check: Any, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _inbox(root: Path) -> Path:
    return root / ".sdd" / "runtime" / "control" / "inbox"


def _waiting(root: Path) -> list[Path]:
    inbox = _inbox(root)
    return sorted(p for p in inbox.glob("*.json")) if inbox.is_dir() else []


def test_an_engine_without_a_key_here_is_named_within_seconds(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="cascade: {enabled: false}\n")
    lock = root / ".sdd" / "runtime" / "engine.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    # an engine that keeps its key elsewhere (an older version, another user, another
    # XDG_STATE_HOME) holds the project: here, this test holds its lock
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write(json.dumps({"pid": os.getpid(), "started_at": time.time(),
                               "host": "here"}))
        held.flush()
        os.utime(lock, (time.time() - 60, time.time() - 60))  # it started a minute ago
        env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
        expected = str(tmp_path / "state" / "bernstein-tui" / "engine-keys")
        for args in (["approve", "p1"], ["evolve"], ["pause"]):
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "console", "-C", str(root), *args],
                                  capture_output=True, text=True, timeout=60, env=env)
            took = time.monotonic() - started
            assert done.returncode == 1, (args, done)
            assert done.stderr.count("\n") == 1 and done.stdout == "", (args, done)
            line = done.stderr
            assert expected in line and ".key" in line, line
            assert "older bernstein-tui version" in line and "XDG_STATE_HOME" in line, line
            assert "nothing was done" in line, line
            assert took < 30, (args, took)  # 5 s of waiting for a starting engine's key
        assert _waiting(root) == []  # nothing was sent


def test_a_reader_sees_the_old_key_or_the_new_one_never_none(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    keys = {make_key(root)}
    seen: list[str] = []
    read_keys: set[bytes] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                read_keys.add(read_key(root))
            except OSError as exc:
                seen.append(f"{type(exc).__name__}: {exc}")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(400):
            keys.add(make_key(root))
    finally:
        stop.set()
        reader.join()
    assert seen == []
    assert read_keys <= keys and len(read_keys) > 1  # whole keys, made by make_key
    mine = f".{key_file(root).name}."  # (other tests' engines keep their keys here too)
    leftovers = [p.name for p in key_file(root).parent.iterdir() if p.name.startswith(mine)]
    assert leftovers == []  # no temporary file stays behind
    assert key_file(root).stat().st_mode & 0o777 == 0o600


def _engine(root: Path, after: threading.Event | None, carried: list[dict[str, object]],
            stop: threading.Event) -> threading.Thread:
    """An engine's inbox in a thread: it starts (makes its key) once `after` is set, and
    carries out what holds until `stop`."""
    paths = SddPaths(root)

    def run() -> None:
        if after is not None:
            after.wait(WAIT_S)
        engine = EngineInbox(paths, EventLog(paths))

        def handle(request: dict[str, object], _reply: Any) -> Outcome:
            carried.append(request)
            return Outcome.done(f"did {request['action']}")

        while not stop.is_set():
            engine.drain(handle)
            time.sleep(0.02)
        engine.close("stopped")

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _pause_once_the_key_comes(root: Path, after_s: float) -> None:
    """`pause` sent while the engine makes its key only `after_s` seconds later: the
    requester waits for it, and the engine carries the request out once."""
    starts, stop = threading.Event(), threading.Event()
    carried: list[dict[str, object]] = []
    engine = _engine(root, starts, carried, stop)
    try:
        threading.Timer(after_s, starts.set).start()
        outcome = submit(SddPaths(root), {"action": "pause"}, timeout=20)
    finally:
        starts.set()
        stop.set()
        engine.join()
    assert outcome == Outcome.done("did pause"), outcome
    assert [r["action"] for r in carried] == ["pause"]


def test_a_starting_engine_is_waited_for(tmp_path: Path) -> None:
    root = tmp_path / "project"
    lock = root / ".sdd" / "runtime" / "engine.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as held:  # an engine took the lock just now; its start is slow
        fcntl.flock(held, fcntl.LOCK_EX)
        _pause_once_the_key_comes(root, 6.5)  # its key, later than 5 s


def test_a_short_key_is_not_yet(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    make_key(root)
    key_file(root).write_bytes(b"")  # an older engine, between creating its key and writing it
    _pause_once_the_key_comes(root, 0.5)


def test_a_request_signed_with_a_dead_engines_key_is_sent_again(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    dead = make_key(root)  # an engine that died without removing its key
    paths = SddPaths(root)
    result: list[Outcome] = []
    requester = threading.Thread(target=lambda: result.append(
        submit(paths, {"action": "pause"}, timeout=20)))
    requester.start()
    first = json.loads(_until("the request", lambda: _waiting(root))[0].read_text())
    assert first == sign(dead, {k: v for k, v in first.items() if k != "signature"})
    # a new engine starts: a new key, and the request made before it is refused
    stop = threading.Event()
    carried: list[dict[str, object]] = []
    engine = _engine(root, None, carried, stop)
    try:
        requester.join(WAIT_S)
    finally:
        stop.set()
        engine.join()
    assert result == [Outcome.done("did pause")], result
    assert [r["action"] for r in carried] == ["pause"]  # once, signed with the new key
    assert carried[0]["id"] != first["id"]


def test_a_copied_request_is_void_once_its_sender_gave_up(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    key = make_key(root)  # an engine that is busy (its tick does not come in time)
    copied: list[tuple[str, dict[str, Any]]] = []

    def agent() -> None:  # copies the signed request and deletes it
        request = _until("the request", lambda: _waiting(root))[0]
        copied.append((request.name, json.loads(request.read_text())))
        request.unlink()

    thief = threading.Thread(target=agent)
    thief.start()
    outcome = submit(SddPaths(root), {"action": "pause"}, timeout=1.5)
    thief.join()
    assert not outcome.ok and "\n" not in outcome.message
    assert "no longer in the inbox" in outcome.message, outcome
    assert "may still be carried out" in outcome.message, outcome
    assert "nothing was done" not in outcome.message, outcome
    [(name, request)] = copied
    time.sleep(0.1)
    # the agent puts it back later (within the old 5 minutes): the engine refuses it
    refusal = Verifier(key).refusal(name, request)
    assert refusal is not None and refusal.startswith("expired"), refusal
    # and one that says nothing about when its sender stops waiting
    bare = sign(key, {k: v for k, v in request.items()
                      if k not in ("signature", "expires_at")})
    refusal = Verifier(key).refusal(name, bare)
    assert refusal is not None and "no expires_at" in refusal, refusal
    # while its sender still waits, the same request holds
    fresh = sign(key, {**{k: v for k, v in request.items() if k != "signature"},
                       "expires_at": time.time() + 10})
    assert Verifier(key).refusal(name, fresh) is None
