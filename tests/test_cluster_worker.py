"""The cluster worker's parts that need no task server (#23): landing through a shared git
remote (real bare origin, real clones, real git), the report queue against a server that
goes away, and the layers (engine and remote never import each other)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from console.engine.cluster_report import ReportQueue, ServerAway
from console.engine.errors import EngineError
from console.engine.shared_remote import SharedRemoteRepo, task_of_branch
from console.remote.health import decode_nodes, workers_line
from console.sdd.skeleton import init_project
from tests.bernstein_server import FakeBernstein
from tests.conftest import REPO, trusted
from tests.engine_kit import git
from tests.test_engine_run import _env
from tests.test_layers import _imports


def _origin(base: Path) -> Path:
    seed = base / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("# shared\n")
    (seed / "shared.txt").write_text("base\n")
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "init")
    origin = base / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(origin)], check=True)
    return origin


def _clone(base: Path, origin: Path, name: str) -> SharedRemoteRepo:
    root = base / name
    subprocess.run(["git", "clone", "-q", str(origin), str(root)], check=True)
    return SharedRemoteRepo(root)


def _attempt(repo: SharedRemoteRepo, task: str, files: dict[str, str]) -> str:
    """An attempt's branch with these files written and committed, as the engine makes it."""
    branch = f"bernstein/{task}-1"
    worktree = repo.root / ".sdd" / "worktrees" / task
    worktree.parent.mkdir(parents=True, exist_ok=True)
    repo.add_worktree(worktree, branch)
    for name, text in files.items():
        (worktree / name).write_text(text)
    repo.commit_all(worktree, f"work of {task}")
    return branch


def _trailers(origin: Path) -> list[str]:
    bodies = git(origin, "log", "main", "--format=%B")
    return [line.split(": ", 1)[1] for line in bodies.splitlines()
            if line.startswith("Bernstein-Task: ")]


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, SharedRemoteRepo, SharedRemoteRepo]:
    origin = _origin(tmp_path)
    return origin, _clone(tmp_path, origin, "w1"), _clone(tmp_path, origin, "w2")


def test_a_push_race_is_retried_on_the_new_remote_base(pair) -> None:
    origin, w1, w2 = pair
    b1 = _attempt(w1, "T1", {"one.txt": "1\n"})
    b2 = _attempt(w2, "T2", {"two.txt": "2\n"})
    pushing = w2._net
    raced: list[str] = []

    def w1_lands_first(args: list[str]) -> str:  # w1 pushes between w2's fetch and push
        if "push" in args and not raced:
            raced.append(w1.merge(b1, "Merge T1").message)
        return pushing(args)

    w2._net = w1_lands_first  # type: ignore[method-assign]
    second = w2.merge(b2, "Merge T2")  # its first push is rejected for real, then retried
    assert raced and raced[0].startswith("merged 1 file(s) into origin/main")
    assert second.ok, second.message
    assert "after 1 push race(s)" in second.message
    assert sorted(_trailers(origin)) == ["T1", "T2"]
    assert git(origin, "show", "main:one.txt") == "1\n"
    assert git(origin, "show", "main:two.txt") == "2\n"
    assert w2.landed_at[b2] == git(origin, "rev-parse", "main").strip()


