"""Gaps a review of #15/#16 found, each reproduced as a hostile project would: a link or a
FIFO where the engine writes, reads or removes things; a path in a tool's output; a role
from data naming a template; YAML nested deep enough to overflow libyaml's stack."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from console.engine.evolution import analyse
from console.engine.gates.digest import _source_line
from console.sdd.paths import SddPaths
from console.sdd.safe_yaml import YamlLimitError, load_yaml
from tests.conftest import append, run_cli, task_record
from tests.engine_kit import git, make_repo
from tests.security.test_confine_paths import _intact, _victim


def test_a_linked_git_worktrees_dir_loses_the_operator_nothing(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    root = make_repo(tmp_path)
    (root / ".git" / "worktrees").symlink_to(victim)
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and ".git/worktrees is a symbolic link" in lines[0]
    _intact(victim)  # git's own `worktree prune` deletes files wherever the link points


def test_a_linked_engine_lock_is_never_written_through(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    root = make_repo(tmp_path)
    append(root / ".sdd" / "runtime" / "tasks.jsonl", task_record("T1", "open"))
    lock = root / ".sdd" / "runtime" / "engine.lock"
    lock.symlink_to(victim / "precious.txt")
    for args in (("cancel", "T1"), ("run", "--until-idle")):
        result = run_cli("-C", str(root), *args, timeout=120)
        assert result.returncode in (1, 2), result
        assert "engine.lock" in result.stderr and "symbolic link" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    _intact(victim)


def test_a_fifo_engine_lock_hangs_nothing(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    append(root / ".sdd" / "runtime" / "tasks.jsonl", task_record("T1", "open"))
    os.mkfifo(root / ".sdd" / "runtime" / "engine.lock")
    result = run_cli("-C", str(root), "cancel", "T1", timeout=60)
    assert result.returncode == 1 and "not a regular file" in result.stderr


def test_planted_pid_files_cost_no_memory_and_hang_nothing(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    pids = root / ".sdd" / "runtime" / "pids"
    pids.mkdir(parents=True, exist_ok=True)
    (pids / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(pids / "fifo.json")
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 0, result.stderr


def test_approve_writes_its_patch_through_no_committed_link(tmp_path: Path) -> None:
    from tests.test_evolution import _propose, make_project

    root = make_project(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (root / ".bernstein-tui-proposal.diff").symlink_to(victim)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "link")
    pid = _propose(root, "Format first", "bernstein.yaml",
                   (root / "bernstein.yaml").read_text() + "# approved\n")
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "approve",
                             pid, "--reason", "ok"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert victim.read_text() == "keep me\n"
    results = root / ".sdd" / "evolution" / "results.tsv"
    assert results.exists() and not results.is_symlink()


def test_results_tsv_is_never_appended_through_a_link(tmp_path: Path) -> None:
    from console.sdd.confine import UnsafePath
    from console.sdd.evolution_results import append_result

    root = tmp_path / "p"
    (root / ".sdd" / "evolution").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (root / ".sdd" / "evolution" / "results.tsv").symlink_to(victim)
    with pytest.raises(UnsafePath, match="symbolic link"):
        append_result(SddPaths(root), "EVO-1", "abc", 1.0)
    assert victim.read_text() == "keep me\n"


def test_a_digest_quotes_no_file_outside_the_project(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "ok.py").write_text("x = 1\nboom()\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=sk-canary\n")
    (root / "link.py").symlink_to(secret)
    os.mkfifo(root / "fifo.py")
    assert _source_line(root, "ok.py", 2) == "boom()"
    assert _source_line(root, str(root / "ok.py"), 1) == "x = 1"
    quoted: list[str] = []

    def read() -> None:
        for name in (str(secret), "../secret.txt", "link.py", "fifo.py", "/dev/zero"):
            quoted.append(_source_line(root, name, 1))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(20)
    assert not reader.is_alive() and quoted == [""] * 5


def test_a_role_from_data_names_no_template_outside_the_project(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "templates" / "roles").mkdir(parents=True)
    outside = tmp_path / "v3"
    outside.mkdir()
    (outside / "system_prompt.md").write_text("SECRET-123\n")
    role = "../" * 12 + str(outside).lstrip("/")
    append(root / ".sdd" / "metrics" / "cascade_chains.jsonl", *[
        {"task_id": f"t{i}", "role": role, "final_success": False,
         "attempts": [{"model": "haiku", "success": False, "escalation_reason": "x"}]}
        for i in range(6)])
    proposals = analyse(SddPaths(root))
    assert not any("SECRET-123" in (p.diff or "") for p in proposals)
    assert not any(role in " ".join(p.target_files) for p in proposals)


def test_yaml_nested_past_the_limit_is_refused_not_a_crash(tmp_path: Path) -> None:
    deep = "extra: " + "[" * 50_000 + "]" * 50_000 + "\n"
    try:
        load_yaml(deep)
    except YamlLimitError as exc:
        assert "nested more than 100 deep" in str(exc)
    else:
        raise AssertionError("a 50,000-deep document was loaded")
    from console.sdd.skeleton import init_project

    init_project(tmp_path)
    (tmp_path / ".sdd" / "backlog" / "open" / "deep.yaml").write_text("title: t\n" + deep)
    result = run_cli("-C", str(tmp_path), "status", "--json", timeout=60)
    assert result.returncode == 0, (result.returncode, result.stderr[-500:])
    assert "nested more than 100 deep" in result.stdout


def test_missions_that_notify_urls_are_part_of_what_is_trusted(tmp_path: Path) -> None:
    from console.sdd.trust import check, trust

    root = make_repo(tmp_path)
    assert check(root).trusted
    missions = root / ".sdd" / "missions"
    missions.mkdir(parents=True, exist_ok=True)
    (missions / "m.yaml").write_text("name: m\nnotifyChannels: [http://127.0.0.1:9/x]\n")
    status = check(root)
    assert not status.trusted and ".sdd/missions/ changed since you trusted it" in status.reason
    trust(root)
    assert check(root).trusted
