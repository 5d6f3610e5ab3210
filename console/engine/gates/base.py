"""What every gate gets (GateContext) and gives back (Verdict), and how it runs a tool.

Tools run as real subprocesses in the checkout, in their own process group,
bounded by the gate's timeout (a timed-out tool is killed with its group), with
output captured and capped. A tool that is not installed makes its gate
`skipped` with the reason; nothing pretends to have run.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.engine.agents.process import scrubbed_env
from console.engine.llm import LlmClient
from console.engine.safegit import child_env, git_argv, git_env
from console.sdd.gate_config import GateSpec, QualityGatesConfig
from console.sdd.project_config import DEFAULT_ENV_ALLOW

MAX_OUTPUT = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str  # pass | fail | warn | timeout | skipped | bypassed
    details: str
    digest: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolRun:
    exit_code: int | None
    output: str
    timed_out: bool
    duration_s: float


def tool_environ(extra: Mapping[str, str] | None = None,
                 source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The one environment every piece of project code we run starts from (the gates'
    tools, the engine's and `bernstein-tui gates`', `test_passes`, an evolution
    proposal's tests): only `DEFAULT_ENV_ALLOW` (PATH, HOME, the locale, the terminal,
    TMPDIR, the user, the virtualenv) and LC_* from `source` (this process's
    environment), PYTHONDONTWRITEBYTECODE=1, and `extra` (the engine's marker of its own
    processes). Nothing else: no API key, cloud or forge token, and not what
    `agents.env` passes to agents (the vendor CLIs' keys)."""
    return scrubbed_env(DEFAULT_ENV_ALLOW, {"PYTHONDONTWRITEBYTECODE": "1", **(extra or {})},
                        source)


class ToolMissing(Exception):
    """The tool a gate needs is not installed; the gate is skipped with this reason."""


@functools.cache
def tool_argv(executable: str, module: str | None = None) -> tuple[str, ...]:
    """How to start a tool: on PATH, or as `python -m module` from this interpreter."""
    found = shutil.which(executable)
    if found:
        return (found,)
    if module and importlib.util.find_spec(module) is not None:
        return (sys.executable, "-m", module)
    raise ToolMissing(f"{executable} is not installed")


@functools.cache
def _version_output(argv: tuple[str, ...]) -> str:
    try:  # the project's own tool, maybe: project code, in project code's environment
        out = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=30,
                             env=tool_environ(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.stdout or out.stderr).strip()[:200]


def tool_fingerprint(argv: tuple[str, ...]) -> str:
    """Identifies the installed tool so an upgrade invalidates cached verdicts: for
    `python -m x` the distribution's version; a binary, or the launcher script pip
    writes for a console entry point (rewritten on every upgrade), by its resolved
    file's size and mtime; any other small launcher script (a pyenv or asdf shim,
    which dispatches elsewhere) by what `--version` prints."""
    if len(argv) >= 3 and argv[1] == "-m":
        try:
            return f"{argv[2]}=={importlib.metadata.version(argv[2])}"
        except importlib.metadata.PackageNotFoundError:
            spec = importlib.util.find_spec(argv[2])
            target = spec.origin if spec and spec.origin else argv[2]
    else:
        target = os.path.realpath(argv[0])
    try:
        info = os.stat(target)
        with open(target, "rb") as handle:
            head = handle.read(1024)
    except OSError:
        return f"{target}:unknown"
    launcher = b"sys.exit(" in head and (b"\nimport " in head or b"\nfrom " in head)
    if info.st_size < 16384 and head.startswith(b"#!") and not launcher:
        return f"{target}:{_version_output(argv)}"
    return f"{target}:{info.st_size}:{info.st_mtime_ns}"


def run_git_tool(args: Sequence[str], cwd: Path, timeout_s: float) -> ToolRun:
    """git as a tool (a bounded, killable run) with the engine's safe git: its minimal
    environment and none of the repository's programs (safegit)."""
    env = git_env()
    return run_tool(git_argv(cwd, args, env), cwd, timeout_s, env=env)


