"""#15.1: ids and paths from data go through the one confinement check (console/sdd/confine).

Each attack is a hostile project as a clone would bring it: links committed under
`.sdd/`, ids with `../`, ticket and log paths that point out of the project. The
test asserts nothing outside the project changed and the refusal is one line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.sdd.confine import (
    UnsafeId,
    UnsafePath,
    check_write_path,
    is_safe_id,
    remove_tree,
    safe_id,
    sdd_path,
    within,
)
from console.sdd.fileio import append_jsonl, atomic_write_json, read_log_tail
from tests.conftest import append, run_cli, task_record


def _victim(base: Path) -> Path:
    """A directory of the operator's, next to the project, that must survive."""
    victim = base / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "precious.txt").write_text("keep me\n")
    (victim / "sub" / "inner.json").write_text("{}\n")
    return victim


def _intact(victim: Path) -> None:
    assert (victim / "precious.txt").read_text() == "keep me\n"
    assert (victim / "sub" / "inner.json").read_text() == "{}\n"


# -- the check itself ------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "..", ".", "../x", "a/b", "/etc", "-rf", "a..b",
                                 "x.lock", "a b", "é", "a\nb", "x" * 129, "a\\b", ".hidden",
                                 "name.", "[/]", "\x1b]52;c;x\x07"])
def test_unsafe_ids_are_refused_in_one_line(bad: str) -> None:
    assert not is_safe_id(bad)
    with pytest.raises(UnsafeId) as caught:
        safe_id(bad, "task id")
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and len(message) < 260


@pytest.mark.parametrize("good", ["3f9a0c12b7de", "T-42", "UPG-0002", "DEMO-05", "a.b_c-d",
                                  "x" * 128])
def test_real_ids_are_accepted(good: str) -> None:
    assert safe_id(good) == good


@given(st.text(max_size=40))
def test_a_safe_id_is_always_one_plain_path_component(text: str) -> None:
    if is_safe_id(text):
        assert "/" not in text and text not in (".", "..") and not text.startswith("-")
        assert Path(text).name == text


def test_within_refuses_escapes_absolute_paths_and_links(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / ".sdd" / "runtime").mkdir(parents=True)
    assert sdd_path(root, "runtime", "x.log") == root / ".sdd" / "runtime" / "x.log"
    for bad in ("../../x", "/etc/passwd", "runtime/../../x", ""):
        with pytest.raises(UnsafePath):
            sdd_path(root, bad)
    (root / ".sdd" / "worktrees").symlink_to(tmp_path)
    with pytest.raises(UnsafePath, match="symbolic link"):
        sdd_path(root, "worktrees", "s1")
    with pytest.raises(UnsafePath, match="symbolic link"):
        within(root / ".sdd" / "worktrees", "s1", top=root)


def test_a_linked_sdd_is_refused_for_writes(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "runtime").mkdir(parents=True)
    root = tmp_path / "project"
    root.mkdir()
    (root / ".sdd").symlink_to(elsewhere)
    target = root / ".sdd" / "runtime" / "tasks.jsonl"
    with pytest.raises(UnsafePath):
        check_write_path(target)
    with pytest.raises(UnsafePath):
        append_jsonl(target, [{"id": "x"}])
    with pytest.raises(UnsafePath):
        atomic_write_json(root / ".sdd" / "runtime" / "engine_status.json", {})
    assert list((elsewhere / "runtime").iterdir()) == []


def test_a_linked_file_is_never_appended_through(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / ".sdd" / "metrics").mkdir(parents=True)
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    (root / ".sdd" / "metrics" / "tasks.jsonl").symlink_to(outside)
    with pytest.raises(OSError):
        append_jsonl(root / ".sdd" / "metrics" / "tasks.jsonl", [{"a": 1}])
    assert outside.read_text() == ""


def test_remove_tree_removes_only_real_directories_inside(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    root = tmp_path / "project"
    worktrees = root / ".sdd" / "worktrees"
    (worktrees / "real" / "d").mkdir(parents=True)
    (worktrees / "real" / "d" / "link").symlink_to(victim)  # a link inside: removed as a link
    (worktrees / "planted").symlink_to(victim)
    remove_tree(worktrees / "real", worktrees, root)
    assert not (worktrees / "real").exists()
    with pytest.raises(UnsafePath):
        remove_tree(worktrees / "planted", worktrees, root)
    with pytest.raises(UnsafePath):
        remove_tree(tmp_path / "victim", worktrees, root)
    _intact(victim)


# -- agent logs ------------------------------------------------------------------------


def test_metadata_log_is_read_only_inside_runtime_and_never_blocks(tmp_path: Path) -> None:
    root = tmp_path / "project"
    runtime = root / ".sdd" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "ok.log").write_text("agent says hi\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=sk-canary\n")
    (runtime / "link.log").symlink_to(secret)
    os.mkfifo(runtime / "pipe.log")
    assert read_log_tail(root, ".sdd/runtime/ok.log") == "agent says hi\n"
    results: dict[str, str] = {}

    def read_all() -> None:
        for name in (".sdd/runtime/link.log", ".sdd/runtime/pipe.log", "../secret.txt",
                     str(secret), ".sdd/runtime/../../../secret.txt", "/dev/zero"):
            results[name] = read_log_tail(root, name)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(20)
    assert not reader.is_alive(), "a log read blocked"
    for name, text in results.items():
        assert "sk-canary" not in text, name
        assert text.startswith("(log not shown") or text.startswith("(no log"), (name, text)
        assert "\n" not in text.strip()
    big = runtime / "big.log"
    big.write_bytes(b"x" * 300_000)
    assert len(read_log_tail(root, ".sdd/runtime/big.log", limit=1000)) < 1100


# -- end to end: the engine and the CLI on a hostile clone --------------------------------


