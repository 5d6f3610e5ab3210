"""Multi-judge review (seed 003, Polpo): N judges score each dimension 1–5 with
reasoning; per dimension the median wins and scores more than 1.5 from it are
dropped; at least two of three judges must answer (one answer is used alone,
none fails with the reason); the global score is the weighted average; it passes
at or above the threshold. The cross-model verifier (off by default) asks a
model of another family than the one that wrote the change.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from console.engine.llm import LlmClient, LlmUnavailable

DEFAULT_DIMENSIONS = (
    ("correctness", 0.35, "Task achieves its stated goals correctly"),
    ("completeness", 0.30, "All requirements in the description are addressed"),
    ("code_quality", 0.20, "Code is clean, readable, and maintainable"),
    ("edge_cases", 0.15, "Edge cases and error conditions are handled"),
)
OUTLIER = 1.5
#: writer family → reviewer model (seed 000's cross-model verifier)
CROSS_MODEL = {"claude": "gemini-flash", "haiku": "gemini-flash", "sonnet": "gemini-flash",
               "opus": "gemini-flash", "gemini": "claude-haiku", "gpt": "gemini-flash",
               "codex": "claude-haiku", "qwen": "claude-haiku"}


@dataclass(frozen=True, slots=True)
class Dimension:
    name: str
    weight: float
    description: str = ""
    rubric: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReviewConfig:
    judges: int = 3
    threshold: float = 3.0
    dimensions: tuple[Dimension, ...] = tuple(Dimension(*d) for d in DEFAULT_DIMENSIONS)
    models: tuple[str, ...] = ()  # one per judge; default: the configured LLM model
    cross_model: bool = False


def parse_review(raw: object) -> ReviewConfig:
    if raw is None:
        return ReviewConfig()
    if not isinstance(raw, dict):
        raise ValueError("review must be a map")
    dims = raw.get("dimensions")
    dimensions = ReviewConfig().dimensions
    if dims is not None:
        if not isinstance(dims, list) or not dims:
            raise ValueError("review.dimensions must be a list")
        dimensions = tuple(Dimension(str(d["name"]), float(d.get("weight", 1.0)),
                                     str(d.get("description", "")),
                                     {str(k): str(v) for k, v in (d.get("rubric") or {}).items()})
                           for d in dims)
    models = raw.get("models") or ()
    judges = int(raw.get("judges", 3))
    if judges < 1:
        raise ValueError("review.judges must be at least 1")
    if any(d.weight <= 0 for d in dimensions):
        raise ValueError("review.dimensions: every weight must be more than 0")
    return ReviewConfig(judges=judges, threshold=float(raw.get("threshold", 3.0)),
                        dimensions=dimensions, models=tuple(str(m) for m in models),
                        cross_model=bool(raw.get("cross_model", False)))


def reviewer_for(writer_model: str) -> str | None:
    name = writer_model.lower()
    return next((reviewer for family, reviewer in CROSS_MODEL.items() if family in name), None)


def merge_scores(answers: Sequence[Mapping[str, Any]], dimensions: Sequence[Dimension]
                 ) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Median per dimension, dropping scores more than OUTLIER from it; returns (merged, the
    individual scores marked dropped or not)."""
    merged: dict[str, float] = {}
    scored: list[dict[str, Any]] = []
    for dim in dimensions:
        values = [(a["judge"], float(a["scores"][dim.name]["score"]),
                   str(a["scores"][dim.name].get("reasoning", "")))
                  for a in answers if dim.name in a["scores"]]
        if not values:
            continue
        median = statistics.median(v for _, v, _ in values)
        kept = [v for _, v, _ in values if abs(v - median) <= OUTLIER]
        merged[dim.name] = round(statistics.median(kept), 3) if kept else median
        scored += [{"judge": judge, "dimension": dim.name, "score": value,
                    "reasoning": reasoning, "dropped": abs(value - median) > OUTLIER}
                   for judge, value, reasoning in values]
    return merged, scored


def global_score(merged: Mapping[str, float], dimensions: Sequence[Dimension]) -> float | None:
    weights = {d.name: d.weight for d in dimensions if d.name in merged}
    total = sum(weights.values())
    if not total:
        return None
    return round(sum(merged[n] * w for n, w in weights.items()) / total, 3)


