"""What a synthetic project is made of (benchmarks/generate.py writes it): how many of
each record, the values the records draw from, and whose writer they look like."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from console.model import TaskState

BASE_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed, so the bytes are too
ROLES = ("backend", "frontend", "qa", "docs", "devops", "security")
GATES = ("lint", "type_check", "tests", "security_scan", "coverage_delta", "complexity_check",
         "dead_code", "import_cycle", "pii_scan")
GATE_STATUSES = ("pass",) * 14 + ("fail", "fail", "warn", "timeout", "skipped", "bypassed")
MODELS = ("haiku", "sonnet", "opus")
WORDS = ("add", "fix", "refactor", "document", "test", "rate", "limit", "upload", "cache",
         "parser", "endpoint", "schema", "retry", "queue", "index", "login", "billing",
         "report", "export", "search")
#: every state a task ends in; the common ones weighted up
STATE_WEIGHTS = {s: 1 for s in TaskState} | {
    TaskState.OPEN: 12, TaskState.DONE: 30, TaskState.CLOSED: 15, TaskState.FAILED: 6,
    TaskState.IN_PROGRESS: 4, TaskState.CLAIMED: 3, TaskState.BLOCKED: 3,
    TaskState.CANCELLED: 3, TaskState.PLANNED: 3,
}
#: the states a task passes through on its way to each final state (its earlier records)
PATHS = {
    TaskState.CLAIMED: ("open",), TaskState.IN_PROGRESS: ("open", "claimed"),
    TaskState.DONE: ("open", "claimed", "in_progress"),
    TaskState.CLOSED: ("open", "claimed", "in_progress", "done"),
    TaskState.FAILED: ("open", "claimed", "in_progress"),
    TaskState.ORPHANED: ("open", "claimed", "in_progress"),
    TaskState.WAITING_FOR_SUBTASKS: ("open", "claimed"), TaskState.CANCELLED: ("open",),
}


@dataclass(frozen=True)
class Sizes:
    tasks: int = 10_000
    gate_lines: int = 1_000_000
    chains: int = 50_000
    reflections: int = 20_000
    proposals: int = 100
    reviews: int = 2_000
    sla_events: int = 2_000
    gate_reports: int = 200
    tickets: int = 12

    @classmethod
    def small(cls) -> Sizes:
        return cls(tasks=200, gate_lines=2_000, chains=100, reflections=100, proposals=10,
                   reviews=20, sla_events=20, gate_reports=20, tickets=6)

    def scaled(self, factor: float) -> Sizes:
        """Every count times `factor` (the scale curve: 3x, 10x the large project)."""
        return Sizes(**{k: max(1, round(v * factor)) for k, v in asdict(self).items()})

    @classmethod
    def tiny(cls) -> Sizes:
        return cls(tasks=60, gate_lines=300, chains=20, reflections=20, proposals=6,
                   reviews=6, sla_events=6, gate_reports=4, tickets=3)


#: the metadata Bernstein 3.23 merges into a gate's line (gate_runner: the command run)
GATE_COMMANDS = {"lint": "ruff check .", "type_check": "mypy src", "tests": "pytest -x -q",
                 "security_scan": "bandit -r src", "coverage_delta": "coverage run -m pytest",
                 "complexity_check": "radon cc src"}
SHAPES = ("1.9.3", "3.23")
