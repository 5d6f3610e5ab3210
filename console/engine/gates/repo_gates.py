"""Gates about the repository and the outside world: merge_conflict (a trial merge
against base_ref), coverage_delta (coverage.py on the change and on base_ref),
dep_audit (pip-audit; offline is "skipped", never "pass"), benchmark (a command's
score against the best so far), intent_verification (the LLM, when configured)."""

from __future__ import annotations

import json
import re
import tarfile
import tempfile
from pathlib import Path

from console.engine.gates.base import GateContext, Verdict, run_tool
from console.engine.gates.recognise import one_line, tail
from console.engine.llm import LlmUnavailable
from console.engine.safegit import NO_DIFF_PROGRAMS, git_argv, git_env
from console.sdd.fileio import atomic_write_json

_NETWORK = re.compile(r"(?i)connection|network|resolve|unreachable|timed out|temporary failure|"
                      r"name or service not known|max retries")


def merge_conflict(ctx: GateContext) -> Verdict:
    run = ctx.git("merge-tree", "--write-tree", "--name-only", "--no-messages",
                 ctx.base_ref, "HEAD", timeout_s=60)
    if run.exit_code == 0:
        return Verdict("pass", f"merges cleanly into {ctx.base_ref}")
    if run.exit_code == 1:
        lines = [line for line in run.output.splitlines()[1:] if line.strip()]
        return Verdict("fail", "conflicts with " + ctx.base_ref + " in " + ", ".join(lines[:10]),
                       metadata={"conflicts": lines})
    return Verdict("fail", f"trial merge failed: {one_line(run.output)}", tail(run.output))


