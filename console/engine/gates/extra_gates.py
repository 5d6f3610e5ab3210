"""Two of seed 000's gates beyond the tool-backed ones: comment_quality (deterministic:
public functions and classes the change adds to Python files, without a docstring) and
review_rubric (the multi-judge rubric of seed 003 over the diff, through the one LLM
client; "not configured" without an endpoint)."""

from __future__ import annotations

import ast
import re

from console.engine.gates import digest as dg
from console.engine.gates.base import GateContext, Verdict
from console.engine.gates.repo_gates import redact_secrets, working_diff
from console.engine.gates.scan_gates import _read
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
