"""Everything our engine and CLI write, read back by the real Bernstein 3.23.0 (#17.2).

One project is made with our engine (a real git repo, the spec agent): tasks that pass,
escalate and pass, fail, are stranded by a failed dependency, and fail then are retried
and done; evolution proposals deferred by the engine, one approved and one rejected
through our CLI, one left pending. Then Bernstein's own readers, in its own venv
($BERNSTEIN_VENV, Python >= 3.12, `pip install bernstein==3.23.0`): `bernstein evolve
review|status|export`, `bernstein cost`, `bernstein serve` (GET /tasks, /tasks/counts,
/tasks/archive, /quality, /status and `bernstein status`), and its own unblocking of a
dependant our engine stranded. Without a Bernstein venv those tests are skipped, loudly;
the shape checks that need no Bernstein still run.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.engine.evolution import Proposal, record_proposal, unified_diff
from console.sdd.paths import SddPaths
from console.sdd.task_live import from_detail
from tests.engine_kit import assert_idle_exit, git, make_repo, tasks, ticket
from tests.test_engine_run import _env, run_cli

VENV = os.environ.get("BERNSTEIN_VENV", "")
BERNSTEIN = Path(VENV) / "bin" / "bernstein"
BPYTHON = Path(VENV) / "bin" / "python"
needs_bernstein = pytest.mark.skipif(
    not (VENV and BERNSTEIN.is_file() and BPYTHON.is_file()),
    reason="NO REAL BERNSTEIN: set BERNSTEIN_VENV to a venv with `pip install "
           "bernstein==3.23.0` (Python >= 3.12; .ci/run makes one) to round-trip our files "
           "through Bernstein's own readers")
TOKEN = "roundtrip-" + os.urandom(12).hex()


@dataclass
class Project:
    root: Path
    base: Path
    env: dict[str, str]  # for our CLI (the spec agent's PATH)


def _lines(root: Path, rel: str) -> list[dict[str, Any]]:
    path = root / ".sdd" / rel
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _ours(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    out = run_cli(root, env, *args)
    assert "Traceback" not in out.stderr, out.stderr
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    base = tmp_path_factory.mktemp("roundtrip")
    root = make_repo(base, config="cascade: {ladder: [haiku, sonnet], "
                                  "min_observations: 100000}\n")
    git(root, "add", "bernstein.yaml")
    git(root, "commit", "-qm", "config")  # proposals change it through a merge
    flag = base / "r1-may-pass"  # the janitor of R1 passes once the test creates it
    ticket(root, "p1", id="P1", title="Passes", priority=1,
           description="usage 1200 300\nwrite out/p1.txt ok",
           completion_signals=[{"type": "path_exists", "path": "out/p1.txt"}])
    ticket(root, "e1", id="E1", title="Escalates, then passes",
           description="usage 2000 400\nunless sonnet exit 3\nwrite out/e1.txt ok",
           completion_signals=[{"type": "path_exists", "path": "out/e1.txt"}])
    ticket(root, "f1", id="F1", title="Fails", description="usage 500 100\nexit 3")
    ticket(root, "b1", id="B1", title="Needs the one that fails", depends_on=["F1"],
           description="write out/b1.txt")
    ticket(root, "b2", id="B2", title="Needs the stranded one", depends_on=["B1"],
           description="write out/b2.txt")
    ticket(root, "r1", id="R1", title="Fails, is retried, passes",
           description="usage 700 100\nwrite out/r1.txt {attempt}",
           completion_signals=[{"type": "test_passes", "command": f"test -f {flag}"}])
    env = _env(base)
    first = _ours(root, env, "run", "--until-idle", "--workers", "2")
    assert_idle_exit(root, first.returncode, first.stdout + first.stderr)
    assert tasks(root)["R1"].status == "failed"
    flag.write_text("go\n")
    retried = _ours(root, env, "retry", "R1")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    second = _ours(root, env, "run", "--until-idle", "--workers", "2")
    assert_idle_exit(root, second.returncode, second.stdout + second.stderr)

    # evolution: the engine defers three proposals (its own writer), our CLI decides two
    paths = SddPaths(root)
    for pid, title, line in (("EVO-approve", "Format before lint", "  auto_format: true"),
                             ("EVO-reject", "Retry more", "  max_retries: 9"),
                             ("EVO-pending", "Later", "  later: true")):
        before = (root / "bernstein.yaml").read_text()
        diff = unified_diff("bernstein.yaml", before, before + "gates:\n" + line + "\n")
        record_proposal(paths, Proposal(pid, title, "policy_update", "why", 0.8,
                                        ("bernstein.yaml",), diff), "human_review_4h",
                        "L2_LOGIC change (confidence=0.80) - human review within 4h")
    approved = _ours(root, env, "approve", "EVO-approve", "--reason", "fine")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    rejected = _ours(root, env, "reject", "EVO-reject", "--reason", "too many")
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    return Project(root, base, env)


# -- what we wrote, without Bernstein ----------------------------------------------

def test_the_engine_wrote_the_states_and_lines_bernstein_reads(project: Project) -> None:
    root = project.root
    state = tasks(root)
    assert {tid: t.status for tid, t in state.items()} == {
        "P1": "done", "E1": "done", "F1": "failed", "R1": "done",
        "B1": "blocked_by_failed_dep", "B2": "blocked_by_failed_dep"}
    assert (state["B1"].result_summary, state["B1"].metadata["blocking_task_id"]) == (
        "dependency F1 is failed", "F1")
    assert state["B2"].metadata["blocking_task_id"] == "B1"  # its nearest link
    for record in _lines(root, "archive/tasks.jsonl"):
        for key in ("created_at", "completed_at", "duration_seconds"):
            assert isinstance(record[key], float | int), (key, record)
    metrics = _lines(root, "metrics/tasks.jsonl")  # one line per finished chain
    assert [(m["task_id"], m["status"]) for m in metrics if m["task_id"] == "R1"] == [
        ("R1", "failed"), ("R1", "done")]
    chains = _lines(root, "metrics/cascade_chains.jsonl")
    last = {m["task_id"]: m for m in metrics}
    for tid in ("P1", "E1", "F1", "R1"):  # running totals over every chain of the task
        spent = sum(c["total_cost_usd"] for c in chains if c["task_id"] == tid)
        assert last[tid]["cost_usd"] == pytest.approx(spent, abs=1e-6)
        assert last[tid]["cost_usd"] > 0 and last[tid]["tokens_prompt"] > 0
    assert last["E1"]["model"] == "sonnet" and last["R1"]["model"] == "haiku"
    assert {m["provider"] for m in metrics} == {"script"}  # the adapter that ran
    for line in _lines(root, "evolution/experiments.jsonl"):
        assert line.get("delta", 0.0) is not None and line["cost_usd"] is not None
    entries = _lines(root, "runtime/progress/P1.jsonl")  # where the attempt got to
    assert {e["kind"] for e in entries} == {"entry"}
    percents = [e["percent"] for e in entries]
    assert percents[0] == 10 and percents[-1] == 100 and percents == sorted(percents)
    assert entries[-1]["message"].startswith("attempt 1 done")


# -- Bernstein's CLI ---------------------------------------------------------------

def _bernstein_env(base: Path, **extra: str) -> dict[str, str]:
    home = base / "bernstein-home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERNSTEIN_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_DATA_HOME=str(home / ".local/share"), NO_COLOR="1", COLUMNS="200",
               TERM="dumb", PYTHONUNBUFFERED="1", BERNSTEIN_AUTH_TOKEN=TOKEN, **extra)
    return env


def bernstein(project: Project, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(BERNSTEIN), *args], cwd=project.root, capture_output=True,
                         text=True, timeout=180, env=_bernstein_env(project.base, **extra))
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    return out


def bernstein_py(project: Project, code: str) -> Any:
    """Run `code` in Bernstein's Python in the project; it prints one JSON value."""
    out = subprocess.run([str(BPYTHON), "-c", code], cwd=project.root, capture_output=True,
                         text=True, timeout=120, env=_bernstein_env(project.base))
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_bernstein
def test_bernstein_evolve_reads_our_proposals_and_experiments(project: Project) -> None:
    root = project.root
    pending = bernstein_py(project, (
        "import json; from pathlib import Path; from bernstein.evolution.gate import "
        "ApprovalGate; print(json.dumps(sorted(d.proposal_id for d in ApprovalGate("
        "decisions_dir=Path('.sdd/evolution')).get_pending_decisions())))"))
    assert pending == ["EVO-pending"]
    review = bernstein(project, "evolve", "review")
    assert review.returncode == 0 and "EVO-pending" in review.stdout
    assert "EVO-reject" not in review.stdout and "EVO-approve" not in review.stdout

    ours = _lines(root, "evolution/experiments.jsonl")
    report = bernstein_py(project, (
        "import json; from pathlib import Path; from bernstein.evolution.report import "
        "EvolutionReport; r = EvolutionReport(state_dir=Path('.sdd')); r.load(); "
        "print(json.dumps([len(r.experiments), r.experiments_accepted, "
        "r.experiments_rejected, r.total_experiment_cost_usd]))"))
    assert report == [len(ours), sum(e["accepted"] for e in ours),
                      sum(not e["accepted"] for e in ours), 0.0]
    assert report[1] == 1  # the approved proposal merged
    status = bernstein(project, "evolve", "status")
    assert status.returncode == 0 and "No evolution cycles found" in status.stdout
    # with a cycle of Bernstein's own evolve mode on record, both render our experiments
    (root / ".sdd/metrics/evolve_cycles.jsonl").write_text(json.dumps({
        "cycle": 1, "timestamp": time.time(), "iso_time": "", "tick": 1, "focus_area": "x",
        "tasks_completed": 4, "tasks_failed": 1, "tests_passed": 3, "tests_failed": 0,
        "commits_made": 2, "backoff_factor": 1.0, "consecutive_empty": 0,
        "duration_s": 5.0}) + "\n")
    try:
        status = bernstein(project, "evolve", "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert (f"Experiments: {len(ours)}  accepted=1  rejected={len(ours) - 1}"
                in status.stdout)
        out = project.base / "evolution_report"
        export = bernstein(project, "evolve", "export", str(out), "--format", "md")
        assert export.returncode == 0, export.stdout + export.stderr
        text = out.with_suffix(".md").read_text()
        assert f"| Experiments run | {len(ours)} |" in text
        assert "| EVO-approve | Format before lint | logic | - | $0.0000 | ✓ accepted |" in text
    finally:
        (root / ".sdd/metrics/evolve_cycles.jsonl").unlink()


