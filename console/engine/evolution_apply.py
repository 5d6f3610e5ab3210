"""Applying an evolution proposal through its gate (seed 004), approve and reject.

Every apply — automatic or approved — goes, in order and stopping at the first
failure: (0) the file guard: the diff may touch only the configured paths, never
leave the repository or touch .git; the patch applied in a sandbox worktree on
branch evolution/<id>; the configured tests; (1) the eval suite, pass rate at or
above its threshold; (2) the benchmark, a score at or above the best so far;
then the merge into the base branch and (3) promotion of newly passing evals
into the suite. Each step is recorded with the decision.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from console.control import Outcome
from console.engine.evolution import RISK_NAMES, classify
from console.engine.gates.base import run_git_tool, run_tool, tool_environ
from console.engine.gates.digest import generic_digest
from console.engine.gitops import GitRepo
from console.sdd.approval_progress import announce, finished
from console.sdd.confine import UnsafeId, safe_id, sdd_path
from console.sdd.evolution_codec import encode_experiment
from console.sdd.evolution_results import append_result, best_score
from console.sdd.fileio import (
    MAX_JSON_FILE_BYTES,
    append_jsonl,
    atomic_write_json,
    read_json_object,
    read_regular_file,
)
from console.sdd.paths import Kind, SddPaths
from console.sdd.source import LocalSource

DEFAULT_ALLOWED = ("bernstein.yaml", ".sdd/config.yaml", "templates/")


@dataclass(frozen=True, slots=True)
class EvolutionConfig:
    allowed_paths: tuple[str, ...] = DEFAULT_ALLOWED
    test_command: str | None = None
    evals: dict[str, str] = field(default_factory=dict)  # name → shell command, exit 0 passes
    suite_threshold: float = 0.8
    benchmark_command: str | None = None
    timeout_s: float = 600.0
    on_idle: bool = False  # the engine runs `evolve` once each time it goes idle


def parse_evolution(raw: object) -> EvolutionConfig:
    if raw is None:
        return EvolutionConfig()
    if not isinstance(raw, dict):
        raise ValueError("evolution must be a map")
    unknown = set(raw) - {"allowed_paths", "test_command", "evals", "suite_threshold",
                          "benchmark_command", "timeout_s", "on_idle"}
    if unknown:
        raise ValueError(f"evolution.{sorted(unknown)[0]} is not a known key")
    evals = raw.get("evals") or {}
    if not isinstance(evals, dict):
        raise ValueError("evolution.evals must map a name to a command")
    return EvolutionConfig(
        tuple(raw.get("allowed_paths") or DEFAULT_ALLOWED), raw.get("test_command"),
        {str(k): str(v) for k, v in evals.items()}, float(raw.get("suite_threshold", 0.8)),
        raw.get("benchmark_command"), float(raw.get("timeout_s", 600.0)),
        bool(raw.get("on_idle", False)))


_DIFF_PATH = re.compile(r"^(?:---|\+\+\+) (?:a/|b/)?(.+?)\s*$")


def file_guard(diff: str, allowed: tuple[str, ...]) -> list[str]:
    """Why the diff may not be applied: paths outside the allowed set, outside the
    repository, or inside .git. Empty when it may."""
    problems = []
    for line in diff.splitlines():
        match = _DIFF_PATH.match(line)
        if not match or match.group(1) == "/dev/null":
            continue
        path = match.group(1)
        parts = PurePosixPath(path).parts
        if PurePosixPath(path).is_absolute() or ".." in parts:
            problems.append(f"{path} is outside the repository")
        elif ".git" in parts:
            problems.append(f"{path} is inside .git")
        elif not any(path == a or (a.endswith("/") and path.startswith(a)) for a in allowed):
            problems.append(f"{path} is not among the paths proposals may touch "
                            f"({', '.join(allowed)})")
    return sorted(set(problems))


def _shell(command: str, cwd: Path, timeout: float) -> tuple[bool, str]:
    """Tests, evals and benchmarks run the project's code: the one environment of
    project code (toolenv.tool_environ)."""
    run = run_tool(["/bin/sh", "-c", command], cwd, timeout, env=tool_environ())
    return run.exit_code == 0 and not run.timed_out, run.output


def _touched(sandbox: Path) -> list[tuple[str, bool]]:
    """What applying the patch really changed (renames, modes, empty files included):
    (path, is a symlink)."""
    status = run_git_tool(["status", "--porcelain", "-z", "--untracked-files=all",
                           "--no-renames"], sandbox, 60).output
    paths = [entry[3:] for entry in status.split("\0") if len(entry) > 3]
    return [(p, (sandbox / p).is_symlink()) for p in paths]


def _score(output: str) -> float | None:
    numbers = re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", output)
    return float(numbers[-1]) if numbers else None


def _suite_path(paths: SddPaths) -> Path:
    return paths.sdd / "evolution" / "suite.json"


@dataclass
class GateRun:
    steps: list[dict[str, Any]] = field(default_factory=list)
    score: float | None = None
    baseline: float | None = None  # the best score before this change

    def step(self, name: str, passed: bool, detail: str) -> bool:
        self.steps.append({"step": name, "passed": passed, "detail": detail[:2000]})
        return passed


def apply_through_gate(paths: SddPaths, repo: GitRepo, proposal_id: str, title: str,
                       diff: str, config: EvolutionConfig) -> tuple[bool, str, GateRun]:
    """(merged, message, steps)."""
    run = GateRun()
    guard = file_guard(diff, config.allowed_paths)
    if not run.step("file_guard", not guard, "; ".join(guard) or "every path is allowed"):
        return False, "refused by the file guard: " + "; ".join(guard), run
    sandbox = sdd_path(paths.root, "sandboxes", safe_id(proposal_id, "proposal id"),
                       what="sandbox")
    branch = f"evolution/{proposal_id}"
    fd, name = tempfile.mkstemp(prefix="bernstein-tui-proposal-", suffix=".diff")
    patch = Path(name)  # outside the worktree: a link committed there is never written through
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(diff)
    announce(paths.root, proposal_id, "sandbox")
    repo.add_worktree(sandbox, branch)
    merged = False
    try:
        check = run_git_tool(["apply", "--check", str(patch)], sandbox, 60)
        if not run.step("apply", check.exit_code == 0, check.output.strip()[-500:] or "applies"):
            return False, f"the patch does not apply: {check.output.strip()[-300:]}", run
        run_git_tool(["apply", str(patch)], sandbox, 60)
        touched = _touched(sandbox)
        really = file_guard("".join(f"+++ b/{p}\n" for p, _ in touched),
                            config.allowed_paths)
        really += [f"{p} is a symlink" for p, link in touched if link]
        if not run.step("file_guard_applied", not really,
                        "; ".join(really) or f"{len(touched)} allowed path(s) changed"):
            return False, "refused by the file guard after applying: " + "; ".join(really), run
        repo.commit_all(sandbox, f"evolution {proposal_id}: {title}")
        command = config.test_command
        announce(paths.root, proposal_id, "tests")
        if command is None and (sandbox / "tests").is_dir():
            command = "python -m pytest -q -p no:cacheprovider"
        if command:
            ok, output = _shell(command, sandbox, config.timeout_s)
            digest = generic_digest(output, sandbox).render() or output.strip()[-800:]
            if not run.step("tests", ok, "tests passed" if ok else digest):
                return False, f"tests failed in the sandbox:\n{digest}", run
        else:
            run.step("tests", True, "no test command configured and no tests/ directory")
        suite_data, _problem = read_json_object(_suite_path(paths), "suite.json")
        suite = suite_data or {"tasks": [], "threshold": config.suite_threshold,
                               "last_results": {}}
        results = {}
        announce(paths.root, proposal_id, "evals")
        for name in suite.get("tasks", []):
            if name in config.evals:
                results[name] = _shell(config.evals[name], sandbox, config.timeout_s)[0]
        rate = sum(results.values()) / len(results) if results else 1.0
        threshold = float(suite.get("threshold", config.suite_threshold))
        if not run.step("eval_suite", rate >= threshold,
                        f"pass rate {rate:.0%} over {len(results)} eval(s), threshold "
                        f"{threshold:.0%}" if results else "no evals in the suite yet"):
            return False, f"the eval suite passed {rate:.0%} < {threshold:.0%}", run
        if config.benchmark_command:
            announce(paths.root, proposal_id, "benchmark")
            ok, output = _shell(config.benchmark_command, sandbox, config.timeout_s)
            run.score = _score(output) if ok else None
            best = run.baseline = best_score(paths)
            good = run.score is not None and (best is None or run.score >= best)
            detail = (f"score {run.score} vs best {best}" if run.score is not None
                      else "the benchmark produced no score")
            if not run.step("benchmark", good, detail):
                return False, f"benchmark: {detail}", run
        announce(paths.root, proposal_id, "merge")
        result = repo.merge(branch, repo.merge_message(branch, title))
        if not run.step("merge", result.ok, result.message):
            return False, result.message, run
        merged = True
        newly = sorted(name for name, command in config.evals.items()
                 if name not in suite.get("tasks", [])
                       and _shell(command, paths.root, config.timeout_s)[0])
        suite["tasks"] = sorted(set(suite.get("tasks", [])) | set(newly))
        suite["last_results"] = {k: 1.0 if v else 0.0 for k, v in results.items()}
        atomic_write_json(_suite_path(paths), suite)
        run.step("promotion", True, f"promoted {', '.join(newly)}" if newly
                 else "no eval newly passes")
        append_result(paths, proposal_id,
                      run_git_tool(["rev-parse", "HEAD"], repo.root, 30).output.strip(), run.score)
        return True, f"merged into {repo.base}", run
    finally:
        patch.unlink(missing_ok=True)
        repo.remove_worktree(sandbox, branch if merged else None)


def record_outcome(paths: SddPaths, *, proposal_id: str, title: str, risk: str,
                   confidence: float, outcome: str, reason: str, reviewer: str | None,
                   accepted: bool, steps: list[dict[str, Any]], score: float | None,
                   started: float, diff_sha: str | None = None,
                   baseline: float | None = None, requires_human: bool = False) -> None:
    now = time.time()
    append_jsonl(paths.of(Kind.DECISIONS), [{
        "proposal_id": proposal_id, "risk_level": risk, "confidence": confidence,
        "outcome": outcome, "reason": reason[:2000], "requires_human": requires_human,
        "decided_at": now, "reviewer": reviewer}])
    append_jsonl(paths.of(Kind.EXPERIMENTS), [encode_experiment(
        proposal_id=proposal_id, title=title, risk_level=risk, accepted=accepted,
        reason=reason, timestamp=now, duration_seconds=now - started, baseline_score=baseline,
        candidate_score=score, steps=steps, **({"diff_sha": diff_sha} if diff_sha else {}))])


def _pending(paths: SddPaths, proposal_id: str) -> tuple[dict | None, str | None]:
    """The deferred record of a pending proposal, or why it cannot be decided."""
    source = LocalSource(paths.root)
    source.load()
    state = source.state
    if proposal_id not in state.proposals and proposal_id not in state.decisions:
        return None, f"no proposal with id '{proposal_id}'"
    if proposal_id not in state.pending_proposals():
        last = state.decisions[proposal_id][-1]
        who = f" by {last.reviewer}" if last.reviewer else ""
        return None, (f"proposal {proposal_id} is not pending: it was already decided "
                      f"({last.outcome}{who})")
    raw = dict(next((r for r in _deferred_records(paths)
                     if r.get("proposal_id") == proposal_id), {}))
    if state.decisions.get(proposal_id):  # Bernstein copies the latest pending decision
        last = state.decisions[proposal_id][-1]
        raw.setdefault("risk_level", last.risk_level)
        raw.setdefault("confidence", last.confidence)
    return raw, None


def _deferred_records(paths: SddPaths) -> list[dict]:
    data, _problem = read_regular_file(paths.of(Kind.DEFERRED), "deferred.jsonl",
                                       4 * MAX_JSON_FILE_BYTES)  # 64 MB of proposals
    lines = (data or b"").decode("utf-8", "replace").splitlines()
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _risk_name(raw: dict) -> str:
    level = str(raw.get("risk_level") or "")
    if level.startswith("L") and level[1:].isdigit():
        return RISK_NAMES.get(int(level[1:]), "logic")
    return level or RISK_NAMES[classify(tuple(raw.get("target_files") or ()))]


def reviewer_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "operator"


def approve(paths: SddPaths, repo: GitRepo | None, proposal_id: str, reason: str,
            config: EvolutionConfig, reviewer: str | None = None) -> Outcome:
    try:  # it names the sandbox and the branch: refused before anything else
        safe_id(proposal_id, "proposal id")
    except UnsafeId as exc:
        return Outcome.refused(str(exc))
    raw, why = _pending(paths, proposal_id)
    if raw is None:
        return Outcome.refused(why or "not pending")
    reviewer = reviewer or reviewer_name()
    started = time.time()
    risk = _risk_name(raw)
    confidence = float(raw.get("confidence") or 0.0)
    title = str(raw.get("title") or proposal_id)
    note = f": {reason}" if reason else ""
    diff = str(raw.get("diff") or "")
    if not diff:  # a proposal a real Bernstein deferred: record it exactly as it does
        record_outcome(paths, proposal_id=proposal_id, title=title, risk=risk,
                       confidence=confidence, outcome="auto_approved",
                       reason=f"Manually approved by {reviewer}{note}", reviewer=reviewer,
                       accepted=True, steps=[], score=None, started=started)
        return Outcome.done(f"approved {proposal_id} (reviewer={reviewer}); it has no diff, "
                            "so the approval is recorded as `bernstein evolve approve` does")
    if repo is None:
        return Outcome.refused("approving a proposal with a diff needs a git repository")
    if repo.is_merged(f"evolution/{proposal_id}"):  # merged before a crash cut the record
        record_outcome(paths, proposal_id=proposal_id, title=title, risk=risk,
                       confidence=confidence, outcome="auto_approved",
                       reason=f"Manually approved by {reviewer}{note}; already merged "
                              "(recorded after an interruption)", reviewer=reviewer,
                       accepted=True, steps=[], score=None, started=started)
        return Outcome.done(f"{proposal_id} was already merged; its approval is now recorded")
    try:
        merged, message, run = apply_through_gate(paths, repo, proposal_id, title, diff, config)
    finally:
        finished(paths.root, proposal_id)
    if merged:
        record_outcome(paths, proposal_id=proposal_id, title=title, risk=risk,
                       confidence=confidence, outcome="auto_approved",
                       reason=f"Manually approved by {reviewer}{note}; merged",
                       reviewer=reviewer, accepted=True, steps=run.steps, score=run.score,
                       started=started, baseline=run.baseline)
        return Outcome.done(f"approved {proposal_id}: applied in a sandbox, tests green, "
                            f"{message}")
    # a failed approval is no decision: still pending (its latest decision awaits a human)
    record_outcome(paths, proposal_id=proposal_id, title=title, risk=risk,
                   confidence=confidence, outcome="human_review_immediate",
                   reason=f"Approval by {reviewer} failed{note}; not merged — {message}",
                   reviewer=reviewer, accepted=False, steps=run.steps, score=run.score,
                   started=started, baseline=run.baseline, requires_human=True)
    return Outcome.refused(f"approved {proposal_id}, but not merged: {message} — it stays "
                           "pending: approve it again once the cause is fixed")


def reject(paths: SddPaths, proposal_id: str, reason: str,
           reviewer: str | None = None) -> Outcome:
    if not reason.strip():
        return Outcome.refused("a rejection needs a reason (--reason TEXT)")
    try:
        safe_id(proposal_id, "proposal id")
    except UnsafeId as exc:
        return Outcome.refused(str(exc))
    raw, why = _pending(paths, proposal_id)
    if raw is None:
        return Outcome.refused(why or "not pending")
    reviewer = reviewer or reviewer_name()
    record_outcome(paths, proposal_id=proposal_id, title=str(raw.get("title") or ""),
                   risk=_risk_name(raw), confidence=float(raw.get("confidence") or 0.0),
                   # Bernstein has no reject and no 'rejected' outcome: a non-requiring
                   # 'blocked' decision clears it from `bernstein evolve review` too
                   outcome="blocked", reason=f"Rejected by {reviewer}: {reason}",
                   reviewer=reviewer, accepted=False, steps=[], score=None,
                   started=time.time())
    return Outcome.done(f"rejected {proposal_id} (reviewer={reviewer}): {reason}")


def evolve(paths: SddPaths, repo: GitRepo | None, config: EvolutionConfig
           ) -> list[tuple[str, str, str]]:
    """Analyse, route each new proposal, apply the automatic ones; (id, outcome, message)."""
    from console.engine.evolution import analyse, decide, known_diffs, record_proposal

    done = []
    seen = known_diffs(paths)
    for proposal in analyse(paths):
        if proposal.diff_sha in seen:
            continue
        seen.add(proposal.diff_sha)
        outcome, reason = decide(proposal.risk, proposal.confidence)
        if outcome in ("auto_approved", "auto_approved_audit") and repo is not None:
            started = time.time()
            merged, message, run = apply_through_gate(paths, repo, proposal.proposal_id,
                                                      proposal.title, proposal.diff, config)
            record_outcome(paths, proposal_id=proposal.proposal_id, title=proposal.title,
                           risk=RISK_NAMES[proposal.risk], confidence=proposal.confidence,
                           outcome=outcome, reason=f"{reason}; " + (
                               "merged" if merged else f"not merged — {message}"),
                           reviewer=None, accepted=merged, steps=run.steps, score=run.score,
                           started=started, diff_sha=proposal.diff_sha, baseline=run.baseline)
            done.append((proposal.proposal_id, outcome, message))
        else:
            record_proposal(paths, proposal, outcome if outcome.startswith(("human", "blocked"))
                            else "human_review_4h", reason)
            done.append((proposal.proposal_id, outcome, f"deferred: {proposal.title}"))
    return done


def evolve_outcome(paths: SddPaths, repo: GitRepo | None, config: EvolutionConfig) -> Outcome:
    """An evolution pass, and what it did as an Outcome: a line per proposal."""
    done = evolve(paths, repo, config)
    if not done:
        return Outcome.done("no new proposals: the metrics show nothing worth changing")
    return Outcome.done("\n".join(f"{pid}  {outcome:<24} {message}"
                                   for pid, outcome, message in done))
