"""Where everything lives in a project's `.sdd/` (DESIGN §3, reference §1)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import msgspec


class Kind(StrEnum):
    """Every file kind the console reads; one reader per kind (see state.py)."""

    TASKS = "runtime/tasks.jsonl"
    ARCHIVE = "archive/tasks.jsonl"
    GATE_LINES = "metrics/quality_gates.jsonl"
    CHAINS = "metrics/cascade_chains.jsonl"
    TASK_METRICS = "metrics/tasks.jsonl"
    REFLECTIONS = "metrics/reflections.jsonl"
    REVIEWS = "metrics/reviews.jsonl"
    SLA_EVENTS = "metrics/sla_events.jsonl"
    REVIEW_QUEUE = "metrics/review_queue.jsonl"
    PHASE_GATES = "metrics/phase_gates.jsonl"
    DEFERRED = "evolution/deferred.jsonl"
    DECISIONS = "evolution/decisions.jsonl"
    EXPERIMENTS = "evolution/experiments.jsonl"
    ENGINE_EVENTS = "runtime/engine_events.jsonl"
    ENGINE_STATUS = "runtime/engine_status.json"
    GATE_REPORT = "runtime/gates/*.json"
    TICKET = "backlog/open/*"


JSONL_KINDS = tuple(k for k in Kind if k.value.endswith(".jsonl"))

#: directories `init` creates (Bernstein's ensure_sdd set, plus ours)
SKELETON_DIRS = (
    "backlog/open", "backlog/claimed", "backlog/closed", "backlog/done", "agents", "runtime",
    "runtime/gates", "runtime/heartbeats", "archive", "metrics", "evolution", "docs",
    "decisions", "caching", "routing",
)


class SddPaths(msgspec.Struct, frozen=True):
    """Paths of one project; `root` is the project directory, `sdd` its `.sdd/`."""

    root: Path

    @property
    def sdd(self) -> Path:
        return self.root / ".sdd"

    def of(self, kind: Kind) -> Path:
        """The file of a single-file kind."""
        if "*" in kind.value:
            raise ValueError(f"{kind.name} is a directory of files")
        return self.sdd / kind.value

    @property
    def gates_dir(self) -> Path:
        return self.sdd / "runtime" / "gates"

    @property
    def backlog_open(self) -> Path:
        return self.sdd / "backlog" / "open"

    @property
    def config_yaml(self) -> Path:
        return self.sdd / "config.yaml"

    @property
    def project_config(self) -> Path:
        return self.root / "bernstein.yaml"

    @property
    def checkpoint(self) -> Path:
        """The console's checkpoint of what it read (sdd/checkpoint.py)."""
        return self.sdd / "caching" / "console" / "state.ckpt"

    def display(self, path: Path) -> str:
        """A path as shown to the operator: relative to the project when inside it."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def classify(self, path: Path) -> Kind | None:
        """Which kind of file this is, or None for files the console does not read."""
        try:
            rel = path.relative_to(self.sdd)
        except ValueError:
            return None
        parts = rel.parts
        text = "/".join(parts)
        for kind in JSONL_KINDS:
            if text == kind.value:
                return kind
        if text == Kind.ENGINE_STATUS.value:
            return Kind.ENGINE_STATUS
        if len(parts) == 3 and parts[:2] == ("runtime", "gates") and parts[2].endswith(".json"):
            return Kind.GATE_REPORT
        if (len(parts) == 3 and parts[:2] == ("backlog", "open")
                and parts[2].endswith((".yaml", ".yml", ".md")) and not parts[2].startswith(".")):
            return Kind.TICKET
        return None
