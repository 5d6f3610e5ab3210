"""The one transition function, the lock, ingestion and recovery."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.engine.errors import IllegalTransition, OwnedElsewhere
from console.engine.events import EventLog
from console.engine.ingest import Ingestor, reconcile_blocked, satisfied
from console.engine.lock import EngineLock, find_owner
from console.engine.roles import load_role
from console.engine.router import route
from console.engine.store import TaskStore
from console.model import TRANSITIONS, Task, TaskState, next_model
from console.sdd.paths import SddPaths
from console.sdd.tail import JsonlTail
from console.sdd.task_codec import encode_task
from tests.conftest import append, task_record
from tests.engine_kit import ticket


def _store(root: Path) -> TaskStore:
    store = TaskStore(SddPaths(root), fsync=False)
    store.load()
    return store


def test_every_pair_of_states_follows_the_table(project: Path) -> None:
    store = _store(project)
    for index, (src, dst) in enumerate(itertools.product(TaskState, TaskState)):
        task = store.create(Task(id=f"t{index}", title="t", status=src.value))
        if dst in TRANSITIONS[src]:
            after = store.transition(task.id, dst, reason="r")
            assert after.status == dst.value and after.version == 2
        else:
            with pytest.raises(IllegalTransition, match=f"{src.value} → {dst.value}"):
                store.transition(task.id, dst)
            assert store.get(task.id).status == src.value
    records = JsonlTail(store.paths.sdd / "runtime" / "tasks.jsonl").read().records
    allowed = sum(len(v) for v in TRANSITIONS.values())
    assert len(records) == len(TaskState) ** 2 + allowed  # a create + each allowed change
    archived = JsonlTail(store.paths.sdd / "archive" / "tasks.jsonl").read().records
    assert {r["status"] for _, r in archived} == {"done", "failed", "cancelled"}


def test_transition_stamps_and_replay(project: Path) -> None:
    store = _store(project)
    store.create(Task(id="a", title="A", status="open", priority=0))
    store.transition("a", TaskState.CLAIMED)
    store.transition("a", TaskState.IN_PROGRESS, metadata={"attempt": 1})
    done = store.transition("a", TaskState.DONE, reason="merged")
    assert done.claimed_at and done.completed_at and done.result_summary == "merged"
    replayed = _store(project).get("a")
    assert replayed == done and replayed.priority == 0  # no falsy-zero loss
    with pytest.raises(IllegalTransition, match="done → open is not allowed"):
        store.transition("a", TaskState.OPEN)
    with pytest.raises(Exception, match="transition"):
        store.update("a", status="open")


HOLDER = """
import sys, time
from pathlib import Path
from console.engine.lock import EngineLock
from console.sdd.paths import SddPaths
EngineLock(SddPaths(Path(sys.argv[1]))).acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_lock_refuses_a_live_holder_and_takes_over_a_dead_one(project: Path) -> None:
    paths = SddPaths(project)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(project)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(OwnedElsewhere, match=f"pid {holder.pid}"):
            EngineLock(paths).acquire()
        assert find_owner(paths) is not None and find_owner(paths).pid == holder.pid
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        with EngineLock(paths):
            assert json.loads((project / ".sdd/runtime/engine.lock").read_text())[
                "pid"] == os.getpid()
    finally:
        holder.kill()


