"""The cascade router (seed 000) with complexity tiers (seed 002) and a bandit.

A task starts on the cheapest tier of the model ladder (one tier up when it is
high-stakes, or where the bandit has learnt the lower tier fails for its role),
and after a failed attempt escalates in seed 000's order of triggers: hard
failure, janitor failure, a required gate blocking, low-confidence phrases in
the output, an explicit failure flag. Its complexity tier decides how many
attempts each model gets before the next one. At the top of the ladder it gives
up, and the chain — every attempt with its model, cost and reason — is recorded.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec

from console.model import ADAPTER_LADDERS, DEFAULT_LADDER, Ladders, Task, effort_of, tier_of
from console.sdd.fileio import atomic_write_json, read_json_object
from console.sdd.project_config import AgentsConfig

#: $ per 1M tokens (input, output), the one price table: claude's from reference §6.2;
#: the others as their vendors list them at this writing (cascade.prices overrides; a
#: CLI that reports its own cost — claude — is believed over this table)
DEFAULT_PRICES = {
    "haiku": (1.0, 5.0), "sonnet": (3.0, 15.0), "opus": (5.0, 25.0),
    "gpt-6-luna": (0.25, 2.0), "gpt-6.1-sol": (1.25, 10.0), "gpt-6-astra": (5.0, 40.0),
    "flash-lite": (0.1, 0.4), "flash": (0.3, 2.5), "pro": (1.25, 10.0),
}
DEFAULT_PHRASES = ("i'm not sure", "i am not sure", "partial implementation",
                   "partially implemented", "todo: escalat", "left as a placeholder",
                   "i could not", "i couldn't")
HIGH_STAKES_ROLES = frozenset({"manager", "architect", "security"})
TIERS = ("trivial", "simple", "standard", "complex")
DEFAULT_ITERATIONS = {"trivial": 1, "simple": 2, "standard": 2, "complex": 2}  # seed 002
REVIEWED_TIERS = frozenset({"complex"})

# escalation triggers, in seed 000's order
HARD_FAILURE = "hard failure"
JANITOR = "janitor failure"
GATES = "required gate blocked"
REVIEW = "review below threshold"
LOW_CONFIDENCE = "low-confidence output"
FAILURE_FLAG = "explicit failure flag"
REVIEW_UNAVAILABLE = "review unavailable"
NOT_ESCALATED = frozenset({"adapter", "merge", REVIEW_UNAVAILABLE})  # no stronger model helps


@dataclass(frozen=True, slots=True)
class CascadeConfig:
    ladder: tuple[str, ...] = DEFAULT_LADDER  # for adapters without their own
    ladders: Ladders = field(default_factory=Ladders)  # each task's: its adapter's
    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: DEFAULT_PRICES)
    phrases: tuple[str, ...] = DEFAULT_PHRASES
    epsilon: float = 0.1
    min_observations: int = 5
    quality_threshold: float = 0.8
    iterations: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_ITERATIONS))
    reviewed_tiers: frozenset[str] = REVIEWED_TIERS
    core_paths: tuple[str, ...] = ()
    seed: int | None = None


def parse_cascade(raw: object, complexity: object = None) -> CascadeConfig:
    """`cascade:` and `complexity:` from bernstein.yaml; ValueError names the key."""
    section = raw if isinstance(raw, dict) else {}
    if raw is not None and not isinstance(raw, dict):
        raise ValueError("cascade must be a map")
    tiers = complexity if isinstance(complexity, dict) else {}
    ladder = section.get("ladder", DEFAULT_LADDER)
    if not (isinstance(ladder, list | tuple) and ladder and all(isinstance(m, str)
                                                                 for m in ladder)):
        raise ValueError("cascade.ladder must be a list of model names")
    by_adapter = dict(ADAPTER_LADDERS)
    for adapter, own in (section.get("ladders") or {}).items():
        if not (isinstance(own, list | tuple) and own and all(isinstance(m, str) for m in own)):
            raise ValueError(f"cascade.ladders.{adapter} must be a list of model names")
        by_adapter[str(adapter)] = tuple(own)
    prices = dict(DEFAULT_PRICES)
    for model, pair in (section.get("prices") or {}).items():
        if not (isinstance(pair, list | tuple) and len(pair) == 2):
            raise ValueError(f"cascade.prices.{model} must be [input, output] $ per 1M tokens")
        prices[str(model)] = (float(pair[0]), float(pair[1]))
    iterations = dict(DEFAULT_ITERATIONS)
    for tier, count in (tiers.get("iterations") or {}).items():
        if tier not in TIERS:
            raise ValueError(f"complexity.iterations.{tier} is not one of {', '.join(TIERS)}")
        iterations[tier] = max(1, int(count))
    reviewed = tiers.get("reviewed_tiers", sorted(REVIEWED_TIERS))
    return CascadeConfig(
        ladder=tuple(ladder), prices=prices,
        ladders=Ladders(tuple(ladder), MappingProxyType(by_adapter)),
        phrases=tuple(p.lower() for p in section.get("low_confidence_phrases", DEFAULT_PHRASES)),
        epsilon=float(section.get("epsilon", 0.1)),
        min_observations=int(section.get("min_observations", 5)),
        quality_threshold=float(section.get("quality_threshold", 0.8)),
        iterations=iterations, reviewed_tiers=frozenset(reviewed),
        core_paths=tuple(tiers.get("core_paths", ())), seed=section.get("seed"))


def complexity_tier(task: Task, config: CascadeConfig) -> tuple[str, str]:
    """Mori's four tiers from size signals, with the risk bump; returns (tier, why)."""
    minutes = task.estimated_minutes or 30
    files = len(task.owned_files)
    if task.scope == "large" or minutes > 120 or files > 8 or task.complexity == "high":
        index, why = 3, "large scope, long estimate, many files or high complexity"
    elif task.scope == "medium" and (minutes > 45 or files > 3 or task.complexity == "medium"):
        index, why = 2, "a normal feature"
    elif minutes <= 15 and files <= 1 and task.complexity == "low":
        index, why = 0, "a one-line-sized change"
    else:
        index, why = 1, "a small change to a few files"
    core = [f for f in task.owned_files if any(f.startswith(p) for p in config.core_paths)]
    if core or len(task.depends_on) >= 3:
        index = min(3, index + 1)
        why += "; bumped: touches core paths" if core else "; bumped: 3+ dependencies"
    return TIERS[index], why