def _engine_events(root: Path) -> list[str]:
    path = root / ".sdd" / "runtime" / "engine_events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["message"] for line in path.read_text().splitlines() if line]


@pytest.mark.parametrize("folder", ["worktrees", "sandboxes"])
def test_a_linked_worktrees_dir_stops_the_engine_and_deletes_nothing(
        tmp_path: Path, folder: str) -> None:
    from tests.engine_kit import make_repo

    victim = _victim(tmp_path)
    root = make_repo(tmp_path)
    (root / ".sdd" / folder).symlink_to(Path("..") / ".." / "victim")
    assert (root / ".sdd" / folder / "precious.txt").exists()
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f".sdd/{folder}" in lines[0] and "symbolic link" in lines[0]
    _intact(victim)


def test_recovery_removes_only_worktrees_git_registered(tmp_path: Path) -> None:
    from tests.engine_kit import make_repo

    victim = _victim(tmp_path)
    root = make_repo(tmp_path)
    worktrees = root / ".sdd" / "worktrees"
    worktrees.mkdir(exist_ok=True)
    (worktrees / "planted").symlink_to(victim)
    (worktrees / "stray").mkdir()
    (worktrees / "stray" / "notes.txt").write_text("not the engine's\n")
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 0, result.stderr
    _intact(victim)
    assert (worktrees / "stray" / "notes.txt").exists()
    assert (worktrees / "planted").is_symlink()
    assert any("recovery left .sdd/worktrees/planted alone" in m for m in _engine_events(root))


def test_approve_refuses_a_proposal_id_that_is_a_path(tmp_path: Path) -> None:
    from tests.engine_kit import make_repo

    victim = _victim(tmp_path)
    root = make_repo(tmp_path)
    append(root / ".sdd" / "evolution" / "deferred.jsonl", {
        "proposal_id": "../../../victim", "title": "t", "confidence": 0.9,
        "diff": "--- a/x\n+++ b/x\n"})
    for verb in ("approve", "reject"):
        result = run_cli("-C", str(root), verb, "../../../victim", "--reason", "r")
        assert result.returncode == 1, result
        assert result.stderr.count("\n") == 1 and "not a safe id" in result.stderr
    _intact(victim)


def test_a_shipped_inbox_request_is_answered_never_carried_out(tmp_path: Path) -> None:
    from console.engine.engine import Engine
    from tests.engine_kit import make_repo

    victim = _victim(tmp_path)
    root = make_repo(tmp_path)
    append(root / ".sdd" / "runtime" / "tasks.jsonl", task_record("T1", "failed"))
    inbox = root / ".sdd" / "runtime" / "control" / "inbox"
    inbox.mkdir(parents=True)
    for name, request in (("a.json", {"action": "approve", "proposal_id": "../../../victim"}),
                          ("b.json", {"action": "retry", "task_id": "T1"})):
        (inbox / name).write_text(json.dumps({**request, "requested_at": time.time() + 9e9}))
    engine = Engine(root)
    engine.start()
    try:
        time.sleep(0.5)
    finally:
        engine.stop()
    outbox = root / ".sdd" / "runtime" / "control" / "outbox"
    for name in ("a.json", "b.json"):
        reply = json.loads((outbox / name).read_text())
        assert reply["ok"] is False and "before this engine started" in reply["message"]
    from tests.engine_kit import tasks

    assert tasks(root)["T1"].status == "failed"  # the shipped retry was not carried out
    _intact(victim)


def test_a_linked_inbox_loses_no_file_of_the_operator(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    (victim / "request.json").write_text(json.dumps({"action": "pause"}))
    from tests.engine_kit import make_repo

    root = make_repo(tmp_path)
    control = root / ".sdd" / "runtime" / "control"
    control.mkdir(parents=True)
    (control / "inbox").symlink_to(victim)
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 1 and "control/inbox" in result.stderr
    assert (victim / "request.json").exists()
    _intact(victim)


def test_a_ticket_path_in_metadata_moves_nothing_outside(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    root = tmp_path / "project"
    from console.sdd.skeleton import init_project

    init_project(root)
    evil = "claimed/../../../../victim/precious.txt"
    append(root / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("T1", "open", metadata={"ticket": evil}),
           task_record("T2", "open", metadata={"ticket": "claimed/../../closed"}))
    for task_id in ("T1", "T2"):
        result = run_cli("-C", str(root), "cancel", task_id)
        assert result.returncode == 0, result.stderr
    _intact(victim)
    assert not (root / ".sdd" / "backlog" / "closed" / "precious.txt").exists()


def test_an_open_task_with_an_unsafe_id_is_never_run(tmp_path: Path) -> None:
    from tests.engine_kit import make_repo

    victim = _victim(tmp_path)
    root = make_repo(tmp_path)
    append(root / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("../../../victim", "open", description="write x.txt hi"),
           task_record("OK-1", "open", role="../../victim"))
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 0, result.stderr
    events = _engine_events(root)
    assert sum("not run: its id or role" in m for m in events) == 2
    assert not any(p.name.startswith("victim") for p in (root / ".sdd").rglob("*"))
    _intact(victim)


def test_a_ticket_whose_id_is_a_path_is_refused(tmp_path: Path) -> None:
    from tests.engine_kit import make_repo, ticket

    root = make_repo(tmp_path)
    ticket(root, "evil", id="../../x", title="evil")
    ticket(root, "fine", id="FINE-1", title="fine", description="write ok.txt ok")
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 0, result.stderr
    assert any("ticket id '../../x' is not a safe id" in m for m in _engine_events(root))
    assert (root / ".sdd" / "backlog" / "open" / "evil.yaml").exists()
    assert (root / "ok.txt").read_text().strip() == "ok"  # the valid ticket kept flowing
