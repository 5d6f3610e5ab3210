"""The same environment everywhere (#32): a project's tests run by `bernstein-tui gates`
get the environment the engine's gates give them, and neither carries the operator's API
keys, cloud or forge tokens — not even a key `agents.env` passes to the agents. A real
trusted project whose test command dumps its environment, the real command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import trusted
from tests.engine_kit import SPEC_AGENT, git, make_repo, ticket
from tests.test_engine_run import _env

SECRETS = {"OPENAI_API_KEY": "sk-openai-operator", "ANTHROPIC_API_KEY": "sk-ant-operator",
           "GITHUB_TOKEN": "ghp_operator", "GH_TOKEN": "gho_operator",
           "GITLAB_TOKEN": "glpat-operator", "AWS_ACCESS_KEY_ID": "AKIAOPERATOR",
           "AWS_SECRET_ACCESS_KEY": "aws-secret-operator", "AWS_SESSION_TOKEN": "aws-session"}
DUMP = "import json, os, sys\njson.dump(dict(os.environ), open(sys.argv[1], 'w'))\n"
#: what differs by design: the engine marks the processes it starts as its own; git's
#: per-child overrides are numbered by the drivers each checkout's attributes name
ENGINE_ONLY = {"BERNSTEIN_TUI_PROJECT"}
NUMBERED = re.compile(r"GIT_CONFIG_(KEY|VALUE)_\d+")


def _project(tmp_path: Path, dump: Path) -> Path:
    root = make_repo(tmp_path)
    (root / "dump_env.py").write_text(DUMP)
    (root / "bernstein.yaml").write_text(
        "agents:\n  script:\n"
        f"    command: [{json.dumps(sys.executable)}, {json.dumps(str(SPEC_AGENT))}]\n"
        # what a vendor CLI needs goes to the agents, never to the project's tests
        "  env: [SPEC_AGENT_LOG, SPEC_AGENT_LOCKS, ANTHROPIC_API_KEY]\n"
        "  kill_grace_s: 0.5\n"
        "quality_gates:\n  enabled: true\n  lint: false\n  tests: true\n"
        f"  test_command: {json.dumps(f'{sys.executable} dump_env.py {dump}')}\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a project whose tests dump their environment")
    # its own virtualenv, whose pytest (a small script: asked for its --version to key
    # the gate cache) is project code too
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "pytest").write_text(f"#!/bin/sh\nenv > {dump.with_name('probe.txt')}\n"
                                    "echo 'pytest 0.0'\n")
    (bin_dir / "pytest").chmod(0o755)
    (root / ".git" / "info" / "exclude").write_text(".venv/\n")
    return trusted(root)


def _dumped(dump: Path) -> dict[str, str]:
    env = json.loads(dump.read_text())
    dump.unlink()
    leaked = sorted(name for name, value in env.items()
                    if name in SECRETS or any(s in value for s in SECRETS.values()))
    assert leaked == [], f"reached the project's tests: {leaked}"
    return env


def _keys(env: dict[str, str]) -> set[str]:
    return {name for name in env if not NUMBERED.fullmatch(name)} - ENGINE_ONLY


def test_gates_and_the_engines_gates_give_tests_the_same_scrubbed_environment(
        tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    root = _project(tmp_path, dump)
    env = {**_env(tmp_path), **SECRETS}
    (root / "changed.py").write_text("x = 1\n")  # a change for the gates to test
    cli = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "gates"],
                         env=env, capture_output=True, text=True, timeout=180)
    assert "Traceback" not in cli.stdout + cli.stderr
    assert dump.exists(), cli.stdout + cli.stderr  # the project's test command ran
    from_cli = _dumped(dump)
    probed = dump.with_name("probe.txt")
    assert probed.exists(), cli.stdout  # the project's own pytest was asked its version
    assert [s for s in SECRETS.values() if s in probed.read_text()] == []
    assert from_cli["VIRTUAL_ENV"] == str(root / ".venv")  # its own interpreter first
    (root / "changed.py").unlink()

    checked = tmp_path / "signal-env.json"  # its test_passes signal: project code too
    ticket(root, "t1", id="T1", title="Write a module", description="write out/m.py x = 1",
           completion_signals=[{"type": "test_passes",
                                "command": f"{sys.executable} dump_env.py {checked}"}])
    run = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                          "--until-idle", "--exit-zero"], env=env, capture_output=True,
                         text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert dump.exists(), run.stdout + run.stderr  # the engine's gates ran the same command
    from_engine = _dumped(dump)
    assert _keys(from_cli) == _keys(from_engine)
    from_signal = _dumped(checked)
    # the gates' tools get git's hardening; the signal runs through /bin/sh (its own PWD)
    # (and the gates point VIRTUAL_ENV at the project's .venv; the signal has the engine's)
    other = re.compile(r"GIT_CONFIG_\w+|PWD|OLDPWD|SHLVL|_|VIRTUAL_ENV")
    assert {k for k in _keys(from_signal) if not other.fullmatch(k)} == \
        {k for k in _keys(from_engine) if not other.fullmatch(k)}
    assert from_engine["BERNSTEIN_TUI_PROJECT"] == str(root)
