"""The gate pipeline (seed 000): conditions, order, concurrency, cache, bypass, plugins.

`auto_format` runs first (it may change files), then every other gate at once in
threads, each bounded by `timeout_s`. A failing or timed-out required gate
blocks; an optional one only reports; a required gate that could not run
(tool missing) is skipped and said loudly.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from console import __version__
from console.engine.gates import (
    agent_mutation,
    extra_gates,
    python_gates,
    repo_gates,
    scan_gates,
    verifier,
)
from console.engine.gates.base import (
    GateContext,
    ToolMissing,
    Verdict,
    run_git_tool,
    run_tool,
    tool_environ,
)
from console.engine.gates.cache import GateCache, cache_key, describe
from console.engine.gates.imports import is_test_file
from console.engine.gates.plugins import LoadedPlugin, discover, run_plugin
from console.engine.gates.toolenv import ProjectEnv, find_env
from console.engine.llm import LlmClient
from console.engine.safegit import NO_DIFF_PROGRAMS, git_argv, git_env
from console.model import GateReport, GateResult
from console.sdd.fileio import atomic_write_text
from console.sdd.gate_config import GateSpec, QualityGatesConfig, parse_quality_gates
from console.sdd.gate_registry import GATES

GateFn = Callable[[GateContext], Verdict]

#: how each built gate of the registry (sdd/gate_registry) runs; a test checks they agree
BUILTIN: Mapping[str, GateFn] = MappingProxyType({
    "auto_format": python_gates.auto_format,
    "lint": python_gates.lint,
    "type_check": python_gates.type_check,
    "tests": python_gates.tests,
    "security_scan": python_gates.security_scan,
    "complexity_check": python_gates.complexity_check,
    "dead_code": python_gates.dead_code,
    "mutation_testing": python_gates.mutation_testing,
    "pii_scan": scan_gates.pii_scan,
    "dlp_scan": scan_gates.dlp_scan,
    "large_file": scan_gates.large_file,
    "import_cycle": scan_gates.import_cycle,
    "merge_conflict": repo_gates.merge_conflict,
    "coverage_delta": repo_gates.coverage_delta,
    "dep_audit": repo_gates.dep_audit,
    "benchmark": repo_gates.benchmark,
    "intent_verification": repo_gates.intent_verification,
    "cross_model": verifier.cross_model,
    "comment_quality": extra_gates.comment_quality,
    "review_rubric": extra_gates.review_rubric,
    "agent_test_mutation": agent_mutation.agent_test_mutation,
    "integration_test_gen": extra_gates.integration_test_gen,
    "test_expansion": extra_gates.test_expansion,
})
#: what keys a gate's cache entry besides the diff, and what is never cached: the registry's
TOOLS = {g.name: g.tool for g in GATES if g.tool is not None}
LIBRARIES = {g.name: g.library for g in GATES if g.library is not None}
NEVER_CACHED = frozenset(g.name for g in GATES if not g.cached)  # state or side effects
UNCACHED_STATUSES = frozenset({"timeout", "skipped"})  # a tool or endpoint may come back
BLOCKING = frozenset({"fail", "timeout"})
AFTER_THE_REST = frozenset({"cross_model"})  # the reviewer sees a change the gates passed
LAST_OR_FIRST = AFTER_THE_REST | {"auto_format"}
MAX_LOG_CHARS = 1024 * 1024
PY_SUFFIXES = (".py", ".pyi")
DEPENDENCY_FILES = ("requirements", "pyproject.toml", "setup.py", "setup.cfg", "poetry.lock",
                    "uv.lock", "Pipfile", "package.json", "package-lock.json", "Cargo.toml",
                    "go.mod")


def condition_met(condition: str, changed: tuple[str, ...]) -> bool:
    if condition == "always":
        return True
    if condition == "any_changed":
        return bool(changed)
    if condition == "python_changed":
        return any(f.endswith(PY_SUFFIXES) for f in changed)
    if condition == "tests_changed":
        return any(is_test_file(f) for f in changed)
    if condition == "deps_changed":
        return any(Path(f).name.startswith(DEPENDENCY_FILES) for f in changed)
    return False


@dataclass(frozen=True, slots=True)
class GateSetup:
    config: QualityGatesConfig
    plugins: Mapping[str, LoadedPlugin] = field(default_factory=dict)


def load_gate_setup(project: Path, raw: object) -> GateSetup:
    """Discover plugins, then check the config against built-ins and plugins.

    Raises GateConfigError or PluginError with a message naming the problem.
    """
    plugins = discover(project)
    own = {name: (p.required, p.condition) for name, p in plugins.items()}
    return GateSetup(parse_quality_gates(raw, own), plugins)


@dataclass(frozen=True, slots=True)
class Changes:
    changed: tuple[str, ...]
    deleted: tuple[str, ...]
    fingerprint: str  # the diff's content hash, for the cache


def _git(root: Path, *args: str) -> str:
    run = run_git_tool(args, root, 120)
    if run.exit_code != 0:
        raise ToolMissing(f"git {args[0]} failed: {run.output.strip()[-200:]}")
    return run.output


def _stream_hash(root: Path, args: list[str], digest: Any) -> None:
    """Feed a git command's whole output into the hash (no cap: every byte counts)."""
    env = git_env()
    proc = subprocess.Popen(git_argv(root, args, env), cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    stdout = proc.stdout
    assert stdout is not None
    for chunk in iter(lambda: stdout.read(1 << 20), b""):
        digest.update(chunk)
    if proc.wait() != 0:
        raise ToolMissing(f"git {args[0]} failed")


def collect_changes(root: Path, base_ref: str) -> Changes:
    """The working tree against where it left base_ref (their merge base), untracked files
    included, .sdd/ excluded: what this change did, not what base did since."""
    _git(root, "rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}")
    tip = _git(root, "rev-parse", base_ref).strip()
    merge_base = run_tool(git_argv(root, ["merge-base", base_ref, "HEAD"]), root, 60,
                          env=git_env())
    base = merge_base.output.strip() if merge_base.exit_code == 0 else tip
    fields = _git(root, "diff", "--name-status", "--no-renames", "-z", base).split("\0")
    changed: list[str] = []
    deleted: list[str] = []
    for kind, name in zip(fields[0::2], fields[1::2], strict=False):
        if not name or name.startswith(".sdd/"):
            continue
        (deleted if kind.startswith("D") else changed).append(name)
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z").split("\0")
    extra = [n for n in untracked if n and not n.startswith(".sdd/")]
    changed += extra
    digest = hashlib.sha256(f"{base} {tip}".encode())  # the tip: merge_conflict looks at it
    _stream_hash(root, ["diff", "--binary", *NO_DIFF_PROGRAMS, base, "--", ".", ":!.sdd"], digest)
    for name in sorted(extra):
        digest.update(name.encode("utf-8", "surrogateescape"))
        with contextlib.suppress(OSError):
            digest.update(hashlib.sha256((root / name).read_bytes()).digest())
    return Changes(tuple(sorted(set(changed))), tuple(sorted(deleted)), digest.hexdigest())


def _parse_bypass(environ: Mapping[str, str]) -> tuple[set[str], str]:
    names = {n.strip() for n in environ.get("BERNSTEIN_SKIP_GATES", "").split(",") if n.strip()}
    return names, environ.get("BERNSTEIN_SKIP_GATE_REASON", "").strip()


@functools.cache
def gates_revision() -> str:
    """Our own gate code is part of every cache key: a change to a gate re-runs it."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _library_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@dataclass(frozen=True, slots=True)
class PipelineRun:
    report: GateReport
    reformatted: bool  # auto_format changed files: commit them before merging

    @property
    def blocking(self) -> list[GateResult]:
        return [r for r in self.report.results if r.blocked]


class GatePipeline:
    def __init__(self, setup: GateSetup, llm: LlmClient, *, cache: GateCache | None,
                 state_dir: Path, env: Mapping[str, str] | None = None,
                 log_dir: Path | None = None, project: Path | None = None) -> None:
        self.project = project  # where the project's own environment is (.venv, uv.lock)
        self.log_dir = log_dir  # raw tool output, one capped file per task and gate
        self.setup = setup
        self.llm = llm
        self.cache = cache if setup.config.cache_enabled else None
        self.state_dir = state_dir
        self.env = tool_environ() if env is None else env  # never the operator's own

    @property
    def config(self) -> QualityGatesConfig:
        return self.setup.config

    def _version(self, spec: GateSpec, tools: ProjectEnv) -> str:
        if spec.name in self.setup.plugins:
            plugin = self.setup.plugins[spec.name]
            source = plugin.origin.split(":", 1)[0]
            try:  # a file plugin by its content; an entry point by its distribution version
                return hashlib.sha256(Path(source).read_bytes()).hexdigest()
            except OSError:
                return plugin.origin
        if spec.name in LIBRARIES:
            return _library_version(LIBRARIES[spec.name])
        if spec.name in TOOLS:
            try:
                return tools.fingerprint(*TOOLS[spec.name])
            except ToolMissing:
                return "missing"
        return "builtin"

    def _one(self, spec: GateSpec, ctx: GateContext, changes: Changes,
             bypass: tuple[set[str], str], tools: ProjectEnv,
             skip: str | None = None) -> GateResult:
        started = time.monotonic()
        names, reason = bypass

        def result(verdict: Verdict, cached: bool = False) -> GateResult:
            blocked = spec.required and verdict.status in BLOCKING
            details, _sep, more = verdict.details.strip().partition("\n")  # one line, always
            digest = verdict.digest or more.strip()
            if spec.required and verdict.status == "skipped":
                details = f"REQUIRED GATE SKIPPED — {details}"
            return GateResult(spec.name, verdict.status, spec.required, blocked, cached,
                              int((time.monotonic() - started) * 1000), details, digest,
                              MappingProxyType(dict(verdict.metadata)))

        if spec.name in names and self.config.allow_bypass:
            return result(Verdict("bypassed", f"bypassed: {reason or 'no reason given'}",
                                  metadata={"reason": reason or None,
                                            "actor": os.environ.get("USER")}))
        if skip is not None:
            return result(Verdict("skipped", skip))
        if not condition_met(spec.condition, changes.changed + changes.deleted):
            return result(Verdict("skipped", f"condition {spec.condition} not met"))
        key = None
        if self.cache is not None and spec.name not in NEVER_CACHED:
            key = cache_key(changes.fingerprint, describe(spec), describe(self.config.options),
                            self._version(spec, tools), gates_revision())
            hit = self.cache.get(key)
            if hit is not None:
                return result(hit, cached=True)
        crashed = False
        try:
            if spec.name in self.setup.plugins:
                verdict = self._plugin(spec.name, ctx)
            else:
                verdict = BUILTIN[spec.name](ctx)
        except ToolMissing as exc:
            verdict = Verdict("skipped", f"skipped: {exc}")
        except Exception as exc:  # one broken gate must not take the pipeline down
            crashed = True
            verdict = Verdict("fail", f"gate {spec.name} crashed: {type(exc).__name__}: {exc}")
        if names and spec.name in names and not self.config.allow_bypass:
            verdict = Verdict(verdict.status, verdict.details + " (bypass requested but "
                              "allow_bypass is false)", verdict.digest, verdict.metadata)
        if ctx.outputs:  # say which interpreter (project .venv, uv, PATH) ran the tools
            ran = "; ".join(ctx.ran_with) or tools.describe()
            verdict = Verdict(verdict.status, verdict.details, verdict.digest,
                              {**verdict.metadata, "ran_with": ran})
        if key is not None and self.cache is not None and not crashed \
                and verdict.status not in UNCACHED_STATUSES:
            self.cache.put(key, verdict)
        self._log(ctx, spec.name)
        return result(verdict)

    def _plugin(self, name: str, ctx: GateContext) -> Verdict:
        """A plugin runs in its own thread, bounded by timeout_s (a Python call cannot be
        killed: a plugin that never returns is left behind, and the gate times out)."""
        box: list[Verdict] = []
        thread = threading.Thread(target=lambda: box.append(run_plugin(
            self.setup.plugins[name], ctx)), name=f"gate-plugin-{name}", daemon=True)
        thread.start()
        thread.join(self.config.timeout_s)
        if not box:
            return Verdict("timeout", f"plugin {name} did not return within "
                                      f"{self.config.timeout_s:.0f} s")
        return box[0]

    def _log(self, ctx: GateContext, gate: str) -> None:
        if self.log_dir is None or not ctx.outputs:
            return
        text = "".join(ctx.outputs)
        if len(text) > MAX_LOG_CHARS:
            text = text[:MAX_LOG_CHARS] + f"\n[bernstein-tui: log capped at {MAX_LOG_CHARS}]\n"
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in ctx.task_id)
        atomic_write_text(self.log_dir / safe / f"{gate}.log", text)

    def run(self, root: Path, *, task_id: str, title: str = "", description: str = "",
            base_ref: str, environ: Mapping[str, str] | None = None,
            cancel: threading.Event | None = None, writer_model: str = "") -> PipelineRun:
        started = time.monotonic()
        if not self.config.enabled or not self.config.pipeline:
            return PipelineRun(GateReport(task_id, True, 0, ()), False)
        bypass = _parse_bypass(os.environ if environ is None else environ)
        changes = collect_changes(root, base_ref)
        tools = find_env(self.project or root)
        env = self.env if tools.bin_dir is None else tools.environ(self.env)

        def context(spec: GateSpec, changes: Changes) -> GateContext:
            return GateContext(root, changes.changed, changes.deleted, base_ref, self.config,
                               spec, task_id, title, description, self.llm, self.state_dir,
                               env, cancel, resolver=tools.tool, writer_model=writer_model)

        results: dict[str, GateResult] = {}
        reformatted = False
        first = [s for s in self.config.pipeline if s.name == "auto_format"]
        for spec in first:
            outcome = self._one(spec, context(spec, changes), changes, bypass, tools)
            results[spec.name] = outcome
            if outcome.metadata.get("reformatted") and not outcome.cached:
                reformatted = True
                changes = collect_changes(root, base_ref)
        rest = [s for s in self.config.pipeline if s.name not in LAST_OR_FIRST]
        if rest:
            with ThreadPoolExecutor(max_workers=min(4, len(rest)),
                                    thread_name_prefix="gate") as pool:
                futures = {s.name: pool.submit(self._one, s, context(s, changes), changes,
                                               bypass, tools) for s in rest}
                for spec in rest:
                    results[spec.name] = futures[spec.name].result()
        for spec in (s for s in self.config.pipeline if s.name in AFTER_THE_REST):
            if any(r.blocked for r in results.values()):  # a reviewer reads passing changes
                results[spec.name] = self._one(spec, context(spec, changes), changes,
                                               (set(), ""), tools, skip="not reviewed: "
                                               "another required gate blocks")
            else:
                results[spec.name] = self._one(spec, context(spec, changes), changes, bypass,
                                               tools)
        ordered = tuple(results[s.name] for s in self.config.pipeline)
        report = GateReport(
            task_id=task_id, overall_pass=not any(r.blocked for r in ordered),
            total_duration_ms=int((time.monotonic() - started) * 1000), results=ordered,
            changed_files=changes.changed, cache_hits=sum(r.cached for r in ordered))
        return PipelineRun(report, reformatted)
