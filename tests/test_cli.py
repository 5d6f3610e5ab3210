"""The command line: init, status, usage errors, packaging."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO, append, run_cli, task_record


def test_init_creates_the_skeleton_and_never_overwrites(tmp_path: Path) -> None:
    first = run_cli("-C", str(tmp_path), "init")
    assert first.returncode == 0, first.stderr
    assert (tmp_path / ".sdd" / "backlog" / "open").is_dir()
    assert (tmp_path / ".sdd" / "runtime" / "gates").is_dir()
    config = tmp_path / "bernstein.yaml"
    assert "quality_gates:" in config.read_text()
    config.write_text("goal: mine\n")
    second = run_cli("-C", str(tmp_path), "init")
    assert second.returncode == 0
    assert "nothing changed" in second.stdout
    assert config.read_text() == "goal: mine\n"


def test_status_on_an_empty_sdd(project: Path) -> None:
    result = run_cli("-C", str(project), "status", "--json")
    assert result.returncode == 0
    summary = json.loads(result.stdout)
    assert summary["tasks"] == {"total": 0, "by_state": {}}
    assert summary["problems"] == []
    for key in ("gates", "chains", "reflections", "proposals", "sla"):
        assert key in summary


def test_status_table_shows_glyph_and_word(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("a", "failed"),
           task_record("b", "done"))
    result = run_cli("-C", str(project), "status")
    assert result.returncode == 0
    assert "✗ failed" in result.stdout and "✓ done" in result.stdout
    assert "problems: none" in result.stdout


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = run_cli("-C", str(tmp_path / "nope"), "status")
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"bernstein-tui: -C {tmp_path / 'nope'}: no such directory"
    no_sdd = run_cli("-C", str(tmp_path), "status", "--json")
    assert no_sdd.returncode == 2 and no_sdd.stdout == ""
    assert len(no_sdd.stderr.strip().splitlines()) == 1 and "no .sdd/" in no_sdd.stderr
    assert "Traceback" not in missing.stderr + no_sdd.stderr
    bad = run_cli("frobnicate")
    assert bad.returncode == 2
    assert run_cli("--version").stdout.startswith("bernstein-tui ")


def test_wheel_ships_the_stylesheets_and_finds_them_installed(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(REPO)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("bernstein_tui-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {"console/styles/base.tcss", "console/styles/main.tcss"} <= set(names)
    assert "console/cli/__init__.py" in names
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
         str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = subprocess.run(
        [sys.executable, "-c", "from console.tui.styles import styles_dir; print(styles_dir())"],
        capture_output=True, text=True, cwd=elsewhere, env={"PYTHONPATH": str(site)})
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == site / "console" / "styles"


def test_pause_without_a_running_engine_is_refused_with_the_reason(project: Path) -> None:
    result = run_cli("-C", str(project), "pause")
    assert result.returncode == 1
    assert result.stderr.strip() == ("pause: no engine runs this project, "
                                     "so nothing is dispatching")


def test_proposals_at_80_columns_never_cut_the_id_approve_needs(tmp_path: Path) -> None:
    """#19.8: the id column is never wrapped or truncated, so it can be copied into
    `approve`, however narrow the terminal."""
    from console.engine.evolution import Proposal, record_proposal, unified_diff
    from console.sdd.paths import SddPaths

    root = tmp_path / "p"
    (root / ".sdd").mkdir(parents=True)
    pid = "EVO-20261124-0123456789abcdef"
    record_proposal(SddPaths(root), Proposal(pid, "A title long enough to need folding " * 3,
                                             "policy_update", "why", 0.8, ("bernstein.yaml",),
                                             unified_diff("bernstein.yaml", "a\n", "b\n")),
                    "human_review_4h", "L2 — review")
    done = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "proposals"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert pid in done.stdout  # whole, on one line
