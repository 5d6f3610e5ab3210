"""A synthetic `.sdd/` of any size, in Bernstein's formats, deterministic from a seed.

`python -m benchmarks.generate DIR [--tasks N] [--gate-lines N] ...` writes a project
(`DIR/.sdd/...`) with every task state, every JSONL kind the console reads, gate
reports and backlog tickets in all three forms. Same seed and sizes → same bytes.
The defaults are the "large" project of DESIGN §6: 10,000 tasks, 1,000,000 gate
lines, 50,000 chains, 20,000 reflections, 100 proposals.

Task records go through `task_codec.encode_task` (the one writer of that format),
so they are exactly what the engine writes; the metrics lines use the keys of
reference §3 (the bulk kinds are formatted directly, for speed).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.synthetic import (
    BASE_EPOCH,
    GATE_COMMANDS,
    GATE_STATUSES,
    GATES,
    MODELS,
    PATHS,
    ROLES,
    SHAPES,
    STATE_WEIGHTS,
    WORDS,
    Sizes,
)
from console.model import TaskState
from console.sdd.paths import Kind, SddPaths
from console.sdd.skeleton import init_project
from console.sdd.task_codec import OUR_TASK_KEYS, decode_task, encode_task


class _Writer:
    """Buffered line writer for one JSONL file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.buffer: list[str] = []
        self.lines = 0

    def line(self, text: str) -> None:
        self.buffer.append(text)
        self.lines += 1
        if len(self.buffer) >= 20_000:
            self.flush()

    def record(self, obj: dict[str, Any]) -> None:
        self.line(json.dumps(obj))

    def flush(self) -> None:
        self.handle.write("\n".join(self.buffer) + "\n" if self.buffer else "")
        self.buffer.clear()

    def close(self) -> int:
        self.flush()
        self.handle.close()
        return self.lines


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()