def is_high_stakes(task: Task) -> bool:
    return (task.role in HIGH_STAKES_ROLES or task.complexity == "high" or task.scope == "large"
            or task.priority == 1)



def cost_usd(model: str, tokens_in: int, tokens_out: int, config: CascadeConfig) -> float:
    """By the price of the longest price-table name the model contains ("flash-lite"
    before "flash"); 0 for a model the table does not know."""
    names = [name for name in config.prices if name.lower() in model.lower()]
    if not names:
        return 0.0
    price_in, price_out = config.prices[max(names, key=len)]
    return (tokens_in * price_in + tokens_out * price_out) / 1_000_000


_USAGE = re.compile(r"^BERNSTEIN_USAGE\s+(\{.*\})\s*$", re.MULTILINE)


def usage_from_output(output: str) -> tuple[int, int]:
    """Tokens an agent reported on a `BERNSTEIN_USAGE {"input_tokens": …}` line."""
    tokens_in = tokens_out = 0
    for match in _USAGE.finditer(output):
        try:
            data = json.loads(match.group(1))
            tokens_in += int(data.get("input_tokens", 0))
            tokens_out += int(data.get("output_tokens", 0))
        except (ValueError, TypeError, AttributeError):
            continue
    return tokens_in, tokens_out


def low_confidence(output: str, phrases: tuple[str, ...]) -> str | None:
    tail = output[-2000:].lower()
    return next((p for p in phrases if p in tail), None)


def failure_flag(output: str) -> bool:
    return bool(re.search(r"^BERNSTEIN_RESULT:\s*fail", output[-2000:], re.MULTILINE | re.I))


class Bandit:
    """Epsilon-greedy over (role, model): observations and successes in .sdd/routing/."""

    def __init__(self, path: Path, config: CascadeConfig) -> None:
        self.path = path
        self.config = config
        self._lock = threading.Lock()
        self._rng = random.Random(config.seed)
        data, _problem = read_json_object(path, str(path))
        arms = (data or {}).get("arms", {})
        self.arms: dict[str, dict[str, int]] = {k: dict(v) for k, v in arms.items()
                                                if isinstance(v, dict)}

    def record(self, role: str, model: str, success: bool) -> None:
        with self._lock:
            arm = self.arms.setdefault(f"{role}|{model}", {"observations": 0, "successes": 0})
            arm["observations"] += 1
            arm["successes"] += int(success)
            atomic_write_json(self.path, {"kind": "epsilon-greedy", "epsilon":
                                          self.config.epsilon, "arms": self.arms})

    def weak(self, role: str, model: str) -> tuple[bool, str]:
        """Should this tier be skipped for this role? (never while exploring)"""
        with self._lock:
            arm = self.arms.get(f"{role}|{model}")
            if arm is None or arm["observations"] < self.config.min_observations:
                return False, ""
            rate = arm["successes"] / arm["observations"]
            if rate >= self.config.quality_threshold:
                return False, ""
            if self._rng.random() < self.config.epsilon:
                return False, f"exploring {model} despite {rate:.0%} success"
            return True, (f"bandit: {model} succeeded {arm['successes']}/"
                          f"{arm['observations']} times for role {role} "
                          f"(< {self.config.quality_threshold:.0%}); skipped")


