"""#21: the vendor CLIs' flags per version, their JSON output read into tokens, cost, the
final message and a transcript, and — when the CLIs are installed (`.ci/run` installs
them from npm into a scratch prefix when node >= 20 is there) — every flag we pass is
one the installed CLI's own --help lists, so a removed flag fails CI, not production."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from console.engine.agents.clis import (
    FLAGS,
    TESTED,
    installed_version,
    launch,
    missing_login,
    not_logged_in,
)
from console.sdd.agent_transcript import parse_report, read_report

NOISE = ["(node:123) ExperimentalWarning: I'm not sure this is supported",
         "Traceback (most recent call last):", "{not json", "[1, 2]"]

CLAUDE = [
    {"type": "system", "subtype": "init", "model": "claude-haiku-4-5", "tools": ["Write"]},
    {"type": "assistant", "message": {"content": [
        {"type": "text", "text": "I'll write the file."},
        {"type": "tool_use", "id": "t1", "name": "Write",
         "input": {"file_path": "out.txt", "content": "hi"}}]}},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "File created"}]}},
    {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2,
     "result": "Done: wrote out.txt.", "total_cost_usd": 0.0123,
     "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 300,
               "cache_read_input_tokens": 500, "output_tokens": 80}},
]
CODEX = [
    {"type": "thread.started", "thread_id": "th1"}, {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "hm"}},
    {"type": "item.completed", "item": {"id": "i1", "type": "file_change", "changes": [
        {"path": "out.txt", "kind": "add"}], "status": "completed"}},
    {"type": "turn.completed", "usage": {"input_tokens": 900, "cached_input_tokens": 100,
                                         "output_tokens": 40}},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i2", "type": "agent_message",
                                        "text": "Wrote out.txt."}},
    {"type": "turn.completed", "usage": {"input_tokens": 1000, "output_tokens": 20}},
]
GEMINI = [
    {"type": "init", "session_id": "s1", "model": "gemini-2.5-flash"},
    {"type": "message", "role": "user", "content": "write it"},
    {"type": "tool_use", "tool_name": "write_file", "tool_id": "w1",
     "parameters": {"file_path": "out.txt", "content": "hi"}},
    {"type": "tool_result", "tool_id": "w1", "status": "success", "output": "ok"},
    {"type": "message", "role": "assistant", "content": "Wrote ", "delta": True},
    {"type": "message", "role": "assistant", "content": "out.txt.", "delta": True},
    {"type": "result", "status": "success",
     "stats": {"total_tokens": 1540, "input_tokens": 1500, "output_tokens": 40}},
]


def _lines(events: list[dict]) -> list[str]:
    out = [NOISE[0]]
    for index, event in enumerate(events):
        out.append(json.dumps(event))
        out.append(NOISE[(index % 3) + 1])  # merged stderr between the JSON lines
    return out


def test_each_clis_report_is_read_through_merged_noise() -> None:
    claude = parse_report("claude", _lines(CLAUDE))
    assert (claude.tokens_in, claude.tokens_out) == (2000, 80)
    assert claude.cost_usd == 0.0123 and claude.error == ""
    assert claude.final_message == "Done: wrote out.txt."
    assert claude.lines[:3] == ["assistant: I'll write the file.",
                                'tool: Write {"file_path": "out.txt", "content": "hi"}',
                                "result (ok): File created"]
    codex = parse_report("codex", _lines(CODEX))
    assert (codex.tokens_in, codex.tokens_out, codex.cost_usd) == (1900, 60, None)
    assert codex.final_message == "Wrote out.txt." and "tool: edit out.txt" in codex.lines
    gemini = parse_report("gemini", _lines(GEMINI))
    assert (gemini.tokens_in, gemini.tokens_out) == (1500, 40)
    assert gemini.final_message == "Wrote out.txt."
    assert gemini.lines[0].startswith("tool: write_file")
    # the noise said "I'm not sure": it is never the agent's last word
    assert all("not sure" not in r.final_message for r in (claude, codex, gemini))


def test_claudes_tokens_are_every_model_its_cost_covers() -> None:
    """claude 2.1 reports `usage` for its main loop and `modelUsage` per model (a title
    on haiku too); total_cost_usd is the latter's sum, so the tokens are as well."""
    result = {**CLAUDE[-1], "total_cost_usd": 0.0042, "modelUsage": {
        "claude-sonnet-4-5": {"inputTokens": 2400, "outputTokens": 80,
                              "cacheReadInputTokens": 100, "costUSD": 0.0084},
        "claude-haiku-4-5": {"inputTokens": 1200, "outputTokens": 40, "costUSD": 0.0014}}}
    report = parse_report("claude", _lines([*CLAUDE[:-1], result]))
    assert (report.tokens_in, report.tokens_out, report.cost_usd) == (3700, 120, 0.0042)


def test_errors_are_the_clis_own_words(tmp_path: Path) -> None:
    failed = parse_report("claude", [json.dumps({
        "type": "result", "subtype": "success", "is_error": True,
        "result": "Invalid API key · Please run /login", "usage": {}})])
    assert failed.error == "Invalid API key · Please run /login"
    assert "adapter claude is not logged in (Invalid API key" in (
        not_logged_in("claude", failed.error) or "")
    assert parse_report("codex", [json.dumps({"type": "turn.failed", "error": {
        "message": "stream disconnected"}})]).error == "stream disconnected"
    assert parse_report("gemini", [json.dumps({"type": "error", "message": "quota"})]
                        ).error == "quota"
    assert not_logged_in("codex", "all fine\nno problem here") is None
    log = tmp_path / "attempt.log"
    log.write_text("\n".join(_lines(CODEX)) + "\n")
    assert read_report("codex", log).tokens_out == 60
    assert read_report("codex", tmp_path / "missing.log").events == 0


