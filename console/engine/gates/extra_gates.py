"""Seed 000's gates beyond the tool-backed ones: comment_quality (deterministic: public
functions and classes the change adds to Python files, without a docstring);
review_rubric (the multi-judge rubric of seed 003 over the diff); integration_test_gen
and test_expansion (tests the LLM writes for the change, run in a copy of the checkout).
The LLM-backed ones go through the one client: "not configured" without an endpoint."""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
from pathlib import Path

from console.engine.gates import digest as dg
from console.engine.gates.agent_mutation import IGNORED_IN_COPIES
from console.engine.gates.base import GateContext, Verdict, run_tool
from console.engine.gates.recognise import one_line, recognise, tail
from console.engine.gates.repo_gates import redact_secrets, working_diff
from console.engine.gates.scan_gates import _read
from console.engine.llm import LlmUnavailable
from console.engine.review import MultiJudgeReview, ReviewConfig

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def _added_lines(ctx: GateContext, rel: str) -> set[int] | None:
    """Line numbers the change added to `rel`; None: the whole file is new."""
    run = ctx.git("diff", "-U0", "--no-ext-diff", "--no-textconv", ctx.base_ref, "--", rel,
                  timeout_s=60)
    if run.exit_code != 0 or not run.output.strip():
        return None  # untracked (new): every line is the change's
    lines: set[int] = set()
    for match in _HUNK.finditer(run.output):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        lines.update(range(start, start + count))
    return lines


def comment_quality(ctx: GateContext) -> Verdict:
    files = ctx.python_files()
    if not files:
        return Verdict("pass", "no Python files changed")
    entries: list[dg.DigestEntry] = []
    for rel in files:
        read = _read(ctx, rel)
        if read is None:
            continue
        try:
            tree = ast.parse(read[0])
        except SyntaxError:
            continue  # lint and type_check say so
        added = _added_lines(ctx, rel)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if node.name.startswith("_") or ast.get_docstring(node):
                continue
            if added is not None and node.lineno not in added:
                continue  # there before this change
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            entries.append(dg.DigestEntry(f"public {kind} {node.name} has no docstring", rel,
                                          node.lineno))
    if not entries:
        return Verdict("pass", f"every public definition added in {len(files)} file(s) "
                               "has a docstring")
    digest = dg.build(entries, ctx.root)
    count = len(digest.entries) + digest.left_out
    return Verdict("fail", f"{count} public definition(s) without a docstring",
                   digest.render(), {"missing": count})


def review_rubric(ctx: GateContext) -> Verdict:
    if not ctx.llm.configured:
        return Verdict("skipped", f"not configured: {ctx.llm.not_configured_reason()}")
    config = ReviewConfig(judges=1, threshold=3.0)  # seed 003's default rubric and pass mark
    record = MultiJudgeReview(ctx.llm, config).review(
        task_id=ctx.task_id, title=ctx.task_title, description=ctx.task_description,
        diff=redact_secrets(working_diff(ctx)), writer_model=ctx.writer_model)
    meta = {"global_score": record.get("global_score"), "merged": record.get("merged"),
            "threshold": config.threshold}
    if record.get("global_score") is None:
        return Verdict("skipped", f"no rubric score: {record.get('reason')}", metadata=meta)
    lines = [f"{s['dimension']} {s['score']:g}/5: {s['reasoning']}"
             for s in record.get("scores", []) if not s.get("dropped")]
    status = "pass" if record.get("passed") else "fail"
    return Verdict(status, str(record.get("reason")), "\n".join(lines), meta)


# -- generated tests: integration_test_gen and test_expansion -------------------------

_CODE = re.compile(r"```(?:python|py)?\n(.*?)```", re.DOTALL)
GENERATED_PROMPTS = {
    "integration_test_gen": "Write one pytest integration test that exercises the changed "
                            "modules together through their public API, as a user would.",
    "test_expansion": "Write additional pytest unit tests for the changed code: edge cases, "
                      "error paths and boundaries the existing tests miss.",
}


def _generated(ctx: GateContext, kind: str) -> Verdict:
    """Ask the LLM for tests, run them (the project's pytest) in a copy of the checkout:
    the generated code is as trusted as an agent's, and never lands in the change."""
    if not ctx.llm.configured:
        return Verdict("skipped", f"not configured: {ctx.llm.not_configured_reason()}")
    system = (GENERATED_PROMPTS[kind] + " Import from the project's packages as its "
              "existing tests do. Answer with one ```python block only.")
    user = f"Task: {ctx.task_title}\n{ctx.task_description}\n\nDiff:\n" + \
        redact_secrets(working_diff(ctx))[:12000]
    try:
        reply = ctx.llm.chat(system, user, max_tokens=1500, purpose=kind)
    except LlmUnavailable as exc:
        return Verdict("skipped", f"skipped: {exc}")
    match = _CODE.search(reply.text)
    code = (match.group(1) if match else reply.text).strip() + "\n"
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return Verdict("warn", f"the generated test is not Python (line {exc.lineno}): "
                               "nothing ran", metadata={"model": reply.model})
    argv = [*ctx.tool("pytest", "pytest"), "-q", "-p", "no:cacheprovider", "--tb=short"]
    env = {**(ctx.env if ctx.env is not None else os.environ), "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory(prefix=f"bt-{kind}-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(ctx.root, tree, ignore=IGNORED_IN_COPIES, symlinks=True)
        target = tree / "tests" / f"test_bt_{kind}.py"
        target.parent.mkdir(exist_ok=True)
        target.write_text(code, encoding="utf-8")
        run = run_tool([*argv, str(target.relative_to(tree))], tree, ctx.timeout_s, env=env,
                       cancel=ctx.cancel)
    ctx.outputs.append(f"# generated by {reply.model}\n{code}\n$ pytest\n{run.output}"
                       f"[exit {run.exit_code}]\n")
    found = recognise(run.output, tree)
    meta = {"model": reply.model, "counts": found.counts, "generated_lines": code.count("\n")}
    if run.timed_out:
        return Verdict("timeout", f"the generated tests took over {ctx.timeout_s:.0f} s", "",
                       meta)
    if run.exit_code == 0:
        return Verdict("pass", f"{found.counts.get('passed', 0)} generated test(s) pass",
                       metadata=meta)
    if run.exit_code == 1 and found.counts.get("failed"):
        return Verdict("fail", f"{found.counts['failed']} generated test(s) fail",
                       found.digest.render(), meta)
    return Verdict("warn", f"the generated tests did not run (pytest exit {run.exit_code}): "
                           f"{one_line(run.output)}", tail(run.output), meta)


def integration_test_gen(ctx: GateContext) -> Verdict:
    return _generated(ctx, "integration_test_gen")


def test_expansion(ctx: GateContext) -> Verdict:
    return _generated(ctx, "test_expansion")
