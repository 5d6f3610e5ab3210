"""The cross-model verifier (seed 000): writer ≠ reviewer. After the other gates pass,
the diff goes to a reviewer model of a *different family* than the one that wrote it
(seed 000's mapping, or `reviewer`/`reviewers` in config) with a focused review prompt;
each answers `approve` or `request_changes` with issues. With several reviewers a quorum
of approvals is needed (`quorum`, default a majority; one reviewer is QUORUM(1,1)).
`request_changes` fails the gate (blocking when `block_on_issues`, the default: the
task is retried or escalated with the issues as its digest); otherwise it only warns.
Without an LLM endpoint it is skipped as "not configured", never silently ignored.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from console.engine.gates.base import GateContext, Verdict
from console.engine.gates.repo_gates import redact_secrets, working_diff
from console.engine.llm import LlmUnavailable

MAX_DIFF = 12_000  # seed 000's cost controls: diff truncated, answer capped
MAX_ANSWER_TOKENS = 512
#: writer family → reviewer model (seed 000, cross_model_verifier.py:37-43)
REVIEWERS = (("claude", "google/gemini-flash-1.5"), ("haiku", "google/gemini-flash-1.5"),
             ("sonnet", "google/gemini-flash-1.5"), ("opus", "google/gemini-flash-1.5"),
             ("gemini", "anthropic/claude-haiku-4-5"), ("gpt", "google/gemini-flash-1.5"),
             ("codex", "anthropic/claude-haiku-4-5"), ("qwen", "anthropic/claude-haiku-4-5"))
PROMPT = ("You are a code reviewer from a different model family than the author. Review "
          "the diff for bugs, security problems and departures from the task. Answer with "
          'JSON only: {"verdict": "approve" | "request_changes", "issues": ["file:line: '
          'what is wrong", ...], "confidence": 0.0-1.0}')


def default_reviewer(writer_model: str) -> str | None:
    name = writer_model.lower()
    return next((reviewer for family, reviewer in REVIEWERS if family in name), None)


def _family(model: str) -> str:
    name = model.lower()
    return next((family for family, _ in REVIEWERS if family in name), name)


def _parse(text: str) -> tuple[str, list[str], float | None]:
    body = json.loads(text[text.find("{"): text.rfind("}") + 1])
    verdict = str(body.get("verdict", "")).strip().lower()
    if verdict not in ("approve", "request_changes"):
        raise ValueError(f"verdict '{verdict[:40]}' is neither approve nor request_changes")
    issues = [str(i)[:300] for i in body.get("issues") or [] if str(i).strip()][:20]
    confidence = body.get("confidence")
    return verdict, issues, float(confidence) if isinstance(confidence, int | float) else None


def _settings(ctx: GateContext) -> dict[str, Any]:
    raw = ctx.option("cross_model", {})
    return raw if isinstance(raw, dict) else {}


def reviewers(ctx: GateContext) -> tuple[list[str], str]:
    """The reviewer models, or why there are none."""
    settings = _settings(ctx)
    named = settings.get("reviewers") or ([settings["reviewer"]] if settings.get("reviewer")
                                          else [])
    if named:
        models = [str(m) for m in named]
        same = [m for m in models if ctx.writer_model and _family(m) == _family(ctx.writer_model)]
        if same:
            return [], f"reviewer {same[0]} is of the writer's family ({ctx.writer_model})"
        return models, ""
    chosen = default_reviewer(ctx.writer_model) if ctx.writer_model else None
    if chosen is None:
        return [], (f"no reviewer for writer model '{ctx.writer_model}' (set "
                    "quality_gates.cross_model.reviewer)" if ctx.writer_model else
                    "no writer model to review against (set quality_gates.cross_model."
                    "reviewer)")
    return [chosen], ""


def cross_model(ctx: GateContext) -> Verdict:
    if not ctx.llm.configured:
        return Verdict("skipped", f"not configured: {ctx.llm.not_configured_reason()}")
    models, why = reviewers(ctx)
    if not models:
        return Verdict("skipped", f"not configured: {why}")
    settings = _settings(ctx)
    quorum = int(settings.get("quorum") or len(models) // 2 + 1)
    diff = redact_secrets(working_diff(ctx))[:MAX_DIFF]
    user = f"Task: {ctx.task_title}\n{ctx.task_description}\n\nDiff:\n{diff}"

    def ask(model: str) -> dict[str, Any]:
        try:
            reply = ctx.llm.chat(PROMPT, user, max_tokens=MAX_ANSWER_TOKENS, model=model,
                                 purpose="cross_model_review")
            verdict, issues, confidence = _parse(reply.text)
        except (LlmUnavailable, ValueError, KeyError, TypeError, AttributeError) as exc:
            return {"reviewer": model, "verdict": None, "error": str(exc)[:200]}
        return {"reviewer": reply.model or model, "verdict": verdict, "issues": issues,
                "confidence": confidence}

    with ThreadPoolExecutor(max_workers=min(4, len(models))) as pool:
        votes = list(pool.map(ask, models))
    answered = [v for v in votes if v["verdict"]]
    approvals = sum(v["verdict"] == "approve" for v in answered)
    meta: dict[str, Any] = {"writer": ctx.writer_model or None, "votes": votes,
                            "quorum": f"{quorum} of {len(models)}", "approvals": approvals}
    if len(answered) < quorum and approvals < quorum:
        failed = "; ".join(f"{v['reviewer']}: {v['error']}" for v in votes if not v["verdict"])
        if not answered:
            return Verdict("skipped", f"no reviewer answered: {failed}", metadata=meta)
    if approvals >= quorum:
        meta["verdict"] = "approve"
        return Verdict("pass", f"approved by {approvals} of {len(models)} reviewer(s) "
                               f"(quorum {quorum})", metadata=meta)
    meta["verdict"] = "request_changes"
    issues = [f"{v['reviewer']}: {issue}" for v in answered
              if v["verdict"] == "request_changes" for issue in v["issues"]]
    digest = f"{len(issues)} issue(s) raised:\n" + "\n".join(issues) if issues else ""
    block = bool(settings.get("block_on_issues", True))
    return Verdict("fail" if block else "warn",
                   f"request_changes: {approvals} of {len(models)} approved (quorum {quorum}), "
                   f"{len(issues)} issue(s)", digest, meta)
