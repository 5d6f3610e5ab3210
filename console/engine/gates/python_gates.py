"""Gates backed by Python tools: auto_format and lint (ruff), type_check (mypy or
pyright), tests (pytest, scoped to what changed), dead_code (vulture),
security_scan (bandit), complexity_check (radon), mutation_testing (mutmut)."""

from __future__ import annotations

import json
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from console.engine.gates import digest as dg
from console.engine.gates.base import GateContext, ToolMissing, ToolRun, Verdict
from console.engine.gates.imports import select_tests
from console.engine.gates.recognise import one_line, recognise, tail

_SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors|skipped|xfailed|xpassed)")


def _timeout(ctx: GateContext, run: ToolRun, tool: str) -> Verdict | None:
    if run.timed_out:
        return Verdict("timeout", f"{tool} did not finish within {ctx.timeout_s:.0f} s; killed")
    return None


def auto_format(ctx: GateContext) -> Verdict:
    override = ctx.command("auto_format_python_command")
    files = ctx.python_files()
    if not files and override is None:
        return Verdict("skipped", "no Python files changed")
    argv = override or [*ctx.tool("ruff", "ruff"), "format", "--force-exclude", "--no-cache"]
    run = ctx.run([*argv, *files])
    if (late := _timeout(ctx, run, "formatter")) is not None:
        return late
    if run.exit_code != 0:
        return Verdict("warn", f"formatter exited {run.exit_code}: {one_line(run.output)}",
                       tail(run.output))
    match = re.search(r"(\d+) files? reformatted", run.output)
    count = int(match.group(1)) if match else 0
    return Verdict("pass", f"reformatted {count} file(s)" if count else "already formatted",
                   metadata={"reformatted": count})


def lint(ctx: GateContext) -> Verdict:
    override = ctx.command("lint_command")
    files = ctx.python_files()
    if override is None and not files:
        return Verdict("pass", "no Python files changed", metadata={"scope": "changed"})
    argv = override or [*ctx.tool("ruff", "ruff"), "check", "--no-fix", "--force-exclude",
                        "--no-cache", "--output-format=concise", *files]
    run = ctx.run(argv)
    if (late := _timeout(ctx, run, "ruff")) is not None:
        return late
    scope = {"scope": "command" if override else "changed", "files": len(files)}
    if run.exit_code == 0:
        return Verdict("pass", "no lint violations", metadata=scope)
    return _findings(run, ctx, "lint violation(s)", "lint", scope)


def _findings(run: ToolRun, ctx: GateContext, noun: str, tool: str,
              metadata: Mapping[str, object]) -> Verdict:
    """A failed check tool's output, whichever tool it was: counted and digested, the
    details one line; unrecognised output goes to the digest as its last lines."""
    found = recognise(run.output, ctx.root)
    metadata = {**metadata, "recognised": found.tool or None}
    if found.count:
        return Verdict("fail", f"{found.count} {noun}", found.digest.render(), metadata)
    return Verdict("fail", f"{tool} exited {run.exit_code}: {one_line(run.output)}",
                   tail(run.output), metadata)


def type_check(ctx: GateContext) -> Verdict:
    override = ctx.command("type_check_command")
    checker = str(ctx.option("type_checker", "mypy"))
    files = ctx.python_files()
    if override is None and not files:
        return Verdict("pass", "no Python files changed", metadata={"scope": "changed"})
    if override is not None:
        argv, checker = override, override[0]
    elif checker == "pyright":
        argv = [*ctx.tool("pyright", None), *files]
    else:
        argv = [*ctx.tool("mypy", "mypy"), "--no-error-summary", "--no-pretty",
                "--show-column-numbers", "--follow-imports=silent", "--ignore-missing-imports",
                "--no-incremental", "--cache-dir=/dev/null", *files]
    run = ctx.run(argv)
    if (late := _timeout(ctx, run, checker)) is not None:
        return late
    scope = {"scope": "command" if override else "changed", "checker": Path(checker).name}
    if run.exit_code == 0:
        return Verdict("pass", "no type errors", metadata=scope)
    return _findings(run, ctx, "type error(s)", Path(checker).name, scope)


# -- tests ---------------------------------------------------------------------


def _junit(path: Path, root: Path) -> tuple[dict[str, int], list[dg.DigestEntry]]:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    entries: list[dg.DigestEntry] = []
    try:
        tree = ET.parse(path)
    except (ET.ParseError, OSError):
        return counts, entries
    for case in tree.iter("testcase"):
        file = case.get("file") or ""
        name = case.get("name") or "?"
        classname = case.get("classname") or ""
        owner = classname.rsplit(".", 1)[-1]
        test_id = f"{file}::{owner}::{name}" if owner[:1].isupper() else f"{file}::{name}"
        failure = case.find("failure")
        error = case.find("error")
        if failure is not None or error is not None:
            node = failure if failure is not None else error
            assert node is not None  # one of the two, by the test above
            key = "failed" if failure is not None else "errors"
            counts[key] += 1
            text = (node.get("message") or "") + "\n" + (node.text or "")
            entries.append(dg.pytest_failure_entry(test_id, text, root))
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, entries


