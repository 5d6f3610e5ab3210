"""Agent processes (groups, timeouts, env, logs), adapters, the janitor and the LLM client."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from console.engine.agents.adapters import AgentContext, build_command, choose_adapter
from console.engine.agents.process import AgentCommand, run_agent, scrubbed_env
from console.engine.errors import AdapterError
from console.engine.janitor import Janitor, confine
from console.engine.llm import LlmClient
from console.engine.lock import pid_alive
from console.model import CompletionSignal, Task
from console.sdd.project_config import DEFAULT_ENV_ALLOW, AgentsConfig, LlmConfig
from tests.http_kit import loopback, send_json

SPAWNER = """
import subprocess, sys, time
child = subprocess.Popen(["sleep", "60"])
print(child.pid, flush=True)
time.sleep(60)
"""


def _run(tmp_path: Path, code: str, **kw) -> tuple:
    log = tmp_path / "agent.log"
    result = run_agent(AgentCommand((sys.executable, "-c", code), b"", kw.pop("env", None)),
                       tmp_path, log_path=log, cap_bytes=kw.pop("cap", 1 << 20),
                       cancel=kw.pop("cancel", threading.Event()), kill_grace_s=0.3,
                       timeout_s=kw.pop("timeout", 30))
    return result, log


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    result, log = _run(tmp_path, SPAWNER, timeout=1.0)
    assert result.timed_out and not result.cancelled
    grandchild = int(log.read_text().split()[0])
    time.sleep(0.2)
    assert not pid_alive(grandchild)


def test_cancel_stops_the_agent(tmp_path: Path) -> None:
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    result, _log = _run(tmp_path, "import time; time.sleep(30)", cancel=cancel)
    assert result.cancelled and time.monotonic() - started < 5


def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "do-not-leak")
    env = scrubbed_env(DEFAULT_ENV_ALLOW, {"BERNSTEIN_TASK_ID": "t1"})
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    result, log = _run(tmp_path, code, env=env)
    seen = json.loads(log.read_text())
    assert result.exit_code == 0
    assert "SECRET_TOKEN" not in seen and seen["BERNSTEIN_TASK_ID"] == "t1"
    assert seen["PATH"] == os.environ["PATH"]


def test_output_is_capped_but_the_tail_kept(tmp_path: Path) -> None:
    code = "import sys\nfor i in range(20000): print('line', i)\nprint('LAST LINE')"
    result, log = _run(tmp_path, code, cap=1000)
    assert result.truncated and result.exit_code == 0
    assert log.stat().st_size < 1200 and "output capped at 1000 bytes" in log.read_text()
    assert result.output_tail.rstrip().endswith("LAST LINE")


def _ctx(tmp_path: Path, **task: object) -> AgentContext:
    return AgentContext(Task(id="t1", title="T", status="open", **task),  # type: ignore[arg-type]
                        "do it", "sonnet", "high", 1, tmp_path,
                        {"PATH": "/nonexistent-bin"})


def test_missing_and_unconfigured_adapters_fail_at_once(tmp_path: Path) -> None:
    config = AgentsConfig()
    for name in ("claude", "codex", "gemini"):
        with pytest.raises(AdapterError, match=f"adapter {name} is not installed"):
            build_command(name, _ctx(tmp_path), config)
    with pytest.raises(AdapterError, match=r"agents\.script\.command"):
        build_command("script", _ctx(tmp_path), config)
    with pytest.raises(AdapterError, match="no agent available"):
        choose_adapter(_ctx(tmp_path).task, config, {"PATH": "/nonexistent-bin"})


def test_script_and_generic_contracts(tmp_path: Path) -> None:
    config = AgentsConfig(commands={"script": (sys.executable, "agent.py"),
                                    "generic": ("/bin/echo", "--model={model}", "{prompt}")})
    ctx = _ctx(tmp_path, description="D", role="qa", owned_files=("a.py",))
    script = build_command("script", ctx, config)
    payload = json.loads(script.stdin)
    assert payload == {"id": "t1", "title": "T", "description": "D", "role": "qa",
                       "model": "sonnet", "effort": "high", "attempt": 1, "prompt": "do it",
                       "files": ["a.py"]}
    assert script.argv[0] == sys.executable
    generic = build_command("generic", ctx, config)
    assert generic.argv == ("/bin/echo", "--model=sonnet", "do it")
    assert choose_adapter(ctx.task, config, ctx.env) == "script"


def test_paths_are_confined_to_the_worktree(tmp_path: Path) -> None:
    work = tmp_path / "wt"
    work.mkdir()
    (work / "ok.txt").write_text("hello world\n")
    (work / "out").symlink_to(tmp_path)
    (tmp_path / "secret.txt").write_text("secret")
    janitor = Janitor(LlmClient(LlmConfig()))
    signals = (
        CompletionSignal("path_exists", "../secret.txt"),
        CompletionSignal("path_exists", str(tmp_path / "secret.txt")),
        CompletionSignal("file_contains", "out/secret.txt :: secret"),
        CompletionSignal("glob_exists", "../*.txt"),
        CompletionSignal("path_exists", "ok.txt"),
        CompletionSignal("file_contains", "ok.txt :: /^hello w.rld$/"),
        CompletionSignal("file_contains", "ok.txt :: hello w.rld"),  # plain: a substring
        CompletionSignal("glob_exists", "*.txt"),
        CompletionSignal("test_passes", "grep -q hello ok.txt"),
        CompletionSignal("test_passes", "exit 4"),
    )
    results = janitor.check(signals, work, task_title="t", log_path=tmp_path / "j.log")
    verdicts = [(r.passed, r.detail) for r in results]
    assert verdicts[0] == (False, "path '../secret.txt' uses '..', outside the worktree")
    assert verdicts[1][0] is False and "outside the worktree" in verdicts[1][1]
    assert verdicts[2] == (False, "path 'out/secret.txt' is a symlink out of the worktree")
    assert verdicts[3] == (False, "glob '../*.txt' reaches outside the worktree")
    assert [v[0] for v in verdicts[4:]] == [True, True, False, True, True, False]
    assert verdicts[9][1].startswith("exit 4")
    with pytest.raises(ValueError):
        confine(work, "../../etc/passwd")


class _Endpoint(BaseHTTPRequestHandler):
    replies: list[tuple[int, dict]] = []
    seen: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "body": body,
                                "auth": self.headers.get("Authorization")})
        status, reply = type(self).replies.pop(0)
        send_json(self, reply, status)

    def do_GET(self) -> None:
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Endpoint.replies, _Endpoint.seen = [], []
    with loopback(_Endpoint) as url:
        yield url


def _chat(text: str) -> dict:
    return {"model": "test-model", "choices": [{"message": {"content": text}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3}}


def test_llm_signals_without_an_endpoint_say_not_configured(tmp_path: Path) -> None:
    janitor = Janitor(LlmClient(LlmConfig()))
    [result] = janitor.check((CompletionSignal("llm_review", "is it good?"),), tmp_path,
                             task_title="t", log_path=tmp_path / "j.log")
    assert not result.passed and result.detail.startswith("not configured: no LLM endpoint")


def test_llm_signals_through_a_real_endpoint(tmp_path: Path, endpoint: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "k-123")
    client = LlmClient(LlmConfig(base_url=f"{endpoint}/v1", api_key_env="TEST_LLM_KEY",
                                 model="judge-1", max_retries=2))
    _Endpoint.replies = [
        (503, {"error": "busy"}),  # retried with backoff
        (200, _chat("PASS\nthe diff adds the function")),
        (200, _chat('{"verdict": "retry", "confidence": 0.9, "feedback": "no tests"}')),
    ]
    janitor = Janitor(client)
    results = janitor.check(
        (CompletionSignal("llm_review", "adds a function"),
         CompletionSignal("llm_judge", "tested well")),
        tmp_path, task_title="Add f", diff="+def f(): pass", log_path=tmp_path / "j.log")
    assert [(r.passed, r.detail) for r in results] == [
        (True, "PASS\nthe diff adds the function"), (False, "no tests")]
    assert [s["path"] for s in _Endpoint.seen] == ["/v1/chat/completions"] * 3
    assert _Endpoint.seen[0]["auth"] == "Bearer k-123"
    assert _Endpoint.seen[1]["body"]["model"] == "judge-1"
    assert "+def f(): pass" in _Endpoint.seen[1]["body"]["messages"][1]["content"]


def test_api_responds_against_a_local_server(tmp_path: Path, endpoint: str) -> None:
    janitor = Janitor(LlmClient(LlmConfig()))
    results = janitor.check((CompletionSignal("api_responds", f"{endpoint}/health", 204),
                             CompletionSignal("api_responds", f"{endpoint}/health", 200),
                             CompletionSignal("api_responds", "http://127.0.0.1:9/x", 200)),
                            tmp_path, task_title="t", log_path=tmp_path / "j.log")
    assert [r.passed for r in results] == [True, False, False]
    assert results[1].detail == "answered 204, expected 200"
    assert results[2].detail.startswith("request failed")


def test_malformed_signals_fail_themselves_not_the_attempt(tmp_path: Path) -> None:
    janitor = Janitor(LlmClient(LlmConfig()))
    results = janitor.check((CompletionSignal("glob_exists", "."),
                             CompletionSignal("api_responds", "http://[::1", 200),
                             CompletionSignal("file_contains", "x.txt :: /(unclosed/")),
                            tmp_path, task_title="t", log_path=tmp_path / "j.log")
    assert [r.passed for r in results] == [False, False, False]
    assert all(r.detail for r in results)