def _coverage(ctx: GateContext, root: Path) -> float | None:
    command = ctx.command("coverage_delta_command")
    coverage = ctx.tool("coverage", "coverage")
    with tempfile.TemporaryDirectory(prefix="bt-cov-") as tmp:
        data = Path(tmp) / ".coverage"
        report = Path(tmp) / "coverage.json"
        argv = command or [*coverage, "run", f"--data-file={data}", "-m", "pytest", "-q",
                           "-p", "no:cacheprovider"]
        run = run_tool(argv, root, ctx.timeout_s, env=ctx.env, cancel=ctx.cancel)
        if run.timed_out:
            raise TimeoutError
        run_tool([*coverage, "json", f"--data-file={data}", "-o", str(report)], root, 60,
                 env=ctx.env)
        try:
            return float(json.loads(report.read_text())["totals"]["percent_covered"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _base_tree(ctx: GateContext, into: Path) -> str | None:
    """Export base_ref's tree (git archive) and return its commit id."""
    head = ctx.git("rev-parse", ctx.base_ref, timeout_s=30)
    if head.exit_code != 0:
        return None
    archive = into / "base.tar"
    made = ctx.git("archive", "--format=tar", "-o", str(archive), ctx.base_ref,
                   timeout_s=120)
    if made.exit_code != 0:
        return None
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return head.output.strip()


def coverage_delta(ctx: GateContext) -> Verdict:
    tolerance = float(ctx.option("coverage_tolerance", 0.5))
    try:
        head = _coverage(ctx, ctx.root)
    except TimeoutError:
        return Verdict("timeout", f"tests under coverage took over {ctx.timeout_s:.0f} s")
    if head is None:
        return Verdict("fail", "coverage could not be measured on the change")
    baselines = ctx.state_dir / "coverage_baselines.json"
    try:
        known = json.loads(baselines.read_text())
    except (OSError, ValueError):
        known = {}
    with tempfile.TemporaryDirectory(prefix="bt-base-") as tmp:
        commit = _base_tree(ctx, Path(tmp))
        if commit is None:
            return Verdict("warn", f"coverage {head:.1f}%; {ctx.base_ref} not found to compare")
        base = known.get(commit)
        if base is None:
            try:
                base = _coverage(ctx, Path(tmp) / "tree")
            except TimeoutError:
                return Verdict("timeout", "tests under coverage on the base took too long")
            if base is not None:
                known[commit] = base
                atomic_write_json(baselines, dict(list(known.items())[-50:]))
    meta = {"coverage": round(head, 2), "base_coverage": None if base is None else round(base, 2)}
    if base is None:
        return Verdict("pass", f"coverage {head:.1f}% (no base measurement)", metadata=meta)
    delta = head - base
    meta["delta"] = round(delta, 2)
    status = "fail" if delta < -tolerance else "pass"
    return Verdict(status, f"coverage {head:.1f}% vs {base:.1f}% on {ctx.base_ref} "
                           f"({delta:+.1f} points, tolerance {tolerance})", metadata=meta)


def dep_audit(ctx: GateContext) -> Verdict:
    argv = ctx.command("dep_audit_command") or [*ctx.tool("pip-audit", "pip_audit"),
                                                "--progress-spinner", "off"]
    requirements = ctx.root / "requirements.txt"
    if ctx.command("dep_audit_command") is None and requirements.exists():
        argv += ["-r", str(requirements)]
    run = ctx.run(argv)
    if run.timed_out:
        return Verdict("skipped", "skipped: needs network (pip-audit timed out)")
    if run.exit_code == 0:
        return Verdict("pass", "no known vulnerabilities")
    if _NETWORK.search(run.output):
        return Verdict("skipped", "skipped: needs network (the vulnerability database was "
                                  "unreachable)")
    return Verdict("fail", f"pip-audit exited {run.exit_code}: {one_line(run.output)}",
                   tail(run.output))


def benchmark(ctx: GateContext) -> Verdict:
    settings = ctx.option("benchmark", {})
    settings = settings if isinstance(settings, dict) else {}
    command = ctx.spec.command_override or settings.get("command")
    if not command:
        return Verdict("skipped", "no benchmark command configured (quality_gates.benchmark."
                                  "command)")
    threshold = float(settings.get("threshold", 0.10))
    run = ctx.run(["/bin/sh", "-c", str(command)])
    if run.timed_out:
        return Verdict("timeout", f"benchmark did not finish within {ctx.timeout_s:.0f} s")
    numbers = re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", run.output)
    if run.exit_code != 0 or not numbers:
        return Verdict("fail", f"benchmark exited {run.exit_code} without a score")
    score = float(numbers[-1])
    path = ctx.state_dir / "benchmark_best.json"
    try:
        best = json.loads(path.read_text()).get(str(command))
    except (OSError, ValueError, AttributeError):
        best = None
    meta = {"score": score, "best": best}
    if best is None or score > best:
        atomic_write_json(path, {str(command): score})
    if best is None:
        return Verdict("pass", f"score {score:g} (first measurement; now the baseline)",
                       metadata=meta)
    floor = best * (1 - threshold)
    if score < floor:
        return Verdict("fail", f"score {score:g} is below {floor:g} ({threshold:.0%} under the "
                               f"best {best:g})", metadata=meta)
    return Verdict("pass", f"score {score:g} (best {best:g})", metadata=meta)


def redact_secrets(text: str) -> str:
    """Lines detect-secrets flags are replaced before anything leaves the machine."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    out = []
    with default_settings():
        for line in text.splitlines():
            flagged = [s for s in scan_line(line) if s.type not in ("Hex High Entropy String",
                                                                    "Base64 High Entropy String")
                       or len(str(s.secret_value or "")) >= 20]
            out.append("[line redacted: possible secret]" if flagged else line)
    return "\n".join(out)


def working_diff(ctx: GateContext) -> str:
    """The change against base_ref, for a model to read: not through ctx.run (the diff
    must not land in the gate log); callers redact secrets."""
    env = git_env()
    return run_tool(git_argv(ctx.root, ["diff", *NO_DIFF_PROGRAMS, ctx.base_ref], env),
                    ctx.root, 60, env=env).output


def intent_verification(ctx: GateContext) -> Verdict:
    settings = ctx.option("intent_verification", {})
    settings = settings if isinstance(settings, dict) else {}
    if not ctx.llm.configured:
        return Verdict("skipped", f"skipped: {ctx.llm.not_configured_reason()}")
    diff = redact_secrets(working_diff(ctx)[:12000])
    system = ("You check whether a code change does what its task asks. Answer YES, NO or "
              "PARTIAL on the first line, then one line why.")
    user = f"Task: {ctx.task_title}\n{ctx.task_description}\n\nDiff:\n{diff}"
    try:
        reply = ctx.llm.chat(system, user, max_tokens=200, model=settings.get("model"),
                             purpose="intent_verification")
    except LlmUnavailable as exc:
        return Verdict("skipped", f"skipped: {exc}")
    verdict = (reply.text.strip().splitlines() or [""])[0].strip().upper()
    why = reply.text.strip()[:300]
    meta = {"verdict": verdict, "model": reply.model}
    if verdict.startswith("YES"):
        return Verdict("pass", why, metadata=meta)
    block = (verdict.startswith("NO") and settings.get("block_on_no", True)) or (
        verdict.startswith("PARTIAL") and settings.get("block_on_partial", False))
    return Verdict("fail" if block else "warn", why, metadata=meta)