def _prompt(dimensions: Sequence[Dimension]) -> str:
    lines = ["You review a coding agent's change. Score each dimension from 1 (completely "
             "wrong or missing) to 5 (excellent) with one or two sentences of reasoning.",
             "Dimensions:"]
    for dim in dimensions:
        lines.append(f"- {dim.name} (weight {dim.weight}): {dim.description}")
        for score, text in sorted(dim.rubric.items()):
            lines.append(f"    {score}: {text}")
    lines.append('Answer with JSON only: {"scores": [{"dimension": "...", "score": 1-5, '
                 '"reasoning": "..."}]}')
    return "\n".join(lines)


def _parse(text: str, dimensions: Sequence[Dimension]) -> dict[str, dict[str, Any]]:
    body = json.loads(text[text.find("{"): text.rfind("}") + 1])
    names = {d.name for d in dimensions}
    scores: dict[str, dict[str, Any]] = {}
    for item in body["scores"]:
        name = str(item["dimension"])
        score = float(item["score"])
        if name in names and 1 <= score <= 5:
            scores[name] = {"score": score, "reasoning": str(item.get("reasoning", ""))}
    if not scores:
        raise ValueError("no usable scores")
    return scores


class MultiJudgeReview:
    def __init__(self, llm: LlmClient, config: ReviewConfig) -> None:
        self.llm = llm
        self.config = config

    def review(self, *, task_id: str, title: str, description: str, diff: str,
               writer_model: str) -> dict[str, Any]:
        """One reviews.jsonl record; `passed` False with a reason when too few judges answer."""
        config = self.config
        base: dict[str, Any] = {"timestamp": time.time(), "task_id": task_id,
                                "threshold": config.threshold, "judges": config.judges}
        if not self.llm.configured:
            return {**base, "scores": [], "merged": {}, "global_score": None, "passed": True,
                    "skipped": True, "reason": f"review skipped: "
                                               f"{self.llm.not_configured_reason()}"}
        models = list(config.models) or [self.llm.config.model] * config.judges
        if config.cross_model:
            other = reviewer_for(writer_model)
            models = [other or m for m in models]
        user = f"Task: {title}\n{description}\n\nDiff:\n{diff[:12000]}"
        system = _prompt(config.dimensions)

        def judge(index: int) -> dict[str, Any] | str:
            model = models[index % len(models)]
            try:
                reply = self.llm.chat(system, user, max_tokens=800, model=model, purpose="review")
                return {"judge": f"judge-{index + 1} ({reply.model})",
                        "scores": _parse(reply.text, config.dimensions)}
            except (LlmUnavailable, ValueError, KeyError, TypeError) as exc:
                return f"judge-{index + 1}: {exc}"

        with ThreadPoolExecutor(max_workers=config.judges) as pool:
            results = list(pool.map(judge, range(config.judges)))
        answers = [r for r in results if isinstance(r, dict)]
        failures = [r for r in results if isinstance(r, str)]
        if not answers:
            return {**base, "scores": [], "merged": {}, "global_score": None, "passed": False,
                    "reason": "no judge answered: " + "; ".join(failures)}
        needed = min(2, config.judges)
        note = ""
        if len(answers) < needed:
            note = f"only {len(answers)} of {config.judges} judges answered; used alone"
        merged, scored = merge_scores(answers, config.dimensions)
        score = global_score(merged, config.dimensions)
        passed = score is not None and score >= config.threshold
        return {**base, "scores": scored, "merged": merged, "global_score": score,
                "passed": passed, "failed_judges": failures,
                "reason": note or (f"global score {score} {'≥' if passed else '<'} "
                                   f"{config.threshold}")}


def feedback(record: Mapping[str, Any]) -> str:
    """The judges' reasoning for the retry prompt."""
    lines = [f"Review: global score {record.get('global_score')} (threshold "
             f"{record.get('threshold')}) — {record.get('reason', '')}"]
    for score in record.get("scores", []):
        if not score.get("dropped"):
            lines.append(f"- {score['dimension']} {score['score']:g}/5: {score['reasoning']}")
    return "\n".join(lines)
