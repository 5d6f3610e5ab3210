"""Where everything lives in a project's `.sdd/` (DESIGN §3, reference §1)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

import msgspec

from console.sdd.user_dirs import project_key, user_cache_dir


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
    def heartbeats_dir(self) -> Path:
        return self.sdd / "runtime" / "heartbeats"

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
        """The console's checkpoint of what it read (sdd/checkpoint.py): in this user's
        cache, never in the project (looking at a project writes nothing into it, and
        what is in it is anyone's: DESIGN §7), one file a project, named by the sha256
        of the project's real path. (One left in `.sdd/caching/console/` by an older
        version is never read, nor removed.)"""
        return user_cache_dir() / "checkpoints" / f"{project_key(self.root)}.ckpt"

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

    def changes(self, paths: Iterable[Path]) -> Changes:
        """What changed paths (file events, or directories to look through) touch."""
        out = Changes()
        for path in paths:
            kind = self.classify(path)
            if kind in (Kind.GATE_REPORT, Kind.TICKET):
                out.files.append((kind, path))
            elif kind is Kind.ENGINE_STATUS:
                out.status = True
            elif kind is not None:
                out.kinds.add(kind)
            elif path == self.heartbeats_dir or self.heartbeats_dir in path.parents:
                out.agents = True
            elif path == self.gates_dir or self.gates_dir in path.parents:
                out.dirs.add(Kind.GATE_REPORT)
            elif path == self.backlog_open or self.backlog_open in path.parents:
                out.dirs.add(Kind.TICKET)
            elif path == self.sdd or path in self.gates_dir.parents:
                out.dirs.update({Kind.GATE_REPORT, Kind.TICKET})
                out.kinds.update(JSONL_KINDS)
                out.status = out.agents = True
            elif self.sdd in path.parents and not path.suffix:
                out.kinds.update(k for k in JSONL_KINDS if self.of(k).is_relative_to(path))
                out.status = out.status or self.of(Kind.ENGINE_STATUS).is_relative_to(path)
                out.agents = out.agents or self.heartbeats_dir.is_relative_to(path)
                if self.backlog_open.is_relative_to(path):
                    out.dirs.add(Kind.TICKET)
        return out


class Changes(msgspec.Struct):
    """What `SddPaths.changes` found to read again."""

    files: list[tuple[Kind, Path]] = msgspec.field(default_factory=list)  # whole files
    kinds: set[Kind] = msgspec.field(default_factory=set)  # JSONL kinds
    dirs: set[Kind] = msgspec.field(default_factory=set)  # directories to list again
    status: bool = False  # engine_status.json
    agents: bool = False  # runtime/heartbeats/ (the running agents: sdd/agent_live.py)