@dataclass(frozen=True, slots=True)
class Step:
    """Where a task's next attempt runs, and why."""

    model: str
    effort: str
    reason: str
    skipped: tuple[str, ...] = ()


def with_adapter(config: CascadeConfig, agents: AgentsConfig,
                 env: Mapping[str, str]) -> CascadeConfig:
    """The cascade with the project's default adapter (`auto` resolved) known, so a task
    that names none climbs that adapter's ladder."""
    from console.engine.agents.adapters import default_adapter
    from console.engine.errors import AdapterError

    try:
        adapter = default_adapter(agents, env)
    except AdapterError:
        return config
    return dataclasses.replace(config, ladders=msgspec.structs.replace(config.ladders,
                                                                   adapter=adapter))


def project_ladders(root: Path) -> Ladders:
    """The ladders of a project's tasks, from its bernstein.yaml (ConfigError/ValueError
    when it cannot be read)."""
    import os

    from console.sdd.project_config import load_config

    config = load_config(root)
    return with_adapter(parse_cascade(config.raw.get("cascade")), config.agents,
                        os.environ).ladders


class CascadeRouter:
    def __init__(self, config: CascadeConfig, bandit: Bandit) -> None:
        self.config = config
        self.bandit = bandit

    def effort_for(self, task: Task, model: str) -> str:
        if task.effort:
            return task.effort
        return effort_of(model)

    def first(self, task: Task, role_model: str | None = None,
              adapter: str | None = None) -> Step:
        """The first attempt's model: a pin, else the role's configured model (an approved
        routing proposal writes it), else the bottom of the ladder of the task's adapter
        (+1 if high-stakes)."""
        ladder = self.config.ladders.of(task, adapter)
        if task.model:
            return Step(task.model, self.effort_for(task, task.model), "model pinned")
        start = 1 if is_high_stakes(task) and len(ladder) > 1 else 0
        why = "high-stakes task starts one tier up" if start else "cheapest tier first"
        if role_model:
            tier = tier_of(role_model, ladder)
            if tier is None:  # off the ladder: the role asks for that model, as written
                return Step(role_model, self.effort_for(task, role_model),
                            f"role {task.role} configured to start on {role_model}")
            if tier > start:
                start, why = tier, f"role {task.role} configured to start on {ladder[tier]}"
        return self._from(task, ladder, start, why)

    def _from(self, task: Task, ladder: tuple[str, ...], index: int, why: str) -> Step:
        skipped: list[str] = []
        while index < len(ladder) - 1:
            weak, note = self.bandit.weak(task.role, ladder[index])
            if not weak:
                if note:
                    why += f"; {note}"
                break
            skipped.append(note)
            index += 1
        model = ladder[index]
        reason = "; ".join([why, *skipped])
        return Step(model, self.effort_for(task, model), reason, tuple(skipped))

    def next(self, task: Task, model: str, trigger: str, tier: str,
             attempts_on_model: int) -> Step | None:
        """After a failed attempt: the same model again (iterations left), the next tier,
        or None at the top of the ladder."""
        if attempts_on_model < self.config.iterations.get(tier, 1):
            return Step(model, self.effort_for(task, model),
                        f"{trigger}; iteration {attempts_on_model + 1} on {model} ({tier} tier)")
        ladder = self.config.ladders.of(task)
        index = tier_of(model, ladder)
        if index is None or index + 1 >= len(ladder):
            return None
        return self._from(task, ladder, index + 1, f"escalated after {trigger}")


def new_chain_id() -> str:
    return uuid.uuid4().hex[:16]


def chain_record(task: Task, attempts: list[dict[str, Any]], succeeded: bool,
                 config: CascadeConfig, timestamp: float) -> dict[str, Any]:
    """Bernstein's CascadeRouter.save_chain keys (reference §3.6)."""
    total = round(sum(a["cost_usd"] for a in attempts), 6)
    first = attempts[0]["cost_usd"] if attempts else 0.0
    tokens_in = sum(a.get("tokens_in", 0) for a in attempts)
    tokens_out = sum(a.get("tokens_out", 0) for a in attempts)
    top = config.ladders.of(task)[-1]
    direct = cost_usd(top, tokens_in, tokens_out, config) / max(1, len(attempts))
    # Bernstein numbers attempts from 0 within a chain; the task-wide number is kept aside
    numbered = [{**a, "task_attempt": a.get("attempt_number"), "attempt_number": index}
                for index, a in enumerate(attempts)]
    return {
        "timestamp": timestamp, "chain_id": attempts[0]["chain_id"] if attempts else "",
        "task_id": task.id, "role": task.role, "attempts": numbered,
        "final_model": attempts[-1]["model"] if attempts else None, "succeeded": succeeded,
        "total_cost_usd": total, "first_attempt_cost_usd": round(first, 6),
        "escalation_overhead_usd": round(total - first, 6),
        "saved_vs_direct_opus_usd": round(max(0.0, direct - total), 6),  # as Bernstein
    }
