"""The figures of the quality and chains screens, computed from the State.

Pure functions (no widgets, no I/O): seed 000's quality routes and Polpo's
quality metrics — success rate, gate pass rates with their recent runs,
duration percentiles, per-model success and cost, the cost trend and a budget
forecast, the files gates flag most, per-gate duration and cache hits — and the
cascade figures: escalation rate and savings against the top tier.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from console.model import SUCCEEDED
from console.sdd.state import State

SPARKS = "▁▂▃▄▅▆▇█"
_LOCATION = re.compile(r"^([^\s:][^:]*):\d+")


def sparkline(values: list[float]) -> str:
    if not values:
        return ""
    top = max(values) or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, int(v / top * (len(SPARKS) - 1)))]
                   for v in values)


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


@dataclass(frozen=True, slots=True)
class GateRow:
    gate: str
    runs: int
    pass_rate: float
    recent: str  # one mark per recent run: ✓ or ✗
    mean_ms: float
    cache_rate: float


@dataclass(frozen=True, slots=True)
class ModelRow:
    model: str
    attempts: int
    success_rate: float
    cost_usd: float


@dataclass(frozen=True, slots=True)
class Quality:
    finished: int
    succeeded: int
    gates: list[GateRow]
    durations: tuple[float | None, float | None, float | None]  # p50, p90, p99 seconds
    duration_count: int
    models: list[ModelRow]
    cost_usd: float
    cost_trend: list[float]  # cost per bucket, oldest first
    bucket_s: int
    unfinished: int
    cost_per_task: float | None
    flagged_files: list[tuple[str, int]]

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.finished if self.finished else None

    def forecast(self, budget: float | None) -> str:
        if self.cost_per_task is None:
            return "no finished chain yet: nothing to forecast from"
        more = self.cost_per_task * self.unfinished
        text = (f"${self.cost_usd:.4f} spent; at ${self.cost_per_task:.4f} a task the "
                f"{self.unfinished} unfinished task(s) add ≈${more:.4f} "
                f"→ ≈${self.cost_usd + more:.4f}")
        if budget:
            share = (self.cost_usd + more) / budget
            text += f" of the ${budget:.2f} budget ({share:.0%})"
            if share > 1:
                text += " ✗ over budget"
        return text


def quality_of(state: State, buckets: int = 24) -> Quality:
    counts = state.state_counts()
    succeeded = sum(counts[s] for s in SUCCEEDED)
    finished = succeeded + counts["failed"]
    gates = [GateRow(name, stats.runs, stats.passed / judged if (judged := stats.runs -
                                                                  stats.skipped) else 0.0,
                     "".join("–" if ok is None else "✓" if ok else "✗" for ok in stats.recent),
                     stats.total_ms / stats.runs if stats.runs else 0.0,
                     stats.cached / stats.runs if stats.runs else 0.0)
             for name, stats in sorted(state.gate_stats.items())]
    durations = sorted(m.duration_seconds for m in state.task_metrics.values())
    if not durations:
        durations = sorted(a.duration_seconds for a in state.archive.values()
                           if a.duration_seconds is not None)
    per_model: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    stamped: list[tuple[float, float]] = []
    for chain in state.chains.values():
        for attempt in chain.attempts:
            row = per_model[attempt.model]
            row[0] += 1
            row[1] += attempt.success
            row[2] += attempt.cost_usd
        if chain.timestamp is not None:
            stamped.append((chain.timestamp, chain.total_cost_usd))
    models = [ModelRow(model, int(a), s / a if a else 0.0, cost)
              for model, (a, s, cost) in sorted(per_model.items(), key=lambda kv: -kv[1][2])]
    trend, bucket_s = _trend(stamped, buckets)
    flagged: Counter[str] = Counter()
    # a reflection keeps the digest of every failed iteration; a gate report only the
    # latest run, so it counts for tasks no reflection covers
    digests = [r.digest for items in state.reflections.values() for r in items]
    digests += [result.digest for report in state.gate_reports.values()
                if not state.reflections.get(report.task_id)
                for result in report.results if result.status in ("fail", "timeout")]
    for digest in digests:  # each failing run counts a file once
        flagged.update({m.group(1) for line in digest.splitlines()
                        if (m := _LOCATION.match(line.strip()))})
    unfinished = sum(n for status, n in counts.items()
                     if status not in SUCCEEDED | {"failed", "cancelled"})
    return Quality(finished, succeeded, gates,
                   (percentile(durations, 0.5), percentile(durations, 0.9),
                    percentile(durations, 0.99)), len(durations), models, state.chain_cost,
                   trend, bucket_s, unfinished,
                   state.chain_cost / len(state.chains) if state.chains else None,
                   flagged.most_common(8))


def _trend(stamped: list[tuple[float, float]], buckets: int) -> tuple[list[float], int]:
    if not stamped:
        return [], 0
    first = min(t for t, _ in stamped)
    last = max(t for t, _ in stamped)
    bucket_s = max(1, int((last - first) / buckets) + 1)
    trend = [0.0] * buckets
    for when, cost in stamped:
        trend[min(buckets - 1, int((when - first) / bucket_s))] += cost
    return trend, bucket_s


@dataclass(frozen=True, slots=True)
class ChainTotals:
    total: int
    escalated: int
    succeeded: int
    cost_usd: float
    saved_usd: float
    overhead_usd: float

    @property
    def escalation_rate(self) -> float | None:
        return self.escalated / self.total if self.total else None


def chain_totals(state: State) -> ChainTotals:
    chains = state.chains.values()
    return ChainTotals(
        total=len(state.chains),
        escalated=sum(1 for c in chains if c.escalated),
        succeeded=sum(1 for c in chains if c.succeeded),
        cost_usd=state.chain_cost,
        saved_usd=sum(c.saved_vs_direct_opus_usd for c in chains),
        overhead_usd=sum(c.escalation_overhead_usd for c in chains))


def parse_budget(value: object) -> float | None:
    """Bernstein's `budget:` ("$10", "10", 10); None when absent or unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value > 0 else None
    if isinstance(value, str):
        try:
            amount = float(value.strip().lstrip("$").replace(",", ""))
        except ValueError:
            return None
        return amount if amount > 0 else None
    return None