def test_concurrent_landings_from_two_clones_all_arrive_once(pair) -> None:
    origin, w1, w2 = pair
    branches = {repo: [_attempt(repo, f"{name}-{i}", {f"{name}-{i}.txt": f"{i}\n"})
                       for i in range(4)] for repo, name in ((w1, "A"), (w2, "B"))}
    results: list[str] = []

    def land(repo: SharedRemoteRepo) -> None:
        for branch in branches[repo]:
            outcome = repo.merge(branch, f"Merge {branch}")
            results.append(f"{outcome.ok} {outcome.message}")

    threads = [threading.Thread(target=land, args=(repo,)) for repo in (w1, w2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(line.startswith("True") for line in results), results
    assert sorted(_trailers(origin)) == sorted(f"{n}-{i}" for n in "AB" for i in range(4))


def test_a_true_conflict_fails_naming_the_file_and_leaves_origin_alone(pair) -> None:
    origin, w1, w2 = pair
    b1 = _attempt(w1, "T1", {"shared.txt": "from w1\n"})
    b2 = _attempt(w2, "T2", {"shared.txt": "from w2\n"})
    assert w1.merge(b1, "Merge T1").ok
    before = git(origin, "rev-parse", "main")
    conflict = w2.merge(b2, "Merge T2")
    assert not conflict.ok
    assert conflict.message == "merge conflict in shared.txt"
    assert git(origin, "rev-parse", "main") == before
    assert git(w2.root, "status", "--porcelain", "--untracked-files=no") == ""


def test_work_already_on_origin_is_not_merged_twice(pair) -> None:
    origin, w1, w2 = pair
    assert w1.merge(_attempt(w1, "T1", {"one.txt": "1\n"}), "Merge T1").ok
    again = w2.merge(_attempt(w2, "T1", {"one.txt": "1 again\n"}), "Merge T1")
    assert again.ok and "not merged again" in again.message
    assert _trailers(origin) == ["T1"]
    assert git(origin, "show", "main:one.txt") == "1\n"


def test_unpushed_merges_of_the_engine_are_dropped_but_someone_elses_commit_stops_it(
        pair) -> None:
    origin, w1, _w2 = pair
    branch = _attempt(w1, "T1", {"one.txt": "1\n"})
    assert super(SharedRemoteRepo, w1).merge(branch, "Merge T1 (never pushed)").ok
    w1.sync()  # a merge the engine made and never pushed (killed before it could)
    assert git(w1.root, "rev-parse", "HEAD") == git(origin, "rev-parse", "main")
    (w1.root / "mine.txt").write_text("operator's\n")
    git(w1.root, "add", "mine.txt")
    git(w1.root, "-c", "user.name=op", "-c", "user.email=op@example.invalid", "commit",
        "-qm", "the operator's own commit")
    with pytest.raises(EngineError, match="1 commit\\(s\\) that are not on origin/main"):
        w1.sync()


def test_an_unreachable_remote_lets_an_attempt_start_but_not_land(pair) -> None:
    origin, w1, _w2 = pair
    origin.rename(origin.with_name("moved.git"))  # the remote stops answering
    branch = _attempt(w1, "T1", {"one.txt": "1\n"})  # starts from the last fetch
    landing = w1.merge(branch, "Merge T1")
    assert not landing.ok
    assert landing.message.startswith("cannot fetch main from origin: ")
    assert git(w1.root, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_clone_without_the_remote_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "alone"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit",
        "--allow-empty", "-qm", "init")
    with pytest.raises(EngineError, match="no git remote 'origin'"):
        SharedRemoteRepo(root)


def test_branch_names_give_their_task() -> None:
    assert task_of_branch("bernstein/9263de05eb82-3") == "9263de05eb82"
    assert task_of_branch("bernstein/a.b-c-12") == "a.b-c"
    assert task_of_branch("main") is None
    assert task_of_branch("bernstein/../x-1") is None


class _Server:
    """Takes reports until told to be away; one task's reports it refuses (a 4xx)."""

    url = "http://127.0.0.1:9"
    node_id = None

    def __init__(self) -> None:
        self.away = False
        self.got: list[tuple[str, str]] = []

    def _take(self, verb: str, task_id: str) -> None:
        if self.away:
            raise ServerAway("GET http://127.0.0.1:9: connection refused")
        if task_id == "gone":
            raise ServerAway("not found (404)", unreachable=False)
        self.got.append((verb, task_id))

    def progress(self, task_id: str, message: str, percent: int) -> None:
        self._take("progress", task_id)

    def complete(self, task_id: str, summary: str, branch: str | None,
                 sha: str | None) -> None:
        self._take("complete", task_id)

    def fail(self, task_id: str, reason: str) -> None:
        self._take("fail", task_id)

    def release(self, task_id: str, reason: str) -> None:
        self._take("release", task_id)


def test_reports_wait_while_the_server_is_away_and_go_in_order() -> None:
    server = _Server()
    queue = ReportQueue()
    queue.progress("T1", "attempt 1", 10)
    queue.complete("gone", "done", None, None)
    queue.complete("T1", "done", "main", "abc")
    queue.release("T2", "stopping")
    server.away = True
    with pytest.raises(ServerAway):
        queue.send(server)  # type: ignore[arg-type]
    assert len(queue) == 4 and server.got == []
    server.away = False
    queue.send(server)  # type: ignore[arg-type]
    assert server.got == [("progress", "T1"), ("complete", "T1"), ("release", "T2")]
    assert queue.dropped == ["complete gone: not found (404)"]
    assert len(queue) == 0


def test_engine_and_remote_never_import_each_other() -> None:
    offenders = []
    for layer, other in (("engine", "console.remote"), ("remote", "console.engine")):
        for path in sorted((REPO / "console" / layer).rglob("*.py")):
            offenders += [f"{path.relative_to(REPO)} imports {name}"
                          for name in _imports(path)
                          if name == other or name.startswith(other + ".")]
    assert offenders == []


def test_the_header_line_of_worker_load() -> None:
    nodes = decode_nodes([
        {"id": "a1", "name": "w1", "status": "online", "last_heartbeat": 98.0,
         "capacity": {"max_agents": 2, "active_agents": 1}},
        {"id": "b2", "name": "w2", "status": "offline", "last_heartbeat": 30.0,
         "capacity": {"max_agents": 4, "active_agents": "many"}},
        {"name": "no id"}, "junk", {"id": 7}])
    assert workers_line(nodes, now=100.0) == "workers 1/2: w1 1/2 2s, w2 0/4 70s offline"
    assert workers_line(()) == ""
    assert decode_nodes({"not": "a list"}) == ()


# -- the command line (a stand-in server: tests/bernstein_server.py) ---------------------

@pytest.fixture
def worker_clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    origin = _origin(tmp_path)
    root = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(root)], check=True)
    init_project(root)
    return trusted(root), _env(tmp_path)


