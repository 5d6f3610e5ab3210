"""Engine throughput with trivial tasks, 1 and 4 workers, reported two ways.

- State machine: N tasks driven by 1 or 4 threads through the engine's TaskStore,
  open → claimed → in_progress → done (each step an fsynced full record in
  runtime/tasks.jsonl, `done` also an archive record), as the engine's workers do.
- End to end: `bernstein-tui -C DIR run --until-idle --workers N` on a real git repo
  with N tickets, a script agent that exits 0 (`true`), no gates and no completion
  signals. Each task: ticket ingest, claim, a git worktree and branch, the agent
  subprocess, merge, cleanup. Tasks per second = tasks / wall time of the command
  (its start-up included, so its own figure is given too). Once more with 1 worker and
  an agent that prints a claude stream-JSON run of 401 lines (benchmarks/stream_agent.py),
  which the live telemetry reads as it comes (#33: it must add <= 5 % per attempt).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import REPO, Figure
from console.engine.store import TaskStore
from console.model import Task, TaskState
from console.sdd.paths import SddPaths
from console.sdd.skeleton import init_project

STEPS = (TaskState.CLAIMED, TaskState.IN_PROGRESS, TaskState.DONE)
CONFIG = """agents:
  script:
    command: ["/bin/true"]
quality_gates:
  enabled: false
"""


def state_machine(tasks: int, workers: int) -> float:
    """Tasks per second through TaskStore.transition with `workers` threads."""
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        init_project(root)
        store = TaskStore(SddPaths(root))
        for index in range(tasks):
            store.create(Task(id=f"t{index:05d}", title=f"trivial {index}", status="open"))
        ids = [f"t{index:05d}" for index in range(tasks)]

        def work(mine: list[str]) -> None:
            for task_id in mine:
                for step in STEPS:
                    store.transition(task_id, step)

        threads = [threading.Thread(target=work, args=(ids[i::workers],))
                   for i in range(workers)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        assert all(t.status == "done" for t in store.snapshot())
        return tasks / elapsed


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


STREAM_AGENT = REPO / "benchmarks" / "stream_agent.py"
STREAM_CONFIG = (f"agents:\n  script:\n    command: [{json.dumps(sys.executable)}, "
                 f"{json.dumps(str(STREAM_AGENT))}]\nquality_gates:\n  enabled: false\n")


def end_to_end(tasks: int, workers: int, config: str = CONFIG) -> tuple[float, float]:
    """(tasks per second, seconds) for `run --until-idle` over `tasks` tickets."""
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        _git(root, "init", "-q", "-b", "main")
        _git(root, "config", "user.name", "bench")
        _git(root, "config", "user.email", "bench@example.invalid")
        (root / "README.md").write_text("# bench\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "init")
        init_project(root)
        (root / "bernstein.yaml").write_text(config)
        backlog = SddPaths(root).backlog_open
        for index in range(tasks):
            (backlog / f"t{index:04d}.yaml").write_text(
                f"title: Trivial task {index}\ndescription: nothing to do\n")
        # trusted in a config dir of its own: the user's trust file never lists it
        env = {**os.environ, "XDG_CONFIG_HOME": str(Path(tmp) / "config")}
        subprocess.run([sys.executable, "-m", "console", "-C", str(root), "trust"],
                       cwd=REPO, capture_output=True, env=env, check=True)
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                              "--until-idle", "--workers", str(workers)],
                             cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
        elapsed = time.perf_counter() - started
        if out.returncode != 0:
            raise RuntimeError(f"run --until-idle failed ({out.returncode}): "
                               f"{out.stderr[-500:]}")
        from console.sdd.source import LocalSource

        source = LocalSource(root)
        source.load()
        done = sum(1 for t in source.state.tasks.values() if t.status in ("done", "closed"))
        if done != tasks:
            raise RuntimeError(f"only {done} of {tasks} tasks finished")
        return tasks / elapsed, elapsed


def run(quick: bool) -> list[Figure]:
    figures = []
    store_tasks, repeats = (300, 3) if quick else (1000, 5)
    for workers in (1, 4):
        samples = [state_machine(store_tasks, workers) for _ in range(repeats)]
        figures.append(Figure(f"engine: state machine, {workers} worker(s)", "t/s", samples,
                              target="≥ 200 tasks/s with 4 workers" if workers == 4 else "",
                              notes={"tasks": store_tasks, "fsync": True}))
    e2e_tasks, repeats = (8, 1) if quick else (40, 3)
    for workers in (1, 4):
        pairs = [end_to_end(e2e_tasks, workers) for _ in range(repeats)]
        figures.append(Figure(f"engine: end to end, {workers} worker(s)", "t/s",
                              [p[0] for p in pairs],
                              notes={"tasks": e2e_tasks,
                                     "wall_s": round(sorted(p[1] for p in pairs)[
                                         len(pairs) // 2], 1)}))
    pairs = [end_to_end(e2e_tasks, 1, STREAM_CONFIG) for _ in range(repeats)]
    figures.append(Figure("engine: end to end, stream-JSON agent, 1 worker(s)", "t/s",
                          [p[0] for p in pairs],
                          target="telemetry <= 5 % of the per-attempt time",
                          notes={"tasks": e2e_tasks, "agent_lines": 401}))
    return figures
