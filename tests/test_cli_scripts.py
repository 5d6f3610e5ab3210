"""#19.8: a CLI fit for scripts — unique id prefixes wherever an id is, and
`run --until-idle` exiting 1 when tasks failed (`--exit-zero` keeps 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.sdd.ids import AmbiguousId, resolve_id
from tests.conftest import append, run_cli, task_record
from tests.engine_kit import make_repo, tasks, ticket

IDS = ("T1", "T10", "AB-123", "AB-124", "EVO-20261124-3f2a9b1c", "EVO-20261124-77aa0000")


@pytest.mark.parametrize(("given", "meant"), [
    ("T1", "T1"),  # an exact id wins over the longer ids it begins
    ("T10", "T10"),
    ("AB-123", "AB-123"),
    ("AB-124", "AB-124"),
    ("EVO-20261124-3", "EVO-20261124-3f2a9b1c"),  # a prefix
    ("3f2a", "EVO-20261124-3f2a9b1c"),  # a part after a dash, as a short git hash
    ("77", "EVO-20261124-77aa0000"),
    ("nothing-like-it", "nothing-like-it"),  # unknown: left for the action to refuse
])
def test_an_id_or_a_unique_prefix_names_one(given: str, meant: str) -> None:
    assert resolve_id(given, IDS, "task") == meant


@pytest.mark.parametrize("given", ["T", "AB-12", "EVO", "EVO-20261124-", "12"])
def test_an_ambiguous_prefix_names_what_it_matches(given: str) -> None:
    with pytest.raises(AmbiguousId) as caught:
        resolve_id(given, IDS, "task")
    message = str(caught.value)
    assert "ambiguous" in message and "give more of it" in message
    assert "\n" not in message


def test_the_cli_takes_a_unique_prefix_and_refuses_an_ambiguous_one(project: Path) -> None:
    log = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(log, task_record("API-7f3e21", "open"),
           task_record("API-7f9000", "failed", retry_count=0),
           task_record("DOCS-1", "failed", retry_count=0))
    by_prefix = run_cli("-C", str(project), "retry", "DOCS")
    assert by_prefix.returncode == 0, by_prefix.stderr
    assert tasks(project)["DOCS-1"].status == "open"
    by_part = run_cli("-C", str(project), "cancel", "7f3", "--reason", "dropped")
    assert by_part.returncode == 0, by_part.stderr
    assert tasks(project)["API-7f3e21"].status == "cancelled"
    ambiguous = run_cli("-C", str(project), "retry", "API-7f")
    assert ambiguous.returncode == 2
    assert "ambiguous" in ambiguous.stderr and "API-7f3e21" in ambiguous.stderr \
        and "API-7f9000" in ambiguous.stderr
    assert tasks(project)["API-7f9000"].status == "failed"  # nothing was done
    unknown = run_cli("-C", str(project), "retry", "ZZZ")
    assert unknown.returncode == 1 and "ZZZ" in unknown.stderr


def test_run_until_idle_exits_1_when_a_task_failed(tmp_path: Path, monkeypatch) -> None:
    root = make_repo(tmp_path)
    monkeypatch.setenv("SPEC_AGENT_LOG", str(tmp_path / "agent.log"))
    ticket(root, "ok", id="OK", title="Writes", description="write out/ok.txt yes")
    ticket(root, "bad", id="BAD", title="Fails", description="exit 5", max_retries=0)
    failed = run_cli("-C", str(root), "run", "--until-idle", timeout=300)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "1 task failed: BAD" in failed.stderr and "--exit-zero" in failed.stderr
    assert tasks(root)["OK"].status == "done" and tasks(root)["BAD"].status == "failed"
    kept = run_cli("-C", str(root), "run", "--until-idle", "--exit-zero", timeout=300)
    assert kept.returncode == 0, kept.stdout + kept.stderr
