"""A .sdd/ written by the real Bernstein 3.23.0 (tests/fixtures/make_bernstein_fixture.sh)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import REPO, run_cli

FIXTURE = REPO / "tests" / "fixtures" / "bernstein-3.23.0"


def test_status_matches_the_servers_own_counts(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(FIXTURE, project)
    expected = json.loads((FIXTURE / "expected.json").read_text())
    server = json.loads((FIXTURE / "server_counts.json").read_text())
    result = run_cli("-C", str(project), "status", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["problems"] == []
    assert summary["tasks"]["total"] == server["total"] == expected["total"]
    assert summary["tasks"]["by_state"] == expected["by_state"]
    assert summary["tasks"]["by_state"] == {k: v for k, v in server.items()
                                            if k != "total" and v}
    assert summary["proposals"]["pending_ids"] == expected["pending_proposals"]
    assert summary["proposals"]["pending"] == len(expected["pending_proposals"])


def test_every_task_matches_the_servers_task_list(tmp_path: Path) -> None:
    from console.sdd.source import LocalSource

    source = LocalSource(FIXTURE)
    source.load()
    server_tasks = json.loads((FIXTURE / "server_tasks.json").read_text())
    assert {t["id"]: (t["title"], t["status"], t["priority"], t["retry_count"])
            for t in server_tasks} == {
        t.id: (t.title, t.status, t.priority, t.retry_count)
        for t in source.state.tasks.values()}
    assert source.state.chains and source.state.gate_counts
