"""LocalSource + State: incremental application, resets, directory kinds, derived views."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.sdd.paths import Kind
from console.sdd.source import LocalSource
from tests.conftest import append, task_record


def test_appended_line_is_applied_without_rereading(project: Path) -> None:
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, *(task_record(f"t{i}") for i in range(500)))
    source = LocalSource(project)
    source.load()
    read_before = source.tails[Kind.TASKS].bytes_read
    append(tasks, task_record("t7", "claimed"))
    delta = source.refresh([tasks])
    assert list(delta.upserts) == ["t7"] and delta.upserts["t7"].status == "claimed"
    assert source.tails[Kind.TASKS].bytes_read - read_before == len(
        json.dumps(task_record("t7", "claimed")) + "\n")
    assert source.state.tasks["t7"].status == "claimed"
    assert len(source.state.tasks) == 500


def test_truncated_task_log_removes_rows_then_refills(project: Path) -> None:
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("a"), task_record("b"), "garbage\n")
    source = LocalSource(project)
    source.load()
    assert len(source.state.problems) == 1
    tasks.write_text(json.dumps(task_record("c", "done")) + "\n")
    delta = source.refresh([tasks])
    assert delta.removed == {"a", "b"} and list(delta.upserts) == ["c"]
    assert set(source.state.tasks) == {"c"}
    assert source.state.problems == []  # the garbage line went with the old file
    tasks.unlink()
    delta = source.refresh([tasks])
    assert delta.removed == {"c"} and source.state.tasks == {}


def test_gate_reports_and_tickets_follow_their_directories(project: Path) -> None:
    sdd = project / ".sdd"
    report = sdd / "runtime" / "gates" / "t1.json"
    report.write_text(json.dumps({"task_id": "t1", "results": [
        {"name": "lint", "status": "pass", "required": True}]}))
    ticket = sdd / "backlog" / "open" / "one.yaml"
    ticket.write_text("title: One\n")
    source = LocalSource(project)
    source.load()
    assert source.state.gate_reports["t1"].overall_pass is True
    assert [t.title for t in source.state.tickets.values()] == ["One"]

    ticket.write_text("no title here\n")
    source.refresh([ticket])
    assert source.state.tickets == {}
    assert [p.file for p in source.state.problems] == [".sdd/backlog/open/one.yaml"]
    ticket.unlink()
    report.unlink()
    delta = source.poll()  # no event paths at all: the listing notices both
    assert "backlog" in delta.sections and "gates" in delta.sections
    assert source.state.problems == [] and source.state.gate_reports == {}


def test_poll_reads_only_the_directory_files_that_changed(project: Path) -> None:
    gates = project / ".sdd" / "runtime" / "gates"

    def report(task_id: str, status: str) -> None:
        (gates / f"{task_id}.json").write_text(json.dumps({"task_id": task_id, "results": [
            {"name": "lint", "status": status, "required": True}]}))

    for index in range(30):
        report(f"t{index}", "pass")
    source = LocalSource(project)
    reads: list[str] = []
    original = source._read_gate_report

    def counting(path: Path):  # type: ignore[no-untyped-def]
        reads.append(path.name)
        return original(path)

    source._read_gate_report = counting  # type: ignore[method-assign]
    source.load()
    assert len(reads) == 30
    reads.clear()
    assert not source.poll() and reads == []  # nothing changed: nothing read
    report("t3", "fail")  # rewritten in place, no event: the poll sees size/mtime move
    os.utime(gates / "t3.json", ns=(1, 1))
    report("t30", "pass")
    (gates / "t5.json").unlink()
    delta = source.poll()
    assert sorted(reads) == ["t3.json", "t30.json", "t5.json"] and "gates" in delta.sections
    assert source.state.gate_reports["t3"].results[0].status == "fail"
    assert "t30" in source.state.gate_reports and "t5" not in source.state.gate_reports
    assert len(source.state.gate_reports) == 30


def test_pending_proposals_follow_bernsteins_review_rule(project: Path) -> None:
    evo = project / ".sdd" / "evolution"

    def decision(pid: str, outcome: str, requires_human: bool) -> dict[str, object]:
        return {"proposal_id": pid, "risk_level": "logic", "confidence": 0.8,
                "outcome": outcome, "reason": "r", "requires_human": requires_human,
                "decided_at": 1.0, "reviewer": None}

    append(evo / "decisions.jsonl",
           decision("P1", "human_review_4h", True),
           decision("P2", "human_review_immediate", True),
           decision("P3", "blocked", True),
           decision("P4", "auto_approved", False),
           decision("P1", "auto_approved", False))  # a later approval clears P1
    append(evo / "deferred.jsonl",
           {"proposal_id": "P5", "title": "t", "category": "c", "description": "d",
            "confidence": 0.7, "reason": "r", "deferred_at": 2.0})
    source = LocalSource(project)
    source.load()
    assert source.state.pending_proposals() == ["P2", "P3", "P5"]


def test_every_metrics_kind_is_read(project: Path) -> None:
    metrics = project / ".sdd" / "metrics"
    append(metrics / "reflections.jsonl", {
        "task_id": "t1", "iteration": 1, "model": "haiku", "gate": "lint",
        "error_pattern": "F401 a.py:1", "digest": "a.py:1 F401", "source": "rules",
        "diagnosis": {"what_failed": "lint", "why": "unused import", "try_next": "remove it",
                      "focus": "a.py"}, "files_changed": ["a.py"], "reused": False})
    append(metrics / "reviews.jsonl", {
        "task_id": "t1", "scores": [{"judge": "j1", "dimension": "correctness", "score": 4}],
        "merged": {"correctness": 4}, "global_score": 4.0, "threshold": 3.0, "passed": True})
    append(metrics / "sla_events.jsonl",
           {"event": "sla:warning", "entity_id": "t1", "entity_type": "task", "deadline": 10},
           {"event": "sla:violated", "entity_id": "t1", "entity_type": "task", "deadline": 10,
            "overdue_ms": 5},
           {"event": "sla:warning", "entity_id": "t2", "entity_type": "task", "deadline": 10})
    append(metrics / "phase_gates.jsonl",
           {"event": "quality:gate:failed", "mission_id": "m", "gate_name": "g", "reason": "x"})
    append(metrics / "tasks.jsonl", {
        "timestamp": 1.0, "task_id": "t1", "role": "backend", "model": "sonnet",
        "provider": "claude", "duration_seconds": 9.5, "cost_usd": 0.4, "janitor_passed": True})
    source = LocalSource(project)
    source.load()
    state = source.state
    assert state.reflections["t1"][0].why == "unused import"
    assert state.reviews["t1"][0].merged["correctness"] == 4.0
    assert {k: v.event for k, v in state.sla_latest.items()} == {
        "t1": "sla:violated", "t2": "sla:warning"}
    assert state.phase_events[0].gate_name == "g"
    assert state.task_metrics["t1"].cost_usd == 0.4
    assert state.problems == []


def test_a_tasks_chains_follow_adds_ids_written_again_and_truncation(project: Path) -> None:
    """`chains_of` (the index a task's detail reads) says what a scan of every chain says,
    from the first ask on: new chains, a chain id written again for another task, and
    the file truncated and written anew."""
    path = project / ".sdd" / "metrics" / "cascade_chains.jsonl"

    def chain(chain_id: str, task_id: str, cost: float) -> dict[str, object]:
        return {"chain_id": chain_id, "task_id": task_id, "role": "backend",
                "attempts": [{"model": "haiku", "attempt_number": 0, "success": True}],
                "final_model": "haiku", "succeeded": True, "total_cost_usd": cost}

    source = LocalSource(project)

    def agrees() -> None:
        state = source.state
        for task_id in ("t1", "t2", "t3"):
            scanned = [c for c in state.chains.values() if c.task_id == task_id]
            assert sorted(state.chains_of(task_id), key=lambda c: c.chain_id) == sorted(
                scanned, key=lambda c: c.chain_id)

    append(path, chain("c1", "t1", 1.0), chain("c2", "t1", 2.0), chain("c3", "t2", 3.0))
    source.load()
    agrees()  # (the index is built here)
    append(path, chain("c4", "t2", 4.0), chain("c1", "t3", 5.0))  # c1 now t3's
    delta = source.refresh([path])
    assert {"t1", "t2", "t3"} <= delta.touched  # (t1 lost c1: its detail is redrawn)
    assert [c.chain_id for c in source.state.chains_of("t1")] == ["c2"]
    agrees()
    path.write_text(json.dumps(chain("c9", "t2", 9.0)) + "\n")  # truncated, rewritten
    source.refresh([path])
    assert [c.chain_id for c in source.state.chains_of("t2")] == ["c9"]
    assert source.state.chains_of("t1") == []
    agrees()


def test_load_streams_tasks_first(project: Path) -> None:
    sdd = project / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl", task_record("t1"))
    append(sdd / "metrics" / "quality_gates.jsonl", *({
        "task_id": "t1", "gate": "lint", "status": "pass"} for _ in range(10)))
    steps = []
    LocalSource(project).load(on_step=steps.append)
    assert list(steps[0].upserts) == ["t1"]
    assert any("gates" in step.sections for step in steps[1:])


def test_missing_sdd_is_empty_not_an_error(tmp_path: Path) -> None:
    source = LocalSource(tmp_path)
    assert not source.exists
    delta = source.load()
    assert not delta and source.state.problems == []
    os.makedirs(tmp_path / ".sdd" / "runtime")
    append(tmp_path / ".sdd" / "runtime" / "tasks.jsonl", task_record("x"))
    assert "x" in source.poll().upserts


def test_state_counts_follow_every_change(project: Path) -> None:
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("a"), task_record("b"), task_record("a", "failed"))
    source = LocalSource(project)
    source.load()
    assert source.state.state_counts() == {"open": 1, "failed": 1}
    append(tasks, task_record("b", "done"), task_record("a", "open"))
    source.refresh([tasks])
    assert source.state.state_counts() == {"open": 1, "done": 1}
    tasks.write_text("")
    source.refresh([tasks])
    assert source.state.state_counts() == {}


def test_review_findings_on_records_and_idle_polls(project: Path) -> None:
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("a"), task_record("b", claimed_at=10 ** 400), task_record("c"))
    (project / ".sdd" / "runtime" / "gates" / "a.json").write_text(
        json.dumps({"task_id": "a", "results": []}))
    (project / ".sdd" / "backlog" / "open" / "t.yaml").write_text("title: T\n")
    source = LocalSource(project)
    source.load()
    assert set(source.state.tasks) == {"a", "c"}
    [problem] = source.state.problems
    assert problem.line == 2 and "number too large" in problem.reason
    assert not source.poll()  # nothing changed: an idle poll reports nothing
    assert not source.poll()
    (project / ".sdd" / "backlog" / "open" / "t.yaml").write_text("title: Changed title\n")
    assert "backlog" in source.poll().sections


def test_engine_status_file_is_followed_and_a_broken_one_is_a_problem(project: Path) -> None:
    status = project / ".sdd" / "runtime" / "engine_status.json"
    source = LocalSource(project)
    source.load()
    assert source.state.engine_status is None and not source.poll()
    status.write_text(json.dumps({"pid": 42, "workers": 4, "busy": 1, "paused": False,
                                  "running": True, "base": "main"}))
    assert "engine_status" in source.refresh([status]).sections
    assert (source.state.engine_status.workers, source.state.engine_status.busy) == (4, 1)
    assert not source.poll()  # unchanged: nothing to repaint
    status.write_text(json.dumps({"pid": 42, "workers": "four"}))
    delta = source.refresh([status])
    assert {"engine_status", "problems"} <= delta.sections
    assert source.state.engine_status is None
    [problem] = source.state.problems
    assert problem.file == ".sdd/runtime/engine_status.json" and "workers" in problem.reason
    status.unlink()
    assert "problems" in source.poll().sections and source.state.problems == []


def test_a_long_task_log_streams_in_steps_and_the_last_record_wins(project: Path) -> None:
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, *(task_record(f"t{i:05d}", "open", description="x" * 200)
                    for i in range(3000)))
    append(tasks, task_record("t00000", "done"))
    steps = []
    source = LocalSource(project)
    source.load(on_step=steps.append)
    task_steps = [s for s in steps if s.upserts]
    assert len(task_steps) >= 2  # the first rows came before the whole log was read
    assert len(task_steps[0].upserts) < 3000 and task_steps[0].upserts["t00000"].status == "open"
    assert source.state.tasks["t00000"].status == "done" and len(source.state.tasks) == 3000


def test_a_long_load_waits_for_the_first_paint_then_streams_on(project: Path,
                                                               monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Past HOLD_IF_LEFT_BYTES still to read, the load hands over its first step and
    waits until the console says those rows are on screen (or HOLD_FOR_PAINT_S)."""
    import threading
    import time

    from console.sdd import source as source_module

    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, *(task_record(f"t{i:05d}", "open", description="x" * 200)
                    for i in range(3000)))
    monkeypatch.setattr(source_module, "HOLD_IF_LEFT_BYTES", 100_000)
    monkeypatch.setattr(source_module, "HOLD_FOR_PAINT_S", 30.0)
    source = LocalSource(project)
    steps: list[int] = []
    loader = threading.Thread(target=source.load,
                              kwargs={"on_step": lambda d: steps.append(len(d.upserts))})
    loader.start()
    deadline = time.monotonic() + 10
    while not steps and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert len(steps) == 1 and 0 < steps[0] < 3000  # the first step only, then it waits
    assert not source.loaded.is_set()
    source.shown.set()  # what the console does after the first rows' repaint
    loader.join(10)
    assert source.loaded.is_set() and len(source.state.tasks) == 3000

    monkeypatch.setattr(source_module, "HOLD_FOR_PAINT_S", 0.2)
    nobody = LocalSource(project)  # nobody says "shown": the load goes on by itself
    started = time.monotonic()
    nobody.load(on_step=lambda d: None)
    assert len(nobody.state.tasks) == 3000 and time.monotonic() - started >= 0.2
    small = LocalSource(project)  # nothing big left: no wait at all
    monkeypatch.setattr(source_module, "HOLD_IF_LEFT_BYTES", 1 << 30)
    monkeypatch.setattr(source_module, "HOLD_FOR_PAINT_S", 30.0)
    small.load(on_step=lambda d: None)
    assert small.loaded.is_set()
