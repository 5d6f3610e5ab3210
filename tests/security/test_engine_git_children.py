"""#15 part 3, one level down: a program the engine starts in a checkout (a gate tool,
the project's own test command in a proposal's sandbox, an agent) may run git itself —
a test suite's plugin calling `git describe`, say. That git runs none of the programs a
planted repository config names either: the engine hands its children the same
overrides through git's GIT_CONFIG_COUNT variables."""

from __future__ import annotations

import subprocess
from pathlib import Path

from console.engine.gates.base import run_tool
from console.engine.safegit import child_env


def _hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    repo, markers = tmp_path / "repo", tmp_path / "markers"
    markers.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    hook = markers / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {markers}/fsmonitor.ran\n")
    hook.chmod(0o755)
    for key, value in (("core.fsmonitor", str(hook)),
                       ("filter.evil.clean", f"sh -c 'touch {markers}/clean.ran; cat' --"),
                       ("filter.evil.required", "true"),
                       ("diff.external", f"sh -c 'touch {markers}/diff.ran' --"),
                       ("core.pager", f"sh -c 'touch {markers}/pager.ran; cat' --")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    return repo, markers


def test_a_tools_own_git_runs_nothing_the_repository_names(tmp_path: Path) -> None:
    repo, markers = _hostile_repo(tmp_path)
    script = "git status --short; git add -A; git diff --cached; git -p log -1 || true"
    run = run_tool(["/bin/sh", "-c", script], repo, 60,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert run.exit_code == 0, run.output
    assert "+a" in run.output  # its diff still works, as plain diff(1)
    assert sorted(p.name for p in markers.iterdir()) == ["fsmonitor.sh"]  # nothing ran


def test_without_the_overrides_the_same_script_would_run_them(tmp_path: Path) -> None:
    """The control: the repository above really is hostile to a plain git."""
    repo, markers = _hostile_repo(tmp_path)
    subprocess.run(["/bin/sh", "-c", "git status --short; git add -A"], cwd=repo, check=True,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                   capture_output=True)
    assert {"fsmonitor.ran", "clean.ran"} <= {p.name for p in markers.iterdir()}


def test_inherited_git_config_variables_are_replaced_not_merged(tmp_path: Path) -> None:
    repo, _ = _hostile_repo(tmp_path)
    env = child_env({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor",
                     "GIT_CONFIG_VALUE_0": "/tmp/evil", "PATH": "/usr/bin:/bin"}, repo)
    keys = [env[f"GIT_CONFIG_KEY_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))]
    values = dict(zip(keys, (env[f"GIT_CONFIG_VALUE_{i}"] for i in range(len(keys))),
                      strict=True))
    assert values["core.fsmonitor"] == "false" and "/tmp/evil" not in env.values()
    assert values["filter.evil.clean"] == "" and values["filter.evil.required"] == "false"


def test_a_tickets_test_passes_runs_none_of_the_repositorys_programs(tmp_path: Path) -> None:
    """The janitor's `test_passes` is the project's code like a gate tool: its git gets
    the same overrides (the repository's fsmonitor, filters and external diff never run)."""
    from console.engine.janitor import Janitor
    from console.engine.llm import LlmClient, LlmConfig
    from console.model import CompletionSignal

    repo, markers = _hostile_repo(tmp_path)
    janitor = Janitor(LlmClient(LlmConfig()), env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    script = "git status --short && git add -A && git diff --cached | grep -q '^+a'"
    [result] = janitor.check((CompletionSignal("test_passes", script),), repo,
                             task_title="T", log_path=tmp_path / "signal.log")
    assert result.passed, (result.detail, (tmp_path / "signal.log").read_text())
    assert sorted(p.name for p in markers.iterdir()) == ["fsmonitor.sh"]  # nothing ran