def _pytest(ctx: GateContext, targets: list[str]) -> tuple[ToolRun, dict[str, int],
                                                         list[dg.DigestEntry]]:
    with tempfile.TemporaryDirectory(prefix="bt-pytest-") as tmp:
        report = Path(tmp) / "junit.xml"
        argv = [*ctx.tool("pytest", "pytest"), "-q", "-p", "no:cacheprovider", "--tb=short",
                "-rfE", f"--junitxml={report}", "-o", "junit_family=xunit1", *targets]
        run = ctx.run(argv)
        counts, entries = _junit(report, ctx.root)
    return run, counts, entries


def tests(ctx: GateContext) -> Verdict:
    override = ctx.command("test_command")
    if override is not None:
        run = ctx.run(override)
        if (late := _timeout(ctx, run, "tests")) is not None:
            return late
        recognised = recognise(run.output, ctx.root)
        counts = recognised.counts or {("errors" if k.startswith("error") else k): int(n)
                                  for n, k in _SUMMARY.findall(run.output)}
        failed = [e.message.split(" failed", 1)[0].split(" error", 1)[0]
                  for e in recognised.digest.entries] if recognised.tool == "pytest" else []
        metadata = {"scope": "command", "counts": counts, "failed_tests": failed,
                    "recognised": recognised.tool or None}
        summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        if run.exit_code == 0:
            return Verdict("pass", summary or "test command passed", metadata=metadata)
        if not summary:
            summary = f"test command exited {run.exit_code}: {one_line(run.output)}"
        return Verdict("fail", summary, recognised.digest.render() or tail(run.output), metadata)
    targets = select_tests(ctx.root, list(ctx.python_files()),
                           [f for f in ctx.deleted if f.endswith('.py')])
    full = bool(ctx.option("tests_full_suite", False))
    # seed 002: when scoping selects nothing, the whole suite runs (opt out to skip instead)
    fallback = not targets and not full and bool(ctx.option("tests_scope_fallback", True))
    if not targets and not full and not fallback:
        return Verdict("skipped", "no test file changed and no test imports a changed module "
                                  "(tests_scope_fallback: false)",
                       metadata={"scope": "changed", "selected": []})
    runs = [("changed", targets)] if targets else []
    if full or fallback:
        runs.append(("full", []))
    totals = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    entries: list[dg.DigestEntry] = []
    for scope, selection in runs:
        run, counts, found = _pytest(ctx, selection)
        if (late := _timeout(ctx, run, "pytest")) is not None:
            return late
        if run.exit_code not in (0, 1, 5):  # usage error, internal error, interrupted
            return Verdict("fail", f"pytest exited {run.exit_code}: {one_line(run.output)}",
                           recognise(run.output, ctx.root).digest.render() or tail(run.output),
                           {"scope": scope})
        if scope == "full":
            totals = counts
            entries = found
        else:
            totals = {k: totals[k] + counts[k] for k in totals}
            entries += found
        if entries:  # changed tests already fail: the full suite would only repeat it
            break
    scope_run = "+".join(scope for scope, _ in runs)
    details = ", ".join(f"{v} {k}" for k, v in totals.items() if v) or "no tests collected"
    digest = dg.build(entries, ctx.root)
    failed = [e.message.split(" failed", 1)[0] for e in entries]
    meta: dict[str, object] = {"scope": scope_run, "selected": targets, "counts": totals,
                               "failed_tests": failed, "fallback": fallback}
    status = "fail" if totals["failed"] or totals["errors"] else "pass"
    return Verdict(status, details, digest.render(), meta)


# -- static analysers ---------------------------------------------------------------------


def dead_code(ctx: GateContext) -> Verdict:
    files = ctx.python_files()
    if not files:
        return Verdict("pass", "no Python files changed")
    confidence = int(ctx.option("dead_code_min_confidence", 80))
    argv = ctx.command("dead_code_command") or [*ctx.tool("vulture", "vulture")]
    run = ctx.run([*argv, *files, "--min-confidence", str(confidence)])
    if (late := _timeout(ctx, run, "vulture")) is not None:
        return late
    if run.exit_code == 0:
        return Verdict("pass", "no dead code found")
    pattern = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<msg>.+)$")
    digest = dg.build(dg.by_pattern(run.output, pattern, ctx.root), ctx.root)
    count = len(digest.entries) + digest.left_out
    return Verdict("fail", f"{count} dead-code finding(s)", digest.render())


