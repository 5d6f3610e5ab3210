"""The contract test of #21: the real claude, codex and gemini CLIs (installed from npm;
.ci/run puts them in a scratch prefix and sets BERNSTEIN_TUI_CLIS) run one real task
each through `bernstein-tui run --until-idle` — worktree, agent, janitor, merge — as
whoever runs the tests (root in CI and containers), with only a fake model API on
127.0.0.1 (tests/model_api.py) behind them.

Each CLI is pointed at the fake the way an operator points it at a proxy, through
variables listed under `agents.env` (and, where the CLI reads no variable for it, its
own config file under the HOME / CODEX_HOME it is given). The test asserts that each
file the task asked for is merged into main, that each chain records the tokens the
fake reported to that CLI (non-zero) as the CLI itself counted them, that claude's cost
is its own report's, and that the Log tab's transcript shows the tool call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console.engine.cascade import DEFAULT_PRICES
from console.sdd.agent_transcript import read_report
from tests.conftest import trusted
from tests.engine_kit import assert_idle_exit, git, make_repo, tasks, ticket
from tests.model_api import model_api
from tests.test_agent_clis import cli_binary

CLIS = ("claude", "codex", "gemini")
ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "CODEX_HOME",
       "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL")
PROTOCOL = {"claude": "anthropic", "codex": "responses", "gemini": "gemini"}
TOOL = {"claude": "Write", "codex": "exec", "gemini": "write_file"}


def _binaries() -> dict[str, str]:
    found = {name: cli_binary(name) for name in CLIS}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        pytest.skip(f"NO {', '.join(m.upper() for m in missing)} CLI: the tests on the real "
                    "CLIs need node >= 20 and `npm install @anthropic-ai/claude-code "
                    "@openai/codex @google/gemini-cli` (.ci/run does it; set "
                    "BERNSTEIN_TUI_CLIS to its prefix)")
    return {name: str(path) for name, path in found.items()}


def _homes(tmp_path: Path, url: str) -> dict[str, str]:
    """The environment an operator would give the engine for a proxy at `url`."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    # with a base URL gemini 0.61 picks the "gateway" auth type, which -p refuses:
    # the API-key type is chosen in its settings (GOOGLE_GEMINI_BASE_URL still applies)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    codex_home = home / ".codex"
    codex_home.mkdir()
    # codex 0.169 reads no base-URL variable: a provider in its config.toml, over HTTP
    # (its built-in provider tries a websocket to the real API first)
    (codex_home / "config.toml").write_text(
        'model_provider = "proxy"\n[model_providers.proxy]\nname = "proxy"\n'
        f'base_url = "{url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        "supports_websockets = false\n")
    return {"HOME": str(home), "CODEX_HOME": str(codex_home),
            "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-fake",
            "OPENAI_API_KEY": "sk-fake", "GOOGLE_GEMINI_BASE_URL": url,
            "GEMINI_API_KEY": "fake-gemini-key"}


def _run(root: Path, env: dict[str, str], binaries: dict[str, str]
         ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], dict[str, dict]]:
    """`run --until-idle` with the CLIs on PATH: the process, the tasks, the chains."""
    path = os.pathsep.join([*{str(Path(b).parent) for b in binaries.values()},
                            os.environ.get("PATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "console", "-C", str(root), "run", "--until-idle",
         "--workers", "3"], capture_output=True, text=True, timeout=900,
        env={**env, "PATH": path}, stdin=subprocess.DEVNULL)
    assert_idle_exit(root, result.returncode, result.stdout + result.stderr)
    lines = (root / ".sdd/metrics/cascade_chains.jsonl").read_text().splitlines()
    return result, tasks(root), {c["task_id"]: c for c in map(json.loads, lines)}


def test_each_real_cli_runs_a_task_to_a_merge_with_its_own_usage(tmp_path: Path) -> None:
    binaries = _binaries()
    root = make_repo(tmp_path)
    (root / "bernstein.yaml").write_text(
        "complexity: {iterations: {simple: 1}}\n"
        f"agents:\n  env: [{', '.join(ENV)}]\n  kill_grace_s: 2\n")
    trusted(root)
    for cli in CLIS:
        ticket(root, cli, id=cli.upper(), title=f"A file from {cli}", cli=cli, role="backend",
               scope="small", complexity="low",
               description=f"Create out/{cli}.txt containing the line: from {cli}")
    with model_api() as (url, served):
        result, state, chains = _run(root, {**os.environ, **_homes(tmp_path, url)},
                                     binaries)
    for cli in CLIS:
        task = state[cli.upper()]
        assert task.status == "done", (cli, task.result_summary, result.stderr[-2000:])
        assert git(root, "show", f"main:out/{cli}.txt") == f"from {cli}\n"
        assert task.metadata["adapter"] == cli
        assert TOOL[cli] in served.tool_calls[PROTOCOL[cli]], served.tool_calls
        [attempt] = chains[cli.upper()]["attempts"]
        fake_in, fake_out = served.tokens[PROTOCOL[cli]]
        assert fake_in > 0 and fake_out > 0
        # the CLI's own count of what the fake reported to it, every request included
        assert (attempt["tokens_in"], attempt["tokens_out"]) == (fake_in, fake_out), cli
        assert attempt["final_message"] == f"Done: wrote out/{cli}.txt."
        report = read_report(cli, root / ".sdd/runtime" / f"{task.assigned_agent}.log")
        assert any(line.startswith("tool: ") for line in report.lines), report.lines
    # each on its ladder's first rung, in its own model names (aliases resolved by the
    # CLI), with the effort the engine chose in the CLI's own terms
    assert all("haiku" in m for m in served.models["anthropic"]), served.models
    assert served.models["responses"] == {"gpt-6-luna"}
    assert all("flash-lite" in m for m in served.models["gemini"]), served.models
    assert served.efforts["responses"] == {"high"}
    metrics = {m["task_id"]: m for m in map(json.loads, (
        root / ".sdd/metrics/tasks.jsonl").read_text().splitlines())}
    for cli in CLIS:  # Bernstein's task metrics: the CLI's figures and what the merge did
        line = metrics[cli.upper()]
        assert (line["tokens_prompt"], line["tokens_completion"]) == tuple(
            served.tokens[PROTOCOL[cli]]) and line["provider"] == cli
        assert (line["files_modified"], line["lines_added"], line["lines_deleted"]) == (1, 1, 0)
    claude = chains["CLAUDE"]["attempts"][0]
    log = root / ".sdd/runtime" / f"{state['CLAUDE'].assigned_agent}.log"
    own = read_report("claude", log).cost_usd
    assert own is not None and own > 0 and claude["cost_usd"] == own
    assert metrics["CLAUDE"]["cost_usd"] == own
    price_in, price_out = DEFAULT_PRICES["gpt-6-luna"]
    codex = chains["CODEX"]["attempts"][0]
    assert codex["cost_usd"] == round(
        (codex["tokens_in"] * price_in + codex["tokens_out"] * price_out) / 1e6, 6)


def test_no_credentials_is_one_line_per_cli_and_not_escalated(tmp_path: Path) -> None:
    """No key, no login, nothing listed in agents.env: claude and gemini say so in their
    own words (read from their output), codex — which would retry the network until the
    timeout — is refused before it starts; each one line, one attempt, no escalation."""
    binaries = _binaries()
    root = make_repo(tmp_path)
    (root / "bernstein.yaml").write_text("complexity: {iterations: {simple: 1}}\n")
    trusted(root)
    for cli in CLIS:
        ticket(root, cli, id=cli.upper(), title=f"No login on {cli}", cli=cli, scope="small",
               complexity="low", description=f"Create out/{cli}.txt containing the line: x")
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ENV} | {"HOME": str(home)}
    _, state, chains = _run(root, env, binaries)
    said = {"claude": "Not logged in", "codex": "no OPENAI_API_KEY",
            "gemini": "Please set an Auth method"}
    for cli in CLIS:
        task = state[cli.upper()]
        assert task.status == "failed", (cli, task.status)
        reason = task.result_summary
        assert reason.startswith(f"adapter {cli} is not logged in (") and "\n" not in reason
        assert said[cli] in reason and "under agents.env" in reason, reason
        assert len(chains[cli.upper()]["attempts"]) == 1  # no stronger model has a key
