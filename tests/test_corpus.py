"""The bad-input corpus: `status` keeps going, names every bad record, counts every good one."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.sdd.skeleton import init_project
from tests.conftest import append, run_cli, task_record

GOOD_GATE = {"timestamp": "2026-01-01T00:15:10.381204+00:00", "task_id": "t1", "gate": "lint",
             "result": "pass", "status": "pass", "duration_ms": 1840, "cached": False,
             "required": True}


def build_corpus(root: Path) -> dict[tuple[str, int | None], str]:
    """Write the corpus; return the expected problems as (file, line) → reason prefix."""
    init_project(root)
    sdd = root / ".sdd"
    tasks = sdd / "runtime" / "tasks.jsonl"
    append(
        tasks,
        task_record("t1", "open"),                                    # 1
        "{not json}\n",                                               # 2
        b'{"id": "bad-utf8", "title": "\xff\xfe", "status": "open"}\n',  # 3
        os.urandom(64).replace(b"\n", b" ") + b"\n",                   # 4 binary junk
        task_record("t2", "failed"),                                  # 5
        json.dumps({"blob": "x" * (10 * 1024 * 1024)}) + "\n",        # 6 a 10 MB line
        {"title": "no id", "status": "open"},                         # 7 missing key
        task_record("t3", "teleported"),                              # 8 unknown state: kept
        task_record("t4", "open", priority="urgent"),                 # 9 wrong type
        task_record("t5", "open", depends_on={"a": 1}),               # 10 wrong type
        "[1, 2, 3]\n",                                                # 11 not an object
        task_record("t1", "done"),                                    # 12 last record wins
        task_record("t6", "blocked_by_failed_dep"),                   # 13 a 3.23.0 state
    )
    (sdd / "archive" / "tasks.jsonl").write_bytes(b"")                # an empty file
    gates = sdd / "metrics" / "quality_gates.jsonl"
    append(gates, GOOD_GATE, {**GOOD_GATE, "status": "exploded"}, {**GOOD_GATE, "gate": "tests",
           "status": "fail", "result": "blocked", "duration_ms": "slow"},
           {**GOOD_GATE, "gate": "tests", "status": "fail", "result": "blocked"})
    (sdd / "metrics" / "cascade_chains.jsonl").mkdir()                # a directory, not a file
    append(sdd / "evolution" / "decisions.jsonl",
           {"proposal_id": "UPG-1", "risk_level": "logic", "confidence": 0.8,
            "outcome": "human_review_4h", "reason": "L2", "requires_human": True,
            "decided_at": 1767230000.2, "reviewer": None},
           {"proposal_id": "UPG-2", "risk_level": "logic", "confidence": 7,
            "outcome": "human_review_4h", "requires_human": True})
    reports = sdd / "runtime" / "gates"
    (reports / "t1.json").write_text(json.dumps({
        "task_id": "t1", "overall_pass": False, "total_duration_ms": 10, "gates_run": ["lint"],
        "results": [{"name": "lint", "status": "fail", "required": True, "blocked": True,
                     "cached": False, "duration_ms": 10, "details": "1 error", "metadata": {}}],
        "changed_files": ["a.py"], "cache_hits": 0}))
    (reports / "t2.json").write_text('{"task_id": "t2", "results": [')
    backlog = sdd / "backlog" / "open"
    (backlog / "good.yaml").write_text("title: A good ticket\nrole: qa\n")
    (backlog / "broken.md").write_text("just some words\n")
    (backlog / "binary.yml").write_bytes(b"\x00\x01\x02")
    return {
        (".sdd/runtime/tasks.jsonl", 2): "invalid JSON",
        (".sdd/runtime/tasks.jsonl", 3): "invalid UTF-8",
        (".sdd/runtime/tasks.jsonl", 4): "invalid ",
        (".sdd/runtime/tasks.jsonl", 6): "line is ",
        (".sdd/runtime/tasks.jsonl", 7): "missing required key 'id'",
        (".sdd/runtime/tasks.jsonl", 8): "task t3: unknown state 'teleported'",
        (".sdd/runtime/tasks.jsonl", 9): "field 'priority': expected an integer",
        (".sdd/runtime/tasks.jsonl", 10): "field 'depends_on': expected a list",
        (".sdd/runtime/tasks.jsonl", 11): "expected a JSON object, got list",
        (".sdd/metrics/quality_gates.jsonl", 2):
            "field 'status': 'exploded' is not one of bypassed, fail",
        (".sdd/metrics/quality_gates.jsonl", 3): "field 'duration_ms': expected an integer",
        (".sdd/metrics/cascade_chains.jsonl", None): "is a directory",
        (".sdd/evolution/decisions.jsonl", 2): "field 'confidence': 7.0 is outside 0..1",
        (".sdd/runtime/gates/t2.json", 1): "invalid JSON",
        (".sdd/backlog/open/broken.md", None): "not a ticket",
        (".sdd/backlog/open/binary.yml", None): "binary content",
    }


def test_status_survives_the_corpus(tmp_path: Path) -> None:
    expected = build_corpus(tmp_path)
    result = run_cli("-C", str(tmp_path), "status", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    found = {(p["file"], p["line"]): p["reason"] for p in summary["problems"]}
    assert set(found) == set(expected)
    for key, prefix in expected.items():
        assert found[key].startswith(prefix), (key, found[key])
    assert summary["tasks"]["total"] == 4
    assert summary["tasks"]["by_state"] == {"done": 1, "failed": 1, "blocked_by_failed_dep": 1,
                                            "teleported": 1}
    assert summary["gates"]["by_gate"] == {"lint": {"pass": 1}, "tests": {"fail": 1}}
    assert summary["gates"]["reports"] == 1
    assert summary["proposals"]["pending_ids"] == ["UPG-1"]
    assert summary["backlog"]["open"] == 1
    assert result.stderr == ""

    table = run_cli("-C", str(tmp_path), "status")
    assert table.returncode == 0
    assert "16 record(s) could not be read" in table.stdout
    assert ".sdd/runtime/tasks.jsonl:9: field 'priority'" in " ".join(table.stdout.split())


def test_unreadable_file_is_reported(tmp_path: Path) -> None:
    """Without read permission (root runs the reader with its DAC capabilities dropped)."""
    init_project(tmp_path)
    tasks = tmp_path / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("t1"))
    append(tmp_path / ".sdd" / "archive" / "tasks.jsonl",
           {"task_id": "t0", "title": "old", "role": "qa", "status": "done"})
    tasks.chmod(0)
    try:
        result = run_cli("-C", str(tmp_path), "status", "--json", unprivileged=True)
    finally:
        tasks.chmod(0o644)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["problems"] == [{"file": ".sdd/runtime/tasks.jsonl", "line": None,
                                    "reason": "cannot open: Permission denied"}]
    assert summary["archive"]["total"] == 1


def test_replaced_mid_read_is_read_again_from_the_start(tmp_path: Path) -> None:
    from console.sdd.source import LocalSource

    init_project(tmp_path)
    tasks = tmp_path / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, *(task_record(f"a{i}") for i in range(2000)))
    source = LocalSource(tmp_path)
    tail = source.tails[source.paths.classify(tasks)]  # type: ignore[index]
    first = tail.read(4096)  # a capped read stops part-way through the file
    assert first.more and first.records
    replacement = tmp_path / "new.jsonl"
    append(replacement, task_record("b1", "done"), task_record("b2", "failed"))
    os.replace(replacement, tasks)
    second = tail.read()
    assert second.reset
    assert [r["id"] for _, r in second.records] == ["b1", "b2"]