def security_scan(ctx: GateContext) -> Verdict:
    files = ctx.python_files()
    override = ctx.command("security_scan_command")
    if override is not None:
        run = ctx.run(override)
        if (late := _timeout(ctx, run, "security scan")) is not None:
            return late
        if run.exit_code == 0:
            return Verdict("pass", f"{override[0]} exited 0")
        return _findings(run, ctx, "security finding(s)", override[0], {"scope": "command"})
    if not files:
        return Verdict("pass", "no Python files changed")
    run = ctx.run([*ctx.tool("bandit", "bandit"), "-q", "-f", "json", *files])
    if (late := _timeout(ctx, run, "bandit")) is not None:
        return late
    try:
        report = json.loads(run.output[run.output.find("{"):])
    except ValueError:
        return Verdict("fail", f"bandit exited {run.exit_code}: {one_line(run.output)}",
                       tail(run.output))
    serious = [r for r in report.get("results", [])
               if r.get("issue_severity") in ("MEDIUM", "HIGH")
               and r.get("issue_confidence") in ("MEDIUM", "HIGH")]
    minor = [r for r in report.get("results", []) if r not in serious]
    entries = [dg.DigestEntry(f"{r.get('test_id')} {r.get('issue_severity')}: "
                              f"{r.get('issue_text')}",
                              dg.relative(str(r.get("filename")), ctx.root),
                              int(r.get("line_number") or 0)) for r in serious + minor]
    digest = dg.build(entries, ctx.root).render()
    if serious:
        return Verdict("fail", f"{len(serious)} medium/high security issue(s)", digest)
    if minor:
        return Verdict("warn", f"{len(minor)} low-severity finding(s)", digest)
    return Verdict("pass", "no security issues")


def _complexities(ctx: GateContext, root: Path, files: list[str]) -> dict[str, list[tuple]]:
    if not files:
        return {}
    run = ctx.run([*ctx.tool("radon", "radon"), "cc", "-j", *files])
    if run.timed_out:
        raise TimeoutError
    try:
        data = json.loads(run.output)
    except ValueError:
        return {}
    out: dict[str, list[tuple]] = {}
    for file, blocks in data.items():
        if isinstance(blocks, list):
            out[file] = [(b.get("name"), int(b.get("lineno") or 0), int(b.get("complexity") or 0))
                         for b in blocks if isinstance(b, dict)]
    return out


def _base_mean_complexity(ctx: GateContext, files: list[str]) -> float | None:
    """The same files as they are on base_ref (new files have no base)."""
    with tempfile.TemporaryDirectory(prefix="bt-radon-") as tmp:
        present = []
        for file in files:
            shown = ctx.git("show", "--no-textconv", f"{ctx.base_ref}:{file}", timeout_s=30)
            if shown.exit_code != 0:
                continue
            target = Path(tmp) / file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(shown.output)
            present.append(str(target))
        if not present:
            return None
        try:
            base = _complexities(ctx, Path(tmp), present)
        except TimeoutError:
            return None
    values = [b[2] for items in base.values() for b in items]
    return sum(values) / len(values) if values else None


def complexity_check(ctx: GateContext) -> Verdict:
    files = ctx.python_files()
    if not files:
        return Verdict("pass", "no Python files changed")
    limit = 20  # radon rank D and worse
    threshold = float(ctx.option("complexity_threshold", 0.20))
    try:
        head = _complexities(ctx, ctx.root, files)
    except TimeoutError:
        return Verdict("timeout", f"radon did not finish within {ctx.timeout_s:.0f} s")
    blocks = [(f, *b) for f, items in head.items() for b in items]
    too_complex = [b for b in blocks if b[3] > limit]
    mean = sum(b[3] for b in blocks) / len(blocks) if blocks else 0.0
    entries = [dg.DigestEntry(f"{name} has cyclomatic complexity {cc} (limit {limit})", f, line)
               for f, name, line, cc in too_complex]
    meta = {"mean_complexity": round(mean, 2), "blocks": len(blocks)}
    if too_complex:
        return Verdict("fail", f"{len(too_complex)} function(s) over complexity {limit}",
                       dg.build(entries, ctx.root).render(), meta)
    base_mean = _base_mean_complexity(ctx, files)
    if base_mean is not None:
        meta["base_mean_complexity"] = round(base_mean, 2)
        if base_mean > 0 and mean > base_mean * (1 + threshold):
            return Verdict("fail", f"mean complexity of the changed files rose from "
                                   f"{base_mean:.2f} to {mean:.2f} (more than {threshold:.0%})",
                           metadata=meta)
    return Verdict("pass", f"mean complexity {mean:.2f} over {len(blocks)} block(s)",
                   metadata=meta)


def mutation_testing(ctx: GateContext) -> Verdict:
    argv = ctx.command("mutation_command") or [*ctx.tool("mutmut", "mutmut"), "run"]
    run = ctx.run(argv, timeout_s=float(ctx.option("mutation_timeout_s", 600)))
    if (late := _timeout(ctx, run, "mutmut")) is not None:
        return late
    killed = sum(int(n) for n in re.findall(r"🎉 (\d+)", run.output))
    survived = sum(int(n) for n in re.findall(r"🙁 (\d+)", run.output))
    total = killed + survived
    if total == 0:
        return Verdict("warn" if run.exit_code == 0 else "fail",
                       f"mutmut exited {run.exit_code} without a score")
    score = killed / total
    threshold = float(ctx.option("mutation_threshold", 0.5))
    return Verdict("pass" if score >= threshold else "fail",
                   f"mutation score {score:.0%} (threshold {threshold:.0%})",
                   metadata={"mutation_score": round(score, 4)})


__all__ = ["ToolMissing", "auto_format", "complexity_check", "dead_code", "lint",
           "mutation_testing", "security_scan", "select_tests", "tests", "type_check"]
