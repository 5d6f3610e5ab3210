"""#33 point 1: live telemetry from the agents' own streams — each CLI format read as it
is written (real sample lines), a line that is not JSON costing one problem and nothing
else, bad heartbeats refused in one line, and a real engine running a script agent that
prints claude-style stream-JSON: while it still runs, `status --json` in another process
shows it with tokens, cost and what it does; once it ended it is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from console.engine.agents.telemetry import AgentTelemetry, Fleet
from console.engine.cascade import CascadeConfig
from console.sdd.agent_live import AgentLive, read_agents, telemetry
from console.sdd.agent_transcript import LiveReader
from console.sdd.skeleton import init_project
from console.sdd.task_live import write_heartbeat
from tests.conftest import trusted
from tests.engine_kit import make_repo, tasks, ticket, until
from tests.test_agent_clis import CLAUDE, CODEX, GEMINI, NOISE

#: claude 2.1's assistant events while it runs: one per content block, each with the
#: API message's id and usage (the later block's usage completes the earlier one's)
CLAUDE_LIVE = [
    {"type": "system", "subtype": "init", "model": "claude-sonnet-4-5"},
    {"type": "assistant", "message": {"id": "msg_01", "model": "claude-sonnet-4-5",
     "content": [{"type": "text", "text": "Let me look at\nthe code."}],
     "usage": {"input_tokens": 4, "cache_creation_input_tokens": 1200,
               "cache_read_input_tokens": 9000, "output_tokens": 2}}},
    {"type": "assistant", "message": {"id": "msg_01", "model": "claude-sonnet-4-5",
     "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                  "input": {"file_path": "app.py"}}],
     "usage": {"input_tokens": 4, "cache_creation_input_tokens": 1200,
               "cache_read_input_tokens": 9000, "output_tokens": 60}}},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "print('hi')"}]}},
    {"type": "assistant", "message": {"id": "msg_02", "model": "claude-sonnet-4-5",
     "content": [{"type": "tool_use", "id": "t2", "name": "Edit",
                  "input": {"file_path": "app.py", "old_string": "hi", "new_string": "yo"}}],
     "usage": {"input_tokens": 10, "cache_read_input_tokens": 10200, "output_tokens": 90}}},
]


def _feed_bytewise(reader: LiveReader, events: list[dict]) -> None:
    data = "".join(json.dumps(e) + "\n" + NOISE[0] + "\n" for e in events).encode()
    for i in range(0, len(data), 7):  # chunks that cut lines anywhere
        reader.feed(data[i:i + 7])


def test_claude_tokens_grow_while_it_runs_and_its_result_has_the_last_word() -> None:
    reader = LiveReader("claude")
    _feed_bytewise(reader, CLAUDE_LIVE)
    report = reader.report
    # msg_01 once (its largest figures), plus msg_02
    assert (report.tokens_in, report.tokens_out, report.tokens_cached) == (
        4 + 1200 + 9000 + 10 + 10200, 60 + 90, 9000 + 10200)
    assert report.turns == 2
    assert report.last == 'tool: Edit {"file_path": "app.py", "old_string": "hi", ' \
                          '"new_string": "yo"}'
    assert report.cost_usd is None and reader.problem == ""
    _feed_bytewise(reader, [CLAUDE[-1]])  # the result: its totals and its own cost
    assert (report.tokens_in, report.tokens_out, report.cost_usd) == (2000, 80, 0.0123)
    assert report.tokens_cached == 500 and report.turns == 2


def test_codex_and_gemini_say_what_they_can_while_they_run() -> None:
    codex = LiveReader("codex")
    _feed_bytewise(codex, CODEX[:5])  # the first turn completed
    assert (codex.report.tokens_in, codex.report.tokens_out,
            codex.report.tokens_cached) == (900, 40, 100)
    assert codex.report.turns == 1 and codex.report.last == "tool: edit out.txt"
    _feed_bytewise(codex, CODEX[5:])
    assert codex.report.turns == 2 and codex.report.last == "says: Wrote out.txt."
    gemini = LiveReader("gemini")
    _feed_bytewise(gemini, GEMINI[:5])  # mid-message: no tokens before its result
    assert gemini.report.tokens_in == 0 and gemini.report.last == "says: Wrote"
    _feed_bytewise(gemini, GEMINI[5:])
    assert (gemini.report.tokens_in, gemini.report.tokens_out) == (1500, 40)


def test_a_line_that_is_not_json_is_one_problem_and_the_rest_flows() -> None:
    reader = LiveReader("claude")
    plain = reader.feed(b'{"type": "assistant", "message": {"id": "m1", "usage": '
                        b'{"input_tokens": 5, "output_tokens": 1}, "content": []}}\n'
                        b'{"truncated by a crash\n[1, 2]\nnot json at all\n')
    plain += reader.feed(json.dumps(CLAUDE_LIVE[4]).encode() + b"\n{also broken}\n")
    assert reader.problem.startswith("not JSON: {\"truncated by a crash")
    assert reader.bad_lines == 2
    assert reader.report.tokens_in == 5 + 10 + 10200 and reader.report.turns == 2
    assert plain == ["[1, 2]", "not json at all"]  # stderr noise, not a problem
    # an over-long line is skipped, said once, and the next line still counts
    huge = LiveReader("codex")
    huge.feed(b'{"x": "' + b"a" * (4 * 1024 * 1024 + 10))
    huge.feed(b'"}\n' + json.dumps(CODEX[4]).encode() + b"\n")
    assert huge.problem.startswith("a line over") and huge.report.tokens_in == 900


def test_a_script_agent_reports_its_usage_lines_and_its_narrative(tmp_path: Path) -> None:
    init_project(tmp_path)
    live = AgentTelemetry(tmp_path, "backend-1", "T1", "backend", "sonnet",
                          CascadeConfig(), ".sdd/runtime/backend-1.log", "wt")
    live.start("script")
    live.started_pid(os.getpid())
    live.feed(b'working on it\nBERNSTEIN_USAGE {"input_tokens": 1000, "output_tokens": 100}\n')
    agent = live.snapshot()
    assert (agent.tokens_in, agent.tokens_out) == (1000, 100)
    assert agent.cost_estimated and agent.cost_usd == round((1000 * 3 + 100 * 15) / 1e6, 6)
    assert agent.last.startswith("BERNSTEIN_USAGE") or agent.last == "working on it"
    live.beat()  # dirty: published (heartbeat, agents.json, .tokens)
    beat = json.loads((tmp_path / ".sdd/runtime/heartbeats/backend-1.json").read_text())
    assert beat["telemetry"]["tokens"] == {"input": 1000, "output": 100, "cached": 0}
    assert isinstance(beat["progress_pct"], int) and beat["current_file"] == ""
    snapshot = json.loads((tmp_path / ".sdd/runtime/agents.json").read_text())
    assert [a["id"] for a in snapshot["agents"]] == ["backend-1"]
    assert snapshot["agents"][0]["tokens_used"] == 1100
    assert live.close() == 10
    assert json.loads((tmp_path / ".sdd/runtime/agents.json").read_text())["agents"] == []
    sidecar = (tmp_path / ".sdd/runtime/backend-1.tokens").read_text().splitlines()
    assert sum(json.loads(line)["in"] + json.loads(line)["out"] for line in sidecar) == 1100


def test_heartbeats_that_are_links_fifos_or_huge_are_refused_in_one_line(
        tmp_path: Path) -> None:
    init_project(tmp_path)
    beats = tmp_path / ".sdd" / "runtime" / "heartbeats"
    agent = AgentLive(session="good", task_id="T1", cli="claude", model="sonnet",
                      started=time.time() - 5, tokens_in=10)
    write_heartbeat(tmp_path, "good", "agent", "running", 10, telemetry=telemetry(agent))
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"timestamp": time.time(), "telemetry": {"task_id": "X"}}))
    (beats / "link.json").symlink_to(secret)
    os.mkfifo(beats / "fifo.json")
    (beats / "huge.json").write_bytes(b"{" + b" " * (64 * 1024) + b"}")
    (beats / "broken.json").write_text('{"timestamp": ')
    old = {"timestamp": time.time() - 3600, "telemetry": {"task_id": "T9"}}
    (beats / "stale.json").write_text(json.dumps(old))  # an engine that died
    started = time.monotonic()
    agents, problems = read_agents(tmp_path)
    assert time.monotonic() - started < 5  # the FIFO never blocked the read
    assert [(a.session, a.task_id, a.tokens_in) for a in agents] == [("good", "T1", 10)]
    why = {p.file.rsplit("/", 1)[-1]: p.reason for p in problems}
    assert set(why) == {"link.json", "fifo.json", "huge.json", "broken.json"}
    assert "is a symbolic link" in why["link.json"]  # (confine's words, or ours on a race)
    assert why["fifo.json"] == "is not a regular file, not read"
    assert "over the" in why["huge.json"] and why["broken.json"] == "not valid JSON"
    assert all("\n" not in p.reason for p in problems)


def test_the_fleet_writes_at_most_once_a_second(tmp_path: Path) -> None:
    init_project(tmp_path)
    fleet = Fleet(tmp_path)
    path = tmp_path / ".sdd/runtime/agents.json"
    fleet.update("a", {"id": "a"})
    assert not path.exists()  # written by a beat, not by each change
    fleet.flush()
    first = path.stat().st_mtime_ns
    for n in range(50):
        fleet.update("a", {"id": "a", "n": n})
        fleet.flush()
    assert path.stat().st_mtime_ns == first  # throttled
    assert json.loads(path.read_text())["agents"] == [{"id": "a"}]
    fleet.remove("a")  # an agent that ended leaves the file at once
    assert json.loads(path.read_text())["agents"] == []


STREAM_AGENT = '''
import json, pathlib, sys, time
json.load(sys.stdin)
gate = pathlib.Path({gate!r})
def say(event):
    print(json.dumps(event), flush=True)
say({{"type": "system", "subtype": "init", "model": "claude-sonnet-4-5"}})
say({{"type": "assistant", "message": {{"id": "msg_1", "content": [
    {{"type": "text", "text": "Reading the \\x1b[31mcode\\x1b[0m"}}],
    "usage": {{"input_tokens": 1000, "cache_read_input_tokens": 500, "output_tokens": 20}}}}}})
print("{{not json, a crash's half line", flush=True)
time.sleep(0.3)
say({{"type": "assistant", "message": {{"id": "msg_2", "content": [
    {{"type": "tool_use", "id": "t1", "name": "Edit", "input": {{"file_path": "app.py"}}}}],
    "usage": {{"input_tokens": 1200, "output_tokens": 40}}}}}})
while not gate.exists():
    time.sleep(0.05)
say({{"type": "result", "subtype": "success", "is_error": False, "result": "done",
     "total_cost_usd": 0.25, "usage": {{"input_tokens": 2700, "output_tokens": 60}}}})
'''


def _status(root: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "status",
                          "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout)


def _fleet(root: Path) -> list[list[str]]:
    try:
        snapshot = json.loads((root / ".sdd/runtime/agents.json").read_text())
    except (OSError, ValueError):
        return []
    return sorted(a["task_ids"] for a in snapshot["agents"])


def test_status_json_shows_the_running_agents_live_telemetry(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    gate = tmp_path / "let-it-finish"
    agent = tmp_path / "stream_agent.py"
    agent.write_text(STREAM_AGENT.format(gate=str(gate)))
    (root / "bernstein.yaml").write_text(
        "agents:\n  default: script\n  script:\n"
        f"    command: [{json.dumps(sys.executable)}, {json.dumps(str(agent))}]\n"
        "  kill_grace_s: 0.5\ncascade: {enabled: false}\nquality_gates: {enabled: false}\n")
    trusted(root)
    ticket(root, "t1", id="T1", title="Streams", description="stream some lines")
    ticket(root, "t2", id="T2", title="Streams too", description="stream more lines")
    engine = subprocess.Popen([sys.executable, "-m", "console", "-C", str(root), "run",
                               "--until-idle", "--workers", "2"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    try:
        def running() -> list[dict] | None:
            agents = _status(root)["agents"]
            done = [a for a in agents if a["tokens"]["input"] == 2700]
            return agents if len(done) == 2 else None

        both = until("both running agents in status --json", running, timeout=120)
        assert sorted(a["task_id"] for a in both) == ["T1", "T2"]
        assert len({a["pid"] for a in both}) == 2
        live = both[0]
        assert live["cli"] == "script"
        assert live["tokens"] == {"input": 2700, "output": 60, "cached": 500, "total": 2760}
        assert live["cost_estimated"] is True and live["cost_usd"] > 0
        assert live["last"] == 'tool: Edit {"file_path": "app.py"}'
        assert live["turns"] == 2 and live["elapsed_s"] >= 0
        assert isinstance(live["pid"], int) and live["pid"] > 0
        assert live["problem"].startswith("not JSON")
        assert live["model"]  # the ladder's model it was started on
        until("both in agents.json", lambda: _fleet(root) == [["T1"], ["T2"]], timeout=30)
        assert engine.poll() is None  # all of that while the agents still run
    finally:
        gate.write_text("go\n")
        output, _ = engine.communicate(timeout=120)
    assert engine.returncode == 0, output.decode(errors="replace")[-2000:]
    assert tasks(root)["T1"].status == tasks(root)["T2"].status == "done"
    assert _status(root)["agents"] == []
    assert _fleet(root) == []
    session = tasks(root)["T1"].metadata["session"]
    sidecar = (root / ".sdd/runtime" / f"{session}.tokens").read_text().splitlines()
    assert sum(json.loads(line)["in"] for line in sidecar) == 2700  # the result's totals


def test_a_servers_agents_reach_status_json_in_the_same_shape() -> None:
    from tests.bernstein_server import FakeBernstein
    from tests.test_remote import TOKEN, cli

    server = FakeBernstein(TOKEN).start()
    try:
        task_id = server.add("Streams", "claimed", progress_log=[
            {"timestamp": 1.0, "message": "started", "percent": 5},
            {"timestamp": 2.0, "message": "editing\napp.py", "percent": 40}])
        server.agents = [
            {"id": "backend-1a2b", "role": "backend", "status": "working", "model": "sonnet",
             "provider": "claude", "task_ids": [task_id], "runtime_s": 42.0,
             "tokens_used": 12345, "context_utilization_pct": 3.0, "cost_usd": 0.12},
            {"id": "backend-dead", "role": "backend", "status": "dead", "model": "opus",
             "provider": "claude", "task_ids": [task_id], "runtime_s": 9.0,
             "tokens_used": 1, "cost_usd": 0.0},
            {"id": "no-task", "status": "working", "task_ids": []}, "not an object"]
        out = cli(server.url, "status", "--json")
        assert out.returncode == 0, out.stderr
        [agent] = json.loads(out.stdout)["agents"]
        assert agent["task_id"] == task_id and agent["session"] == "backend-1a2b"
        assert (agent["cli"], agent["model"], agent["pid"]) == ("claude", "sonnet", None)
        assert agent["tokens"] == {"input": None, "output": None, "cached": None,
                                   "total": 12345}
        assert agent["cost_usd"] == 0.12 and agent["cost_estimated"] is True
        assert agent["last"] == "editing app.py" and 41 <= agent["elapsed_s"] < 120
    finally:
        server.stop()


def test_status_text_shows_each_agent_on_one_sanitised_line() -> None:
    import io

    from rich.console import Console

    from console.cli.views import print_status
    from console.sdd.state import State
    from console.sdd.summary import summarise

    state = State()
    state.apply_agents([AgentLive(session="s1", task_id="T1", cli="claude", model="sonnet",
                                  started=time.time() - 42, tokens_in=12345, tokens_out=600,
                                  tokens_cached=9000, cost_usd=0.0421,
                                  last="says: \x1b]0;pwned\x07red \x1b[31mtext")], [])
    summary = summarise(state)
    buffer = io.StringIO()
    print_status(summary, "here", Console(file=buffer, width=200, color_system=None))
    lines = [line for line in buffer.getvalue().splitlines() if "T1" in line]
    assert lines == [lines[0]] and "\x1b" not in lines[0] and "\x07" not in lines[0]
    assert "agents running: 1" in buffer.getvalue()
    assert "T1: claude sonnet, 42 s, 12.3k in (9.0k cached) / 600 out, $0.0421 est." \
        in lines[0]


def test_a_heartbeats_directory_that_is_a_link_is_one_problem_and_bernsteins_own_beats_are_fine(
        tmp_path: Path) -> None:
    project = tmp_path / "p"
    init_project(project)
    beats = project / ".sdd" / "runtime" / "heartbeats"
    (beats / "bernstein-agent.json").write_text(f"{time.time()}\n")  # its older wrapper's
    assert read_agents(project) == ([], [])  # a Bernstein agent: no telemetry, no problem
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.json").write_text(json.dumps({"timestamp": time.time(),
                                                  "telemetry": {"task_id": "X"}}))
    beats.rename(tmp_path / "old-beats")
    beats.symlink_to(elsewhere)
    agents, problems = read_agents(project)
    assert agents == [] and len(problems) == 1
    assert problems[0].file == ".sdd/runtime/heartbeats" and "symbolic link" in problems[0].reason


def test_once_its_agent_exited_no_pid_is_published(tmp_path: Path) -> None:
    init_project(tmp_path)
    live = AgentTelemetry(tmp_path, "qa-1", "T2", "qa", "haiku", CascadeConfig(), "l", "w")
    live.start("codex")
    live.started_pid(os.getpid())
    live.stage("agent", "running", 10)
    live.exited()  # the attempt goes on (janitor, gates): the pid may be anyone's now
    live.stage("gates", "quality gates running", 60)
    beat = json.loads((tmp_path / ".sdd/runtime/heartbeats/qa-1.json").read_text())
    assert beat["telemetry"]["pid"] is None and beat["phase"] == "gates"
    live.close()
    assert read_agents(tmp_path)[0][0].pid is None


def test_a_model_the_price_table_does_not_know_has_no_made_up_cost(tmp_path: Path) -> None:
    init_project(tmp_path)
    live = AgentTelemetry(tmp_path, "x-1", "T3", "x", "my-local-llm", CascadeConfig(),
                          "l", "w")
    live.start("generic")
    live.feed(b'BERNSTEIN_USAGE {"input_tokens": 10, "output_tokens": 5}\n')
    agent = live.snapshot()
    assert (agent.tokens_in, agent.cost_usd, agent.cost_estimated) == (10, None, True)


def test_an_endless_gemini_message_is_kept_bounded() -> None:
    reader = LiveReader("gemini")
    delta = json.dumps({"type": "message", "role": "assistant", "content": "x" * 20_000,
                        "delta": True}).encode() + b"\n"
    for _ in range(2000):  # 40 MB of one message
        reader.feed(delta)
    reader.feed(json.dumps(GEMINI[-1]).encode() + b"\n")
    assert len(reader.report.last) <= 200
    assert 20_000 <= len(reader.report.final_message) <= 64 * 20_000


def test_a_failing_telemetry_never_stops_the_agent_or_its_log(tmp_path: Path) -> None:
    import threading

    from console.engine.agents.process import AgentCommand, run_agent

    seen: list[bytes] = []

    def broken(chunk: bytes) -> None:
        seen.append(chunk)
        raise ValueError("a bug in the telemetry")

    script = "import sys\nfor i in range(2000): print('line', i, flush=True)\n"
    result = run_agent(AgentCommand((sys.executable, "-c", script)), tmp_path, timeout_s=60,
                       log_path=tmp_path / "agent.log", cap_bytes=1 << 20,
                       cancel=threading.Event(), on_output=broken)
    assert result.exit_code == 0 and len(seen) == 1  # dropped after its first failure
    assert (tmp_path / "agent.log").read_text().splitlines()[-1] == "line 1999"


def test_a_new_engine_forgets_the_agents_a_stopped_one_left(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    ghost = AgentLive(session="backend-dead", task_id="T0", cli="claude", model="sonnet",
                      started=time.time() - 5, pid=999_999)
    write_heartbeat(root, "backend-dead", "agent", "running", 10, telemetry=telemetry(ghost))
    beats = root / ".sdd/runtime/heartbeats"
    (beats / "bernstein-own.json").write_text(json.dumps({"timestamp": time.time()}))
    (root / ".sdd/runtime/agents.json").write_text(json.dumps(
        {"ts": time.time(), "agents": [{"id": "backend-dead", "task_ids": ["T0"]}]}))
    assert [a.session for a in read_agents(root)[0]] == ["backend-dead"]
    out = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                          "--until-idle"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert read_agents(root) == ([], []) and _fleet(root) == []
    assert (beats / "bernstein-own.json").exists()  # not ours: left alone


def test_a_bad_heartbeat_is_said_once_not_on_every_read(tmp_path: Path) -> None:
    from console.sdd.kinds import Section
    from console.sdd.source import LocalSource

    init_project(tmp_path)
    beats = tmp_path / ".sdd/runtime/heartbeats"
    (beats / "broken.json").write_text("{")
    source = LocalSource(tmp_path)
    source.load()
    assert [p.reason for p in source.state.problems if "broken" in p.file] == ["not valid JSON"]
    again = source.refresh([beats / "broken.json"])
    assert Section.PROBLEMS not in again.sections  # unchanged: no news
    (beats / "broken.json").unlink()
    gone = source.refresh([beats / "broken.json"])
    assert Section.PROBLEMS in gone.sections
    assert not [p for p in source.state.problems if "broken" in p.file]


def test_a_cluster_worker_reports_its_agents_telemetry_now_and_then(tmp_path: Path) -> None:
    from console.engine.cluster_report import LiveProgress

    init_project(tmp_path)
    live = AgentTelemetry(tmp_path, "backend-7", "T7", "backend", "sonnet", CascadeConfig(),
                          "l", "w")
    live.start("claude")
    live.started_pid(os.getpid())
    live.stage("agent", "attempt 1: claude on sonnet", 10)
    now = LiveProgress(tmp_path, "w1", every_s=0.0)
    assert now.line("T7", "backend-7", 1) is None  # nothing spent yet: nothing to say
    live.feed(json.dumps(CLAUDE_LIVE[4]).encode() + b"\n")
    live.stage("agent", "attempt 1: claude on sonnet", 10)
    assert now.line("T7", "backend-7", 1) == (
        'attempt 1 on sonnet: 10.2k in (10.2k cached) / 90 out, $0.0320 est. · tool: Edit '
        '{"file_path": "app.py", "old_string": "hi", "new_string": "yo"} (worker w1)', 10)
    later = LiveProgress(tmp_path, "w1")  # the worker's: not before LIVE_EVERY_S
    assert later.line("T7", "backend-7", 1) is None
    assert now.line("T8", "no-such-session", 1) is None
    live.close()
