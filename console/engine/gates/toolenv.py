"""Where a gate's tools come from: the *project's* environment, not the console's.

A project with its own dependencies is tested by its own interpreter: its `.venv/` or
`venv/` (a real directory in the project, not a link), else `uv run` when a `uv.lock`
is there and uv is installed, else PATH (then this interpreter's modules). The tools
run project code either way (its tests), which is why `gates` needs a trusted project.

Every piece of project code we run starts from `base.tool_environ`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from console.engine.gates.base import tool_argv, tool_environ, tool_fingerprint

VENV_NAMES = (".venv", "venv")


@dataclass(frozen=True, slots=True)
class ProjectEnv:
    kind: str  # .venv | venv | uv | PATH
    root: Path
    bin_dir: Path | None = None  # the venv's bin/, put first on PATH

    @property
    def python(self) -> Path | None:
        return self.bin_dir / "python" if self.bin_dir is not None else None

    def describe(self) -> str:
        if self.python is not None:
            return f"{self.kind}: {self.python}"
        if self.kind == "uv":
            return f"uv run (uv.lock in {self.root})"
        return "PATH"

    def tool(self, executable: str, module: str | None) -> tuple[tuple[str, ...], str]:
        """(argv, what ran it): the project's own tool first; ToolMissing if none."""
        if self.bin_dir is not None:
            own = self.bin_dir / executable
            if own.is_file() and os.access(own, os.X_OK):
                return (str(own),), f"{self.kind}: {own}"
            if module and _has_module(str(self.python), module):
                return (str(self.python), "-m", module), f"{self.kind}: {self.python} -m {module}"
        if self.kind == "uv":
            uv = shutil.which("uv")
            if uv:
                return (uv, "run", "--frozen", "--", executable), f"uv run {executable}"
        argv = tool_argv(executable, module)
        where = f"PATH: {shlex.join(argv)}"
        if self.kind != "PATH":
            where += f" (not in the project's {self.kind})"
        return argv, where

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """The tools' environment: the venv's bin/ first on PATH, VIRTUAL_ENV set, so a
        `test_command` like `pytest -x` or `python -m pytest` finds the project's own."""
        env = dict(base)
        if self.bin_dir is not None:
            env["PATH"] = os.pathsep.join([str(self.bin_dir), env.get("PATH", os.defpath)])
            env["VIRTUAL_ENV"] = str(self.bin_dir.parent)
            env.pop("PYTHONHOME", None)
        return env

    def fingerprint(self, executable: str, module: str | None) -> str:
        argv, _where = self.tool(executable, module)
        mark = tool_fingerprint(argv)
        lock = self.root / "uv.lock"
        if self.kind == "uv" and lock.is_file():
            mark += ":" + hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
        return mark


@functools.cache
def _has_module(python: str, module: str) -> bool:
    try:
        probe = subprocess.run([python, "-c", "import importlib.util, sys; sys.exit("
                                f"importlib.util.find_spec({module!r}) is None)"],
                               capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                               env=tool_environ())  # the project's interpreter: its code
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def find_env(project: Path) -> ProjectEnv:
    for name in VENV_NAMES:
        venv = project / name
        if venv.is_symlink() or not venv.is_dir():
            continue
        bin_dir = venv / "bin"
        if not bin_dir.is_symlink() and (bin_dir / "python").exists():
            return ProjectEnv(name, project, bin_dir)
    if (project / "uv.lock").is_file() and shutil.which("uv"):
        return ProjectEnv("uv", project)
    return ProjectEnv("PATH", project)