def run_tool(argv: Sequence[str], cwd: Path, timeout_s: float, *,
             env: Mapping[str, str] | None = None,
             cancel: threading.Event | None = None) -> ToolRun:
    """Run to completion or timeout; kill the whole process group on timeout or cancel."""
    started = time.monotonic()
    # a git the tool runs itself (a test suite's, a plugin's) runs none of the
    # repository's programs either
    env = child_env(os.environ if env is None else env, cwd)
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except FileNotFoundError as exc:
        raise ToolMissing(f"{argv[0]} is not installed") from exc
    chunks: list[bytes] = []
    size = 0

    def pump() -> None:
        nonlocal size
        stream = proc.stdout
        assert isinstance(stream, io.BufferedReader)  # Popen(stdout=PIPE), unbuffered=False
        for chunk in iter(lambda: stream.read1(65536), b""):
            if size < MAX_OUTPUT:
                chunks.append(chunk)
                size += len(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    while proc.poll() is None:
        if time.monotonic() - started > timeout_s or (cancel is not None and cancel.is_set()):
            timed_out = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    reader.join(timeout=5)
    output = b"".join(chunks).decode("utf-8", errors="replace")
    return ToolRun(proc.returncode, output, timed_out, time.monotonic() - started)


@dataclass(slots=True)
class GateContext:
    root: Path  # the checkout the gates judge (an attempt's worktree, or a repo)
    changed: tuple[str, ...]  # files changed against base_ref that still exist
    deleted: tuple[str, ...]
    base_ref: str
    config: QualityGatesConfig
    spec: GateSpec
    task_id: str
    task_title: str
    task_description: str
    llm: LlmClient
    state_dir: Path  # where gates keep baselines (coverage, benchmark)
    env: Mapping[str, str] | None = None
    cancel: threading.Event | None = None
    outputs: list[str] = field(default_factory=list)  # raw tool output, for the gate log
    #: (executable, module) → (argv, what ran it): the project's environment (toolenv)
    resolver: Callable[[str, str | None], tuple[tuple[str, ...], str]] | None = None
    ran_with: list[str] = field(default_factory=list)  # which interpreter/tool ran, said
    writer_model: str = ""  # the model whose change this is (the cross-model verifier)

    def tool(self, executable: str, module: str | None) -> tuple[str, ...]:
        """How to start a tool here (ToolMissing if it is nowhere), noting what ran it."""
        if self.resolver is None:
            argv, where = tool_argv(executable, module), "PATH"
        else:
            argv, where = self.resolver(executable, module)
        if where not in self.ran_with:
            self.ran_with.append(where)
        return argv

    @property
    def timeout_s(self) -> float:
        return self.config.timeout_s

    def python_files(self) -> list[str]:
        return [f for f in self.changed if f.endswith((".py", ".pyi"))]

    def option(self, key: str, default: Any = None) -> Any:
        return self.config.option(key, default)

    def command(self, key: str) -> list[str] | None:
        """The user's command for this gate (pipeline override, then `<key>`), if any."""
        text = self.spec.command_override or self.config.options.get(key)
        return shlex.split(text) if text else None

    def git(self, *args: str, timeout_s: float | None = None) -> ToolRun:
        """git in the checkout, hardened like all the engine's git (see safegit)."""
        return self.run(args, timeout_s, git=True)

    def run(self, argv: Sequence[str], timeout_s: float | None = None, *,
            git: bool = False) -> ToolRun:
        # no __pycache__ left in the checkout (it would be committed, and change the diff)
        env = {**(self.env if self.env is not None else os.environ),
               "PYTHONDONTWRITEBYTECODE": "1"}
        shown = ["git", *argv] if git else list(argv)
        if git:  # the log shows the command as asked, without the safety options
            env = git_env()
            argv = git_argv(self.root, argv, env)
        result = run_tool(argv, self.root, timeout_s or self.timeout_s, env=env,
                          cancel=self.cancel)
        self.outputs.append(f"$ {shlex.join(shown)}\n{result.output}"
                            f"[exit {result.exit_code}{', timed out' if result.timed_out else ''}"
                            f", {result.duration_s:.2f} s]\n")
        return result