def test_a_live_bernstein_owns_the_project(project: Path, tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "bernstein"  # `bernstein serve` as Bernstein is launched
    fake.parent.mkdir()
    fake.write_text("import time\ntime.sleep(30)\n")
    sleeper = subprocess.Popen([sys.executable, str(fake), "serve", "--port", "8052"])
    while b"serve" not in Path(f"/proc/{sleeper.pid}/cmdline").read_bytes():
        time.sleep(0.01)  # until its exec: before, /proc shows the forking pytest
    try:
        (project / ".sdd" / "runtime" / "server.pid").write_text(f"{sleeper.pid}\n")
        with pytest.raises(OwnedElsewhere, match=f"bernstein server \\(pid {sleeper.pid}"):
            EngineLock(SddPaths(project)).acquire()
    finally:
        sleeper.kill()
        sleeper.wait()
    with EngineLock(SddPaths(project)):  # its pid is dead now: ours to take
        pass


def _ingestor(root: Path) -> tuple[Ingestor, TaskStore]:
    paths = SddPaths(root)
    store = _store(root)
    return Ingestor(store, paths, EventLog(paths)), store


def _events(root: Path) -> list[str]:
    return [r["message"] for _, r in JsonlTail(
        root / ".sdd" / "runtime" / "engine_events.jsonl").read().records]


def test_ingestion_blocks_refuses_and_moves(project: Path) -> None:
    ticket(project, "a", id="A", title="first")
    ticket(project, "b", id="B", title="second", depends_on=["A"])
    ticket(project, "c", id="C", title="ghost dep", depends_on=["NOPE"])
    ticket(project, "d", id="A", title="duplicate id")
    (project / ".sdd/backlog/open/e.md").write_text("no title at all\n")
    ingestor, store = _ingestor(project)
    created = {t.id: t.status for t in ingestor.ingest()}
    # B waits open, as Bernstein keeps a task whose dependency is not done (its claim
    # checks the dependency; its server never reopens a plain `blocked` task)
    assert created == {"A": "open", "B": "open"}
    assert store.get("B").result_summary == "waiting for A"
    remaining = sorted(p.name for p in (project / ".sdd/backlog/open").iterdir())
    assert remaining == ["c.yaml", "d.yaml", "e.md"]
    messages = _events(project)
    assert any("depends on unknown task 'NOPE'" in m for m in messages)
    assert any("id 'A' is also used by a.yaml" in m for m in messages)
    assert any("not a ticket" in m for m in messages)
    ingestor.ingest()  # now A exists: d.yaml's reason changes, and is said
    assert any("a task with id 'A' already exists" in m for m in _events(project))
    said = len(_events(project))
    ingestor.ingest()
    assert len(_events(project)) == said  # each refusal is said once
    store.transition("A", TaskState.CLAIMED)
    store.transition("A", TaskState.FAILED, reason="boom")
    reconcile_blocked(store)
    stranded = store.get("B")  # Bernstein 3.23.0's failed-dependency cascade
    assert (stranded.status, stranded.result_summary, stranded.terminal_reason) == (
        "blocked_by_failed_dep", "dependency A is failed", "blocked_by_failed_dependency")
    assert stranded.metadata["blocking_task_id"] == "A"
    store.transition("A", TaskState.OPEN)  # retried: B waits for it, still stranded
    reconcile_blocked(store)
    assert (store.get("B").status, store.get("B").result_summary) == (
        "blocked_by_failed_dep", "waiting for A")
    store.transition("A", TaskState.CLAIMED)
    store.transition("A", TaskState.DONE)
    reconcile_blocked(store)
    opened = store.get("B")
    assert (opened.status, opened.result_summary, opened.terminal_reason) == ("open", None, None)
    assert opened.metadata["blocking_task_id"] is None


def test_a_ticket_created_just_before_a_crash_is_not_created_twice(project: Path) -> None:
    path = ticket(project, "x", title="no id here")
    ingestor, _store_before = _ingestor(project)
    [task] = ingestor.ingest()
    claimed = project / ".sdd/backlog/claimed/x.yaml"
    os.replace(claimed, path)  # as if the engine died between create and move
    again, store2 = _ingestor(project)
    assert again.ingest() == []
    assert list(store2.tasks) == [task.id] and claimed.exists() and not path.exists()


def test_router_follows_seed_001(tmp_path: Path) -> None:
    def chosen(**fields: object) -> tuple[str, str]:
        task = Task(id="t", title="t", status="open", **fields)  # type: ignore[arg-type]
        r = route(task, load_role(task.role, tmp_path))
        return r.model, r.effort

    assert chosen(role="manager") == ("opus", "max")
    assert chosen(role="security") == ("opus", "max")
    assert chosen(scope="large", complexity="high") == ("opus", "high")
    assert chosen(complexity="medium") == ("sonnet", "high")
    assert chosen(complexity="low") == ("sonnet", "normal")
    assert chosen(model="haiku", effort="low") == ("haiku", "low")
    assert chosen(model="opus", complexity="low") == ("opus", "normal")
    assert [(next_model(m) or (None,))[0] for m in ("haiku", "claude-sonnet-4", "opus",
                                                     "gpt-5", "Claude-HAIKU-4")] == [
        "sonnet", "opus", None, "sonnet", "sonnet"]  # one ladder, one reading of case


def test_recovery_reopens_claimed_and_keeps_merged_work(tmp_path: Path) -> None:
    from console.engine.engine import Engine
    from tests.engine_kit import git, make_repo

    root = make_repo(tmp_path)
    store = _store(root)
    store.create(Task(id="c", title="claimed", status="claimed"))
    store.create(Task(id="m", title="merged", status="in_progress",
                      metadata={"branch": "bernstein/m-1"}))  # type: ignore[arg-type]
    git(root, "commit", "--allow-empty", "-qm", "Merge bernstein/m-1: merged")
    engine = Engine(root)
    engine.start()
    try:
        time.sleep(0.1)
    finally:
        engine.stop()
    after = _store(root)
    assert after.get("m").status == "done"
    assert "merged before the engine stopped" in (after.get("m").result_summary or "")
    assert "c was claimed when the engine stopped; reopened" in _events(root)
    history = [r["status"] for _, r in JsonlTail(
        root / ".sdd/runtime/tasks.jsonl").read().records if r["id"] == "c"]
    assert history[:2] == ["claimed", "open"]


def test_review_findings_on_ingestion(project: Path) -> None:
    from console.engine.operations import cancel, escalate

    ticket(project, "a", id="A", title="needs a refused one", depends_on=["B"])
    ticket(project, "b", id="B", title="needs a ghost", depends_on=["GHOST"])
    ticket(project, "c", id="C", title="fine")
    ticket(project, "evil", id="E", title="path role", role="../../tmp/x")
    ingestor, store = _ingestor(project)
    assert [t.id for t in ingestor.ingest()] == ["C"]  # one bad ticket stops nothing else
    messages = _events(project)
    assert any("b.yaml" in m or "'GHOST'" in m for m in messages)
    assert any("'B'" in m for m in messages)
    assert any("role '../../tmp/x' must be letters" in m for m in messages)

    open_dir = project / ".sdd/backlog/open"
    (open_dir / "a.yaml").unlink()
    (open_dir / "b.yaml").unlink()
    first = ticket(project, "same", title="first of two files named same.yaml")
    [one] = ingestor.ingest()
    first.write_text("title: second, same file name, other content\n")
    [two] = ingestor.ingest()
    assert (one.metadata["ticket"], two.metadata["ticket"]) == ("claimed/same.yaml",
                                                                 "claimed/same.1.yaml")
    ticket(project, "again", id="C", title="C dropped again")
    assert ingestor.ingest() == []
    assert any("a task with id 'C' already exists (from claimed/c.yaml)" in m
               for m in _events(project))

    from console.engine.backlog import close_ticket

    store.on_change(lambda task: close_ticket(store.paths, task))
    assert cancel(store, two.id, "not needed").ok
    closed = project / ".sdd/backlog/closed"
    assert (closed / "same.1.yaml").exists() and not (closed / "same.yaml").exists()
    store.transition("C", TaskState.CLAIMED)
    store.transition("C", TaskState.DONE, reason="ok")
    refused = escalate(store, "C")
    assert not refused.ok and "only a task that will run again" in refused.message


def test_a_dead_end_is_named_down_the_chain(project: Path) -> None:
    ticket(project, "a", id="A", title="a")
    ticket(project, "b", id="B", title="b", depends_on=["A"])
    ticket(project, "c", id="C", title="c", depends_on=["B"])
    ingestor, store = _ingestor(project)
    ingestor.ingest()
    store.transition("A", TaskState.CLAIMED)
    store.transition("A", TaskState.FAILED, reason="boom")
    reconcile_blocked(store)  # each names its nearest link, as Bernstein 3.23.0 does
    assert (store.get("B").status, store.get("B").result_summary) == (
        "blocked_by_failed_dep", "dependency A is failed")
    assert (store.get("C").status, store.get("C").result_summary) == (
        "blocked_by_failed_dep", "dependency B is blocked_by_failed_dep")
    assert store.get("C").metadata["blocking_task_id"] == "B"


def test_a_dependant_of_an_abandoned_task_is_blocked_by_abandon(project: Path) -> None:
    ticket(project, "a", id="A", title="a")
    ticket(project, "b", id="B", title="b", depends_on=["A"])
    ingestor, store = _ingestor(project)
    ingestor.ingest()
    abandoned = dict(encode_task(store.get("A")), status="abandoned")  # Bernstein 3.23.0 wrote
    append(project / ".sdd/runtime/tasks.jsonl", abandoned)
    store.load()
    reconcile_blocked(store)
    assert (store.get("B").status, store.get("B").result_summary) == (
        "blocked_by_abandon", "upstream A abandoned")
    assert reconcile_blocked(store) == []  # settled: nothing is written again


def test_tickets_of_one_pass_keep_file_order(project: Path) -> None:
    for name in ("05", "01", "03", "02", "04"):
        ticket(project, f"t{name}", title=f"task {name}")
    ingestor, store = _ingestor(project)
    ingestor.ingest()
    order = sorted(store.tasks.values(), key=lambda t: (t.priority, t.created_at, t.id))
    assert [t.title for t in order] == [f"task {n}" for n in ("01", "02", "03", "04", "05")]


def test_a_waiting_task_from_an_older_engine_is_reopened_and_not_run_early(
        project: Path) -> None:
    """A plain `blocked` task waiting on a dependency (what earlier builds wrote) becomes
    open with its reason; it is claimable only once the dependency is done."""
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("A", "open", title="first"),
           task_record("B", "blocked", title="second", depends_on=["A"]))
    store = _store(project)
    reconcile_blocked(store)
    assert (store.get("B").status, store.get("B").result_summary) == ("open", "waiting for A")
    store.transition("A", TaskState.CLAIMED)
    store.transition("A", TaskState.DONE)
    reconcile_blocked(store)
    assert (store.get("B").status, store.get("B").result_summary) == ("open", None)


def test_a_retry_under_a_new_id_satisfies_the_originals_dependants(project: Path) -> None:
    """Bernstein retries a failed task as a NEW task naming the original in
    `metadata.original_task_id` / `retry_of` (its `satisfied_dependency_ids`): while the
    retry runs the dependant is not stranded, and once it is done the dependant may run."""
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           task_record("F1", "failed", title="first try"),
           task_record("F2", "open", title="the retry", metadata={"original_task_id": "F1"}),
           task_record("B1", "blocked_by_failed_dep", title="needs F1", depends_on=["F1"],
                       result_summary="dependency F1 is failed",
                       metadata={"blocking_task_id": "F1"}))
    store = _store(project)
    reconcile_blocked(store)
    waiting = store.get("B1")  # stranded on F1, whose retry is still open: it waits
    assert (waiting.status, waiting.result_summary) == ("blocked_by_failed_dep",
                                                        "waiting for F1")
    store.transition("F2", TaskState.CLAIMED)
    store.transition("F2", TaskState.DONE)
    reconcile_blocked(store)
    assert (store.get("B1").status, store.get("B1").result_summary) == ("open", None)
    assert satisfied(store, "F1") and not satisfied(store, "B1")