def _run(root: Path, env: dict[str, str], url: str, *args: str, token: str = "test-token"
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run", "--server",
                           url, *args], env={**env, "BERNSTEIN_AUTH_TOKEN": token},
                          capture_output=True, text=True, timeout=120)


def test_a_server_without_a_node_registry_gets_plain_claims(worker_clone) -> None:
    root, env = worker_clone
    server = FakeBernstein().start()  # no /cluster/nodes, no open task
    try:
        out = _run(root, env, server.url, "--until-idle", "--roles", "backend")
    finally:
        server.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the server has no node registry; plain claims" in out.stdout
    assert "nothing left to claim; leaving" in out.stdout
    assert "GET /tasks/next/backend?claimed_by_session=engine-" in " ".join(
        f"GET {path}" for path in server.paths("GET"))


@pytest.mark.parametrize(("args", "token", "said"), [
    (("--roles", "back/end"), "test-token", "--roles back/end: expected names like"),
    (("--name", "a b"), "test-token", "--name a b: letters, digits"),
    (("--workers", "0"), "test-token", "--workers must be at least 1"),
    ((), "wrong", "token rejected"),
])
def test_bad_usage_is_one_line_and_exit_2(worker_clone, args, token, said) -> None:
    root, env = worker_clone
    server = FakeBernstein().start()
    try:
        out = _run(root, env, server.url, *args, token=token)
    finally:
        server.stop()
    assert out.returncode == 2, out.stdout + out.stderr
    assert said in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not [p for p in server.paths() if "/tasks/next" in p]


def test_a_clone_without_a_remote_stops_before_claiming(worker_clone) -> None:
    root, env = worker_clone
    git(root, "remote", "remove", "origin")
    trusted(root)  # the remotes are part of the trusted git config (#32)
    server = FakeBernstein().start()
    try:
        out = _run(root, env, server.url)
    finally:
        server.stop()
    assert out.returncode == 1, out.stdout + out.stderr
    assert "no git remote 'origin'" in out.stderr and "Traceback" not in out.stderr
    assert not [p for p in server.paths() if "/tasks/next" in p]


def test_a_workers_options_without_a_server_are_refused(worker_clone) -> None:
    root, env = worker_clone
    out = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                          "--roles", "qa", "--on-stop", "release"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.strip() == ("bernstein-tui: --roles, --on-stop: only with run "
                                  "--server URL")