class Generator:
    def __init__(self, root: Path, sizes: Sizes, seed: int, shape: str = "1.9.3") -> None:
        """`shape`: whose writer the task records and gate lines look like — Bernstein
        1.9.3's (reference §2.4) and ours, or 3.23.0's (two more task keys and none of
        ours; a gate's metadata in its line: reference/bernstein-observed.md)."""
        if shape not in SHAPES:
            raise ValueError(f"shape {shape!r} is not one of {', '.join(SHAPES)}")
        self.shape = shape
        self.root = root
        self.paths = SddPaths(root)
        self.sizes = sizes
        self.rng = random.Random(seed)
        self.task_ids: list[str] = []
        self.counts: dict[str, int] = {}

    def _id(self, bits: int = 48) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def _title(self) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(3, 7))).capitalize()

    def _open(self, kind: Kind) -> _Writer:
        return _Writer(self.paths.of(kind))

    def _close(self, kind: Kind, writer: _Writer) -> None:
        self.counts[kind.value] = writer.close()

    # -- tasks ---------------------------------------------------------------

    def tasks(self) -> None:
        states = list(STATE_WEIGHTS)
        weights = [STATE_WEIGHTS[s] for s in states]
        finals = list(states)  # every state at least once
        finals += self.rng.choices(states, weights, k=max(0, self.sizes.tasks - len(finals)))
        finals = finals[: self.sizes.tasks]
        tasks_out, archive, metrics = (self._open(Kind.TASKS), self._open(Kind.ARCHIVE),
                                       self._open(Kind.TASK_METRICS))
        shape_323 = self.shape == "3.23"
        for index, final in enumerate(finals):
            task_id = self._id()
            self.task_ids.append(task_id)
            created = BASE_EPOCH + index * 3.0
            role = self.rng.choice(ROLES)
            base = {"id": task_id, "title": self._title(), "description": "Synthetic task.",
                    "role": role, "priority": self.rng.randint(0, 3), "status": "open",
                    "created_at": created, "estimated_minutes": self.rng.choice((10, 30, 45)),
                    "model": self.rng.choice(MODELS), "owned_files": [f"src/{role}/m{index}.py"],
                    "depends_on": [self.task_ids[index - 1]] if index and index % 9 == 0
                    else []}
            task = decode_task(base)
            history = (*PATHS.get(final, ()), final.value)
            if history[0] != "open":
                history = (final.value,)
            for version, status in enumerate(history, start=1):
                stamp = created + version * 60.0
                changes: dict[str, Any] = {"status": status, "version": version}
                if status == "claimed":
                    changes["claimed_at"] = stamp
                    changes["claimed_by_session"] = f"{role}-{task_id[:8]}"
                if status in ("done", "failed", "cancelled"):
                    changes["completed_at"] = stamp
                    changes["result_summary"] = f"{status}: synthetic"
                if status == "closed":
                    changes["closed_at"] = stamp
                record = encode_task(task) | changes
                if shape_323:  # (TaskStore._task_to_record in 3.23.0)
                    record = {k: v for k, v in record.items() if k not in OUR_TASK_KEYS} | {
                        "parent_context": None, "max_turns": None}
                tasks_out.record(record)
            if final in (TaskState.DONE, TaskState.CLOSED, TaskState.FAILED,
                         TaskState.CANCELLED):
                done_at = created + 240.0
                archive.record({
                    "task_id": task_id, "title": base["title"], "role": role,
                    "status": "done" if final is TaskState.CLOSED else final.value,
                    "created_at": created, "completed_at": done_at,
                    "duration_seconds": 240.0, "result_summary": "synthetic", "cost_usd": None,
                    "assigned_agent": None, "owned_files": base["owned_files"],
                    "tenant_id": "default", "claimed_by_session": f"{role}-{task_id[:8]}"})
                metrics.record({
                    "timestamp": done_at, "task_id": task_id, "role": role,
                    "model": base["model"], "provider": "script", "duration_seconds": 240.0,
                    "tokens_prompt": 0, "tokens_completion": 0,
                    "cost_usd": round(self.rng.random(), 4),
                    "janitor_passed": final is not TaskState.FAILED, "files_modified": 0,
                    "lines_added": 0, "lines_deleted": 0})
        self._close(Kind.TASKS, tasks_out)
        self._close(Kind.ARCHIVE, archive)
        self._close(Kind.TASK_METRICS, metrics)

    # -- bulk metrics ----------------------------------------------------------

    def gate_lines(self) -> None:
        out = self._open(Kind.GATE_LINES)
        rng, ids = self.rng, self.task_ids
        commands = GATE_COMMANDS if self.shape == "3.23" else {}
        for index in range(self.sizes.gate_lines):
            status = rng.choice(GATE_STATUSES)
            required = index % 3 != 0
            result = ("pass" if status in ("pass", "skipped", "bypassed")
                      else "blocked" if required else "flagged")
            gate = rng.choice(GATES)
            metadata = f', "command": "{commands[gate]}"' if gate in commands else ""
            out.line(
                f'{{"timestamp": "{_iso(BASE_EPOCH + index * 0.25)}", '
                f'"task_id": "{ids[index % len(ids)]}", "gate": "{gate}", '
                f'"result": "{result}", "status": "{status}", '
                f'"duration_ms": {rng.randint(5, 30_000)}, '
                f'"cached": {"true" if index % 4 == 0 else "false"}, '
                f'"required": {"true" if required else "false"}{metadata}}}')
        self._close(Kind.GATE_LINES, out)

    def chains(self) -> None:
        out = self._open(Kind.CHAINS)
        for index in range(self.sizes.chains):
            chain_id, task_id = self._id(64), self.task_ids[index % len(self.task_ids)]
            tries = self.rng.choice((1, 1, 1, 2, 2, 3))
            attempts = []
            for number in range(tries):
                last = number == tries - 1
                attempts.append({
                    "task_id": task_id, "chain_id": chain_id, "model": MODELS[number],
                    "effort": "high", "attempt_number": number,
                    "started_at": BASE_EPOCH + index + number * 0.5,
                    "cost_usd": round(0.1 * (number + 1), 2), "latency_s": 30.0,
                    "tokens_used": 1000 * (number + 1), "success": last,
                    "escalated": not last,
                    "escalation_reason": None if last else "janitor verification failed"})
            total = round(sum(a["cost_usd"] for a in attempts), 2)
            out.record({"timestamp": BASE_EPOCH + index, "chain_id": chain_id,
                        "task_id": task_id, "role": self.rng.choice(ROLES),
                        "attempts": attempts, "final_model": MODELS[tries - 1],
                        "succeeded": True, "total_cost_usd": total,
                        "first_attempt_cost_usd": 0.1,
                        "escalation_overhead_usd": round(total - 0.1, 2),
                        "saved_vs_direct_opus_usd": 0.0})
        self._close(Kind.CHAINS, out)

    def reflections(self) -> None:
        out = self._open(Kind.REFLECTIONS)
        for index in range(self.sizes.reflections):
            gate = self.rng.choice(GATES)
            out.record({
                "timestamp": BASE_EPOCH + index, "task_id": self.task_ids[index % len(
                    self.task_ids)], "iteration": index % 3, "model": self.rng.choice(MODELS),
                "gate": gate, "error_pattern": f"{gate}:E{index % 50}",
                "digest": f"{gate} failed: 1 error", "diagnosis": {
                    "what_failed": f"{gate} reported an error",
                    "why": "the change broke an assumption", "try_next": "fix the call site",
                    "focus": "src/"},
                "files_changed": [f"src/m{index % 100}.py"], "reused": index % 5 == 0,
                "source": "rules"})
        self._close(Kind.REFLECTIONS, out)

    def reviews(self) -> None:
        out = self._open(Kind.REVIEWS)
        for index in range(self.sizes.reviews):
            scores = [{"judge": judge, "dimension": dim, "score": self.rng.randint(1, 5),
                       "reasoning": "synthetic", "dropped": False}
                      for judge in ("j1", "j2") for dim in ("correctness", "style")]
            out.record({"timestamp": BASE_EPOCH + index,
                        "task_id": self.task_ids[index % len(self.task_ids)],
                        "scores": scores, "merged": {"correctness": 3.5, "style": 4.0},
                        "global_score": 3.75, "threshold": 3.0, "passed": True})
        self._close(Kind.REVIEWS, out)

    def sla_events(self) -> None:
        out = self._open(Kind.SLA_EVENTS)
        for index in range(self.sizes.sla_events):
            event = ("sla:warning", "sla:violated", "sla:met")[index % 3]
            out.record({"event": event, "entity_id": self.task_ids[index % len(self.task_ids)],
                        "entity_type": "task", "deadline": BASE_EPOCH + 3600 + index,
                        "timestamp": BASE_EPOCH + index, "elapsed": 3000.0,
                        "remaining": 600.0, "percent_used": 83.3,
                        "overdue_ms": 0.0, "margin_ms": 600_000.0})
        self._close(Kind.SLA_EVENTS, out)

    def review_queue(self) -> None:
        """An unsure judge's flag on a few tasks (metrics/review_queue.jsonl)."""
        out = self._open(Kind.REVIEW_QUEUE)
        for index in range(max(1, self.sizes.reviews // 4)):
            out.record({"timestamp": BASE_EPOCH + index, "attempt": 1,
                        "task_id": self.task_ids[(index * 50) % len(self.task_ids)],
                        "source": "llm_judge", "signal": "is the change complete?",
                        "detail": "accepted with confidence 0.55 (below 0.7): review by a "
                                  "human"})
        self._close(Kind.REVIEW_QUEUE, out)

    def phase_gates(self) -> None:
        out = self._open(Kind.PHASE_GATES)
        for index in range(max(3, self.sizes.proposals)):
            event = ("quality:gate:passed", "quality:gate:failed",
                     "quality:threshold:failed")[index % 3]
            out.record({"event": event, "mission_id": f"mission-{index % 7}",
                        "gate_name": "tests", "reason": "synthetic", "avg_score": 3.2,
                        "threshold": 3.0, "timestamp": BASE_EPOCH + index})
        self._close(Kind.PHASE_GATES, out)

    def evolution(self) -> None:
        deferred, decisions, experiments = (self._open(Kind.DEFERRED),
                                            self._open(Kind.DECISIONS),
                                            self._open(Kind.EXPERIMENTS))
        for index in range(self.sizes.proposals):
            pid = f"UPG-{index + 1:04d}"
            risk = ("config", "template", "logic", "structural")[index % 4]
            deferred.record({
                "proposal_id": pid, "title": f"Proposal {index}", "category": "model_routing",
                "description": "Route docs tasks to a cheaper model.",
                "confidence": round(0.5 + (index % 50) / 100, 2),
                "reason": f"{risk} change — human review", "deferred_at": BASE_EPOCH + index,
                "target_files": ["bernstein.yaml"], "risk_level": risk,
                "diff": "--- a/bernstein.yaml\n+++ b/bernstein.yaml\n@@ -1 +1 @@\n-a\n+b\n"})
            decisions.record({
                "proposal_id": pid, "risk_level": risk, "confidence": 0.8,
                "outcome": "human_review_4h", "reason": "L2 — human review",
                "requires_human": True, "decided_at": BASE_EPOCH + index, "reviewer": None})
            if index % 3 == 0:  # a third of them decided since
                decisions.record({
                    "proposal_id": pid, "risk_level": risk, "confidence": 0.8,
                    "outcome": "auto_approved" if index % 2 else "rejected",
                    "reason": "operator", "requires_human": False,
                    "decided_at": BASE_EPOCH + index + 60, "reviewer": "operator"})
            experiments.record({
                "proposal_id": pid, "title": f"Proposal {index}", "risk_level": risk,
                "baseline_score": 0.7, "candidate_score": 0.72, "delta": 0.02,
                "accepted": False, "reason": "Deferred for human review", "cost_usd": 0.05,
                "duration_seconds": 1.0, "timestamp": BASE_EPOCH + index})
        self._close(Kind.DEFERRED, deferred)
        self._close(Kind.DECISIONS, decisions)
        self._close(Kind.EXPERIMENTS, experiments)

    def engine_events(self) -> None:
        out = self._open(Kind.ENGINE_EVENTS)
        for index in range(50):
            out.record({"timestamp": BASE_EPOCH + index,
                        "level": ("info", "warning", "error")[index % 3],
                        "message": f"synthetic engine event {index}",
                        "task_id": self.task_ids[index % len(self.task_ids)], "file": None})
        self._close(Kind.ENGINE_EVENTS, out)

    # -- whole-file kinds --------------------------------------------------------

    def gate_reports(self) -> None:
        self.paths.gates_dir.mkdir(parents=True, exist_ok=True)
        for task_id in self.task_ids[: self.sizes.gate_reports]:
            results = [{"name": gate, "status": "pass", "required": True, "blocked": False,
                        "cached": False, "duration_ms": 100, "details": "ok", "digest": "",
                        "metadata": {}} for gate in GATES[:4]]
            report = {"task_id": task_id, "overall_pass": True, "total_duration_ms": 400,
                      "gates_run": list(GATES[:4]), "results": results,
                      "changed_files": ["src/a.py"], "cache_hits": 0}
            (self.paths.gates_dir / f"{task_id}.json").write_text(json.dumps(report))
        self.counts[Kind.GATE_REPORT.value] = self.sizes.gate_reports

    def tickets(self) -> None:
        folder = self.paths.backlog_open
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(self.sizes.tickets):
            title = self._title()
            form = index % 3
            if form == 0:
                (folder / f"t{index:03d}.yaml").write_text(
                    f"title: {title}\ndescription: Synthetic ticket.\nrole: backend\n"
                    "priority: 2\ncompletion_signals:\n  - {type: path_exists, path: out.txt}\n")
            elif form == 1:
                (folder / f"t{index:03d}.md").write_text(
                    f"---\ntitle: {title}\nrole: qa\npriority: 1\n---\nSynthetic ticket.\n")
            else:
                (folder / f"t{index:03d}.md").write_text(
                    f"# {title}\n\n**Role:** docs\n**Priority:** 3\n\nSynthetic ticket.\n")
        self.counts[Kind.TICKET.value] = self.sizes.tickets

    def run(self) -> dict[str, int]:
        init_project(self.root)
        for step in (self.tasks, self.gate_lines, self.chains, self.reflections, self.reviews,
                     self.sla_events, self.review_queue, self.phase_gates, self.evolution,
                     self.engine_events, self.gate_reports, self.tickets):
            step()
        return dict(self.counts)


def generate(root: Path, sizes: Sizes | None = None, seed: int = 0, shape: str = "1.9.3"
             ) -> dict[str, int]:
    """Write a synthetic project at `root`; returns lines (or files) written per kind."""
    return Generator(root, sizes or Sizes(), seed, shape).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", choices=SHAPES, default="1.9.3",
                        help="whose writer the task records and gate lines look like")
    for name, value in asdict(Sizes()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=value)
    args = parser.parse_args(argv)
    sizes = Sizes(**{name: getattr(args, name) for name in asdict(Sizes())})
    for kind, count in generate(args.root, sizes, args.seed, args.shape).items():
        print(f"{count:>10}  {kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