def test_flags_per_version() -> None:
    codex_new = launch("codex", (0, 169, 0), "do it", "gpt-6-luna", "max").argv
    assert "--full-auto" not in codex_new and codex_new[-1] == "do it"
    assert codex_new[codex_new.index("--sandbox") + 1] == "workspace-write"
    assert 'model_reasoning_effort="xhigh"' in codex_new and "--json" in codex_new
    assert "--full-auto" in launch("codex", (0, 40, 0), "p", "m", "low").argv
    newer = launch("codex", (9, 0, 0), "p", "m", "low").argv  # unknown newer: newest row
    assert "--sandbox" in newer
    gemini = launch("gemini", (0, 61, 0), "p", "flash", "high")
    assert "--skip-trust" in gemini.argv and gemini.env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert "--skip-trust" not in launch("gemini", (0, 50, 0), "p", "flash", "high").argv
    claude = launch("claude", (2, 1, 197), "p", "haiku", "max").argv
    assert "--dangerously-skip-permissions" not in claude  # refused as root
    assert claude[claude.index("--permission-mode") + 1] == "acceptEdits"
    assert claude[claude.index("--output-format") + 1] == "stream-json" and "--verbose" in claude
    assert "--effort" not in launch("claude", (2, 0, 5), "p", "haiku", "max").argv
    assert launch("claude", None, "p", "haiku", "max").argv == claude  # unknown: newest


def cli_binary(name: str) -> str | None:
    """The CLI on PATH, else in the scratch prefix .ci/run installs them into."""
    prefix = os.environ.get("BERNSTEIN_TUI_CLIS")
    if prefix:
        candidate = Path(prefix) / "node_modules" / ".bin" / name
        if candidate.exists():
            return str(candidate)
    return shutil.which(name)


@pytest.mark.parametrize("adapter", sorted(FLAGS))
def test_every_flag_we_pass_is_in_the_installed_clis_help(adapter: str) -> None:
    binary = cli_binary(adapter)
    if binary is None:
        pytest.skip(f"NO {adapter.upper()} CLI: install it (npm) or set BERNSTEIN_TUI_CLIS "
                    "to the prefix .ci/run installs the CLIs into")
    env = {**os.environ, "HOME": os.environ.get("HOME", "/tmp")}
    version = installed_version(binary, env)
    assert version is not None, f"{binary} --version said no version"
    argv = launch(adapter, version, "PROMPT", "MODEL", "high").argv
    help_argv = [binary, "exec", "--help"] if adapter == "codex" else [binary, "--help"]
    text = subprocess.run(help_argv, capture_output=True, text=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL).stdout
    flags = {a.split("=")[0] for a in argv if a.startswith("-")}
    missing = sorted(f for f in flags if f not in text)
    assert missing == [], f"{adapter} {'.'.join(map(str, version))} no longer has {missing}"


def test_the_log_tab_reads_a_transcript(tmp_path: Path) -> None:
    """A structured CLI's log is shown as messages, tool calls and results, its other
    lines kept where they came; a plain log (a script agent's) is shown as it is."""
    from console.sdd.task_live import read_local

    runtime = tmp_path / ".sdd" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "s1.log").write_text("\n".join(_lines(GEMINI)) + "\n")
    live = read_local(tmp_path, "T", {"log": ".sdd/runtime/s1.log", "adapter": "gemini"})
    lines = (live.log or "").splitlines()
    assert lines[0] == NOISE[0] and '"type"' not in (live.log or "")
    assert lines.index('tool: write_file {"file_path": "out.txt", "content": "hi"}') < \
        lines.index("assistant: Wrote out.txt.") < lines.index("done: success")
    (runtime / "s2.log").write_text("spec agent: T attempt 1\nplain output\n")
    plain = read_local(tmp_path, "T", {"log": ".sdd/runtime/s2.log", "adapter": "script"})
    assert plain.log == "spec agent: T attempt 1\nplain output\n"


def test_codex_without_any_credentials_is_refused_before_it_starts(tmp_path: Path) -> None:
    """codex with no key, login or config retries the network until the timeout."""
    home = tmp_path / "codex-home"
    home.mkdir()
    bare = {"HOME": str(tmp_path), "CODEX_HOME": str(home)}
    said = missing_login("codex", bare)
    assert said is not None and said.startswith("adapter codex is not logged in (no OPENAI")
    assert "OPENAI_API_KEY under agents.env" in said
    assert missing_login("codex", {**bare, "OPENAI_API_KEY": "k"}) is None
    (home / "config.toml").write_text('model_provider = "proxy"\n')
    assert missing_login("codex", bare) is None  # a provider of its own may bring a key
    assert missing_login("claude", {}) is None  # it says so itself, at once


def test_ci_installs_the_versions_the_contract_tests_name() -> None:
    text = (Path(__file__).parents[1] / ".ci" / "run").read_text()
    packages = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex",
                "gemini": "@google/gemini-cli"}
    for cli, version in TESTED.items():
        assert f"{packages[cli]}@{'.'.join(map(str, version))}" in text, cli
