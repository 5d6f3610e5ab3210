"""The SLA monitor with a real engine: warning, violation, fail action, met."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.engine_kit import assert_idle_exit, make_repo, tasks, ticket
from tests.llm_server import llm_server


def _run(root: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                             "--until-idle", "--workers", "2"], capture_output=True, text=True,
                            timeout=300)
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)


def _events(root: Path) -> list[tuple[str, str]]:
    path = root / ".sdd" / "metrics" / "sla_events.jsonl"
    return [(r["entity_id"], r["event"]) for r in map(json.loads, path.read_text().splitlines())]


def test_warning_then_violation_and_met(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="sla: {check_interval: 1}\n")
    ticket(root, "slow", id="SLOW", title="Too slow", scope="small", complexity="low",
           sla_minutes=0.05, description="sleep 5\nwrite out/slow.txt late")
    ticket(root, "fast", id="FAST", title="In time", scope="small", complexity="low",
           sla_minutes=1, description="write out/fast.txt ok")
    _run(root)
    events = _events(root)
    slow = [e for task, e in events if task == "SLOW"]
    assert slow == ["sla:warning", "sla:violated"]
    assert [e for task, e in events if task == "FAST"] == ["sla:met"]
    assert tasks(root)["SLOW"].status == "done"  # notify: the work still counts
    records = {(r["entity_id"], r["event"]): r for r in map(
        json.loads, (root / ".sdd/metrics/sla_events.jsonl").read_text().splitlines())}
    violated = records[("SLOW", "sla:violated")]
    assert violated["overdue_ms"] >= 0 and violated["entity_type"] == "task"
    assert violated["deadline"] == tasks(root)["SLOW"].deadline
    assert records[("FAST", "sla:met")]["margin_ms"] > 0
    summary = json.loads(subprocess.run([sys.executable, "-m", "console", "-C", str(root),
                                         "status", "--json"], capture_output=True,
                                        text=True).stdout)
    assert summary["sla"] == {"warning": 0, "violated": 1, "met": 1}


def test_violation_action_fail_stops_the_task_at_once(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="sla: {check_interval: 1, violation_action: fail}\n")
    ticket(root, "slow", id="SLOW", title="Too slow", scope="small", complexity="low",
           sla_minutes=0.05, description="sleep 5\nwrite out/slow.txt late")
    _run(root)
    task = tasks(root)["SLOW"]
    assert task.status == "failed"
    assert task.result_summary.startswith("SLA violated: deadline passed")
    assert task.result_summary.endswith("(violation_action: fail)")
    assert len(task.metadata.get("chain") or []) <= 1  # no retry, no escalation
    assert _events(root) == [("SLOW", "sla:warning"), ("SLOW", "sla:violated")]


def test_warning_and_violation_go_to_their_channels(tmp_path: Path) -> None:
    """warningChannels / violationChannels as seed 003 names them: each webhook URL gets
    the event's record (console is the engine notice; an unknown name is said once)."""
    with llm_server(lambda body, number: (200, "received")) as (url, seen):
        hooks = url.replace("/v1", "")
        config = (f"sla:\n  check_interval: 1\n  warningChannels: [console, '{hooks}/warn']"
                  f"\n  violation_channels: ['{hooks}/page', pagerduty]\n")
        root = make_repo(tmp_path, config=config)
        ticket(root, "slow", id="SLOW", title="Too slow", scope="small", complexity="low",
               sla_minutes=0.05, description="sleep 5\nwrite out/slow.txt late")
        _run(root)
    posted = sorted((body["entity_id"], body["event"]) for body in seen)
    assert posted == [("SLOW", "sla:violated"), ("SLOW", "sla:warning")], seen
    violated = next(b for b in seen if b["event"] == "sla:violated")
    assert violated["entity_type"] == "task" and violated["overdue_ms"] >= 0
    events = (root / ".sdd/runtime/engine_events.jsonl").read_text()
    assert events.count("notify channel 'pagerduty' is not console or a URL") == 1
    assert "webhook" not in events  # delivered, no failure logged
