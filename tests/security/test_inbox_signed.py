"""#32 point 5: only the operator drives the engine. A real engine (`run`, its own
process) on a tmp project with a task running; request files written into
`.sdd/runtime/control/inbox/` the way an agent can (plain JSON, a garbage signature, a
signature made with another key, a stale one, one past its sender's wait (expires_at)
or without one, a replay of a request the operator made, an oversized file, a link to
a file outside) are each refused, answered in the outbox,
logged in one line naming the file, and carry nothing out (the task still runs, the
engine is not paused). Our CLI's `cancel` (InboxControl, signing with the engine's key)
is carried out."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.engine.inbox_key import key_file, read_key, sign
from console.engine.lock import engine_owner
from console.sdd.paths import Kind, SddPaths
from console.sdd.source import LocalSource
from tests.engine_kit import make_repo, tasks, ticket

WAIT_S = 60.0  # upper bound for what takes well under a second; never asserted


def _until(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _events(root: Path) -> list[dict[str, Any]]:
    path = SddPaths(root).of(Kind.ENGINE_EVENTS)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _paused(root: Path) -> bool:
    source = LocalSource(root)
    source.load()
    status = source.state.engine_status
    assert status is not None and status.running
    return status.paused


def _drop(root: Path, name: str, content: bytes | dict[str, Any]) -> dict[str, Any]:
    """Write a request file as an agent would, and wait for the engine's answer to it."""
    inbox = root / ".sdd" / "runtime" / "control" / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    data = content if isinstance(content, bytes) else json.dumps(content).encode()
    (inbox / f".{name}.tmp").write_bytes(data)
    os.replace(inbox / f".{name}.tmp", inbox / name)
    return _answer(root, name)


def _answer(root: Path, name: str) -> dict[str, Any]:
    reply = root / ".sdd" / "runtime" / "control" / "outbox" / name
    _until(f"the answer to {name}", reply.exists)
    answer = json.loads(reply.read_text())
    reply.unlink()
    return answer


def _refusals(root: Path, name: str) -> list[str]:
    return [e["message"] for e in _events(root)
            if "control request refused" in e["message"] and name in str(e.get("file"))]


def _request(action: str, **fields: Any) -> dict[str, Any]:
    request_id = secrets.token_hex(16)
    return {"action": action, "id": request_id, "requested_at": time.time(),
            "expires_at": time.time() + 10, "requested_by": "agent", **fields}


def _refused(root: Path, label: str, content: bytes | dict[str, Any], why: str) -> None:
    """An agent's request file: refused, answered, one line naming it, nothing done."""
    request_id = content["id"] if isinstance(content, dict) else label
    name = f"{request_id}.json"
    answer = _drop(root, name, content)
    assert answer["ok"] is False and why in answer["message"], (label, answer)
    lines = _until(f"the line for {label}", lambda: _refusals(root, name))
    assert len(lines) == 1 and why in lines[0], (label, lines)
    assert tasks(root)["S"].status == "in_progress", label
    assert not _paused(root), label


def test_only_signed_requests_drive_the_engine(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="cascade: {enabled: false}\n")
    ticket(root, "slow", id="S", title="slow", description="sleep 120")
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_request("pause")))
    log = (tmp_path / "engine.log").open("wb")
    engine = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run",
                               "--workers", "1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        _until("S running", lambda: "S" in tasks(root) and tasks(root)["S"].status
               == "in_progress")
        attempts: dict[str, tuple[bytes | dict[str, Any], str]] = {
            "plain": (_request("cancel", task_id="S"), "not signed"),
            "garbage": ({**_request("cancel", task_id="S"), "signature": "00" * 32},
                        "does not match"),
            "wrongkey": (sign(secrets.token_bytes(32), _request("pause")), "does not match"),
            "huge": (json.dumps({**_request("pause"), "pad": "x" * 200_000}).encode(),
                     "byte limit"),
            "garbled": (b'{"action": "pause", "id": ', "invalid JSON"),
        }
        for label, (content, why) in attempts.items():
            _refused(root, label, content, why)

        link = root / ".sdd" / "runtime" / "control" / "inbox" / "link.json"
        link.symlink_to(outside)
        answer = _answer(root, "link.json")
        assert answer["ok"] is False and "symbolic link" in answer["message"]
        assert len(_refusals(root, "link.json")) == 1
        assert not _paused(root)

        key_path = _until("the engine's key", lambda: key_file(root).exists() and key_file(root))
        assert not key_path.is_relative_to(root)  # kept outside the project
        assert key_path.stat().st_mode & 0o777 == 0o600
        assert key_path.parent.stat().st_mode & 0o777 == 0o700
        key = read_key(root)
        stale = sign(key, {**_request("pause"), "requested_at": time.time() - 3600})
        _refused(root, "stale", stale, "stale")
        # a request its sender stopped waiting for (copied out of the inbox, put back
        # later), and one that does not say when its sender stops waiting
        expired = sign(key, {**_request("pause"), "expires_at": time.time() - 5})
        _refused(root, "expired", expired, "expired")
        bare = _request("pause")
        del bare["expires_at"]
        _refused(root, "no expiry", sign(key, bare), "no expires_at")

        # the operator's own request, signed with the engine's key, is carried out ...
        request = sign(key, _request("pause"))
        name = f"{request['id']}.json"
        answer = _drop(root, name, request)
        assert answer["ok"] is True and "paused" in answer["message"], answer
        _until("the engine to say it is paused", lambda: _paused(root))
        resumed = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "resume"],
                                 capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0 and "resumed" in resumed.stdout, resumed.stderr
        _until("the engine to say it runs again", lambda: not _paused(root))
        # ... once: the same file, copied and dropped again, is a replay
        answer = _drop(root, name, request)
        assert answer["ok"] is False and "replayed" in answer["message"], answer
        assert len(_refusals(root, name)) == 1
        assert not _paused(root)
        assert tasks(root)["S"].status == "in_progress"

        # a key others could read is not used: one line, nothing sent
        key_path.chmod(0o644)
        exposed = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "pause"],
                                 capture_output=True, text=True, timeout=120)
        assert exposed.returncode == 1 and exposed.stderr.count("\n") == 1, exposed
        assert "can be read by others" in exposed.stderr and not _paused(root)
        key_path.chmod(0o600)

        # our CLI (InboxControl) signs, and is carried out
        cancelled = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "cancel",
                                    "S", "--reason", "operator"], capture_output=True,
                                   text=True, timeout=120)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == "task S cancelled: operator"
        _until("S cancelled", lambda: tasks(root)["S"].status == "cancelled")
    finally:
        engine.terminate()
        assert engine.wait(timeout=120) == 0
        log.close()
    assert engine_owner(SddPaths(root)) is None
    assert not key_file(root).exists()  # the key goes with its engine
    assert json.loads(outside.read_text())["action"] == "pause"  # read by nobody, intact
