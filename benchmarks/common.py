"""Shared by the benchmarks: timing statistics and the machine they ran on."""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Figure:
    name: str
    unit: str
    samples: list[float]
    target: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "median": self.median, "p99": self.p99,
                "runs": len(self.samples), "target": self.target, **self.notes}


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "load": os.getloadavg()}


# -- shared data sets, made once per run in one temp dir, removed at exit --------

_WORKDIR: list[Path] = []
_DATASETS: dict[str, Path] = {}


def workdir() -> Path:
    if not _WORKDIR:
        path = Path(tempfile.mkdtemp(prefix="bench-"))
        atexit.register(shutil.rmtree, path, True)
        _WORKDIR.append(path)
    return _WORKDIR[0]


def dataset(name: str) -> Path:
    """A project: "empty" (init only), "small" or "large" (benchmarks.generate sizes)."""
    if name not in _DATASETS:
        from benchmarks.generate import Sizes, generate
        from console.sdd.skeleton import init_project

        root = workdir() / f"data-{name}"
        root.mkdir()
        if name == "empty":
            init_project(root)
        else:
            generate(root, Sizes.small() if name == "small" else Sizes(), seed=0)
        _DATASETS[name] = root
    return _DATASETS[name]


def console_argv(root: Path) -> list[str]:
    """The console, watching only (no engine), as an operator starts it."""
    return [sys.executable, "-m", "console", "-C", str(root), "--read-only"]


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """A server started in its own session: SIGTERM to its group, then SIGKILL after 20 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def came_up(client: Any, process: subprocess.Popen[bytes], timeout: float = 120) -> bool:
    """Poll a task server's /health (through the console's client) until it answers;
    False when the process died or the time ran out."""
    from console.remote.client import ServerError

    deadline = time.monotonic() + timeout
    while True:
        try:
            client.health()
            return True
        except ServerError:
            if process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.5)