@needs_bernstein
def test_bernstein_cost_adds_up_what_our_engine_spent(project: Project) -> None:
    out = bernstein(project, "cost", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    last = {m["task_id"]: m for m in _lines(project.root, "metrics/tasks.jsonl")}
    by_model: dict[str, list[float]] = {}
    for m in last.values():
        row = by_model.setdefault(m["model"], [0, 0.0, 0, 0])
        row[0] += 1
        row[1] += m["cost_usd"]
        row[2] += m["tokens_prompt"]
        row[3] += m["tokens_completion"]
    rows = {r["model"]: r for r in report["rows"]}
    assert set(rows) == set(by_model)  # every archived task has a metrics line
    for model, (count, cost, tokens_in, tokens_out) in by_model.items():
        assert (rows[model]["tasks"], rows[model]["tokens_in"], rows[model]["tokens_out"]) == (
            count, tokens_in, tokens_out)
        assert rows[model]["cost_usd"] == pytest.approx(cost, abs=1e-6)
    assert (report["tasks_done"], report["tasks_failed"]) == (3, 1)


# -- Bernstein's task server -----------------------------------------------------------

def _free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port != 8052:
            return port


@contextmanager
def served(project: Project, pids: list[int] | None = None, **extra: str) -> Iterator[str]:
    """`bernstein serve` on the project: a free loopback port, our token pinned before it
    starts, HOME in the temp dir, `extra` in its environment (its pid added to `pids`);
    stopped (its process group) on the way out."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(project.base / f"serve-{port}.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen([str(BERNSTEIN), "serve", "--host", "127.0.0.1", "--port",
                               str(port)], cwd=project.root, stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=_bernstein_env(project.base, **extra),
                              start_new_session=True)
    if pids is not None:
        pids.append(server.pid)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                assert server.poll() is None, (project.base / f"serve-{port}.log").read_text()
                assert time.monotonic() < deadline, "bernstein serve never became healthy"
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(timeout=10)
        log.close()


def api(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:2000]


def _ok(url: str, path: str) -> Any:
    status, body = api(url, "GET", path)
    assert status == 200, (path, status, body)
    return body


@pytest.fixture(scope="module")
def copy(project: Project, tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The project as our engine left it, for the server to change."""
    base = tmp_path_factory.mktemp("served")
    shutil.copytree(project.root, base / "repo", symlinks=True)
    return Project(base / "repo", base, project.env)


@needs_bernstein
def test_bernstein_serves_our_tasks_archive_and_quality_and_unblocks(copy: Project) -> None:
    root = copy.root
    ours = {tid: t.status for tid, t in tasks(root).items()}
    archive = _lines(root, "archive/tasks.jsonl")
    finished = {m["task_id"]: m for m in _lines(root, "metrics/tasks.jsonl")}
    with served(copy) as url:
        assert {t["id"]: t["status"] for t in _ok(url, "/tasks")} == ours
        counts = _ok(url, "/tasks/counts")
        assert counts["total"] == len(ours) and counts["done"] == 3 and counts["failed"] == 1
        served_archive = _ok(url, "/tasks/archive?limit=1000")
        assert [(r["task_id"], r["status"]) for r in served_archive] == [
            (r["task_id"], r["status"]) for r in archive]
        quality = _ok(url, "/quality")
        points = [p for f in sorted((root / ".sdd/metrics").glob("task_completion_time_*"))
                  for p in _lines(root, f"metrics/{f.name}")]
        assert quality["overall"]["total_tasks"] == len(points) > 0
        done_points = sum(p["labels"]["success"] == "True" for p in points)
        assert quality["overall"]["success_rate"] == pytest.approx(done_points / len(points))
        assert set(quality["per_model"]) == {m["model"] for m in finished.values()}
        gates: dict[str, dict[str, int]] = {}  # our gate lines, as /quality counts them
        for line in _lines(root, "metrics/quality_gates.jsonl"):
            row = gates.setdefault(line["gate"], {"total": 0, "pass": 0, "blocked": 0,
                                                  "flagged": 0})
            row["total"] += 1
            row[line["result"]] += 1
        assert gates and {g: {k: v for k, v in row.items() if k != "pass_rate"}
                          for g, row in quality["gate_stats"].items()} == gates
        forecast = _ok(url, "/quality/budget-forecast")  # reads metrics/tasks.jsonl
        assert forecast["current_spend_usd"] == pytest.approx(
            sum(m["cost_usd"] for m in finished.values()), abs=1e-4)
        # the server replays our progress entries; the console reads them back (#17.4)
        replayed = [e["message"] for e in _ok(url, "/tasks/P1")["progress_log"]]
        assert replayed == [e["message"] for e in _lines(root, "runtime/progress/P1.jsonl")]
        live = from_detail(_ok(url, "/dashboard/tasks/P1"))
        assert [e["message"] for e in live.progress] == replayed
        stranded = _ok(url, "/tasks/B1")
        assert (stranded["status"], stranded["result_summary"]) == (
            "blocked_by_failed_dep", "dependency F1 is failed")
        assert {frozenset((e["from"], e["to"])) for e in _ok(url, "/tasks/graph")["edges"]
                } == {frozenset(("F1", "B1")), frozenset(("B1", "B2"))}
        status = bernstein(copy, "status", "--json", BERNSTEIN_SERVER_URL=url)
        assert status.returncode == 0, status.stdout + status.stderr
        summary = json.loads(status.stdout)
        assert (summary["total"], summary["done"], summary["failed"]) == (len(ours), 3, 1)

        # the dependant our engine stranded: Bernstein reopens it when F1 is retried, done
        status, body = api(url, "POST", "/tasks/batch-ops", {"action": "retry", "ids": ["F1"]})
        assert status == 200 and body["succeeded"] == ["F1"], body
        assert api(url, "POST", "/tasks/F1/claim")[0] == 200
        status, body = api(url, "POST", "/tasks/F1/complete", {"result_summary": "fixed"})
        assert status == 200, body
        after = {t["id"]: t for t in _ok(url, "/tasks")}
        assert after["F1"]["status"] == "done" and after["B1"]["status"] == "open", after["B1"]

        # a task Bernstein made, which our CLI then closes while no server runs
        status, made = api(url, "POST", "/tasks", {"title": "Made by Bernstein",
                                                    "description": "d", "role": "qa"})
        assert status == 201, made
        assert api(url, "POST", f"/tasks/{made['id']}/claim")[0] == 200
    cancelled = _ours(root, copy.env, "cancel", made["id"], "--reason", "not needed")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    with served(copy) as url:
        served_archive = _ok(url, "/tasks/archive?limit=1000")
        [record] = [r for r in served_archive if r["task_id"] == made["id"]]
        assert record["status"] == "cancelled" and record["duration_seconds"] >= 0
        assert {t["id"]: t["status"] for t in _ok(url, "/tasks")}[made["id"]] == "cancelled"
        assert len(served_archive) == len(_lines(root, "archive/tasks.jsonl"))



#: Bernstein's own readers of what the live telemetry writes (#33): the heartbeat
#: (AgentSignalManager), the token sidecar (TokenGrowthMonitor, which sums the lines) and
#: agents.json (the snapshot /dashboard/data hydrates its agents from when its own
#: orchestrator has none)
TELEMETRY_READERS = """
import json, sys
from pathlib import Path
from bernstein.core.agents.agent_signals import AgentSignalManager
from bernstein.core.routes import status_dashboard as dashboard
from bernstein.core.tokens.token_monitor import TokenGrowthMonitor
root, session = Path(sys.argv[1]), sys.argv[2]
beat = AgentSignalManager(root).read_heartbeat(session)
agents = {}
dashboard._populate_agents_from_snapshots(agents, dashboard._read_agents_snapshot(root / ".sdd"))
agent = agents[session]
print(json.dumps({"phase": beat.phase, "pct": beat.progress_pct, "message": beat.message,
                  "tokens": TokenGrowthMonitor().read_tokens(session, root),
                  "task_ids": agent.task_ids, "used": agent.tokens_used,
                  "provider": agent.provider, "pid": agent.pid, "status": str(agent.status)}))
"""


@needs_bernstein
def test_bernstein_reads_our_live_telemetry(tmp_path: Path) -> None:
    from console.engine.agents.telemetry import AgentTelemetry
    from console.engine.cascade import CascadeConfig
    from console.sdd.skeleton import init_project

    init_project(tmp_path)
    live = AgentTelemetry(tmp_path, "backend-5e55", "T1", "backend", "sonnet",
                          CascadeConfig(), ".sdd/runtime/backend-5e55.log", "wt")
    live.start("claude")
    live.started_pid(os.getpid())
    live.feed(json.dumps({"type": "assistant", "message": {
        "id": "m1", "content": [], "usage": {"input_tokens": 900,
                                             "output_tokens": 100}}}).encode() + b"\n")
    live.stage("agent", "attempt 1: claude on sonnet", 10)  # its heartbeat, its tokens
    live.beat()  # agents.json, as the attempt's beat thread writes it
    out = subprocess.run([str(BPYTHON), "-c", TELEMETRY_READERS, str(tmp_path),
                          "backend-5e55"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    read = json.loads(out.stdout.strip().splitlines()[-1])
    assert (read["phase"], read["pct"]) == ("agent", 10)
    assert read["message"] == "attempt 1: claude on sonnet"
    assert read["tokens"] == 1000 and read["used"] == 1000
    assert read["task_ids"] == ["T1"] and read["provider"] == "claude"
    assert read["pid"] == os.getpid() and read["status"] == "working"
    live.close()
