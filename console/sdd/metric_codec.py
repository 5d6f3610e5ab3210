"""The metrics formats: gate lines and reports, chains, task metrics, reflections,
reviews, SLA events and phase-gate events (DESIGN §3, reference §3 and §6.1)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec

from console.model import (
    SUCCEEDED,
    Attempt,
    Chain,
    EngineEvent,
    EngineStatus,
    GateLine,
    GateReport,
    GateResult,
    JudgeScore,
    PhaseGateEvent,
    Reflection,
    Review,
    ReviewFlag,
    SlaEvent,
    TaskMetric,
)
from console.sdd.fields import (
    RecordError,
    bool_or,
    choice,
    float_or,
    int_or,
    mapping,
    opt_bool,
    opt_epoch,
    opt_float,
    opt_int,
    opt_str,
    req_str,
    str_or,
    str_tuple,
)

GATE_STATUSES = frozenset({"pass", "fail", "warn", "timeout", "skipped", "bypassed"})


def _gate_status(d: Mapping[str, Any], key: str) -> str:
    return choice(d, key, GATE_STATUSES)


def _list_of_objects(d: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RecordError(f"field '{key}': expected a list of objects")
    return value


def decode_gate_line(d: Mapping[str, Any]) -> GateLine:
    status = _gate_status(d, "status")
    return GateLine(
        task_id=req_str(d, "task_id"),
        gate=req_str(d, "gate"),
        status=status,
        result=str_or(d, "result", "pass" if status in {"pass", "skipped"} else "flagged"),
        timestamp=opt_epoch(d, "timestamp"),
        duration_ms=int_or(d, "duration_ms", 0),
        cached=bool_or(d, "cached", False),
        required=bool_or(d, "required", False),
    )


def decode_gate_result(d: Mapping[str, Any]) -> GateResult:
    return GateResult(
        name=req_str(d, "name"),
        status=_gate_status(d, "status"),
        required=bool_or(d, "required", False),
        blocked=bool_or(d, "blocked", False),
        cached=bool_or(d, "cached", False),
        duration_ms=int_or(d, "duration_ms", 0),
        details=str_or(d, "details", ""),
        digest=str_or(d, "digest", ""),
        metadata=mapping(d, "metadata"),
    )


def decode_gate_report(d: Mapping[str, Any]) -> GateReport:
    results = tuple(decode_gate_result(r) for r in _list_of_objects(d, "results"))
    overall = opt_bool(d, "overall_pass")
    return GateReport(
        task_id=req_str(d, "task_id"),
        overall_pass=not any(r.blocked for r in results) if overall is None else overall,
        total_duration_ms=int_or(d, "total_duration_ms", 0),
        results=results,
        changed_files=str_tuple(d, "changed_files"),
        cache_hits=int_or(d, "cache_hits", 0),
    )


def decode_attempt(d: Mapping[str, Any]) -> Attempt:
    return Attempt(
        model=req_str(d, "model"),
        attempt_number=int_or(d, "attempt_number", 0),
        success=bool_or(d, "success", False),
        effort=opt_str(d, "effort"),
        started_at=opt_epoch(d, "started_at"),
        cost_usd=float_or(d, "cost_usd", 0.0),
        latency_s=float_or(d, "latency_s", 0.0),
        tokens_used=int_or(d, "tokens_used", 0),
        escalated=bool_or(d, "escalated", False),
        escalation_reason=opt_str(d, "escalation_reason"),
    )


def decode_chain(d: Mapping[str, Any]) -> Chain:
    return Chain(
        chain_id=req_str(d, "chain_id"),
        task_id=req_str(d, "task_id"),
        role=str_or(d, "role", ""),
        attempts=tuple(decode_attempt(a) for a in _list_of_objects(d, "attempts")),
        final_model=opt_str(d, "final_model"),
        succeeded=bool_or(d, "succeeded", False),
        total_cost_usd=float_or(d, "total_cost_usd", 0.0),
        first_attempt_cost_usd=float_or(d, "first_attempt_cost_usd", 0.0),
        escalation_overhead_usd=float_or(d, "escalation_overhead_usd", 0.0),
        saved_vs_direct_opus_usd=float_or(d, "saved_vs_direct_opus_usd", 0.0),
        timestamp=opt_epoch(d, "timestamp"),
    )


def decode_task_metric(d: Mapping[str, Any]) -> TaskMetric:
    return TaskMetric(
        task_id=req_str(d, "task_id"),
        role=str_or(d, "role", ""),
        model=str_or(d, "model", ""),
        duration_seconds=float_or(d, "duration_seconds", 0.0),
        cost_usd=float_or(d, "cost_usd", 0.0),
        janitor_passed=opt_bool(d, "janitor_passed"),
        timestamp=opt_epoch(d, "timestamp"),
    )


REFLECTION_SOURCES = frozenset({"llm", "rules"})


def decode_reflection(d: Mapping[str, Any]) -> Reflection:
    diagnosis = mapping(d, "diagnosis")
    source = choice(d, "source", REFLECTION_SOURCES, "rules")
    return Reflection(
        task_id=req_str(d, "task_id"),
        iteration=int_or(d, "iteration", 0),
        gate=str_or(d, "gate", ""),
        error_pattern=str_or(d, "error_pattern", ""),
        what_failed=str_or(diagnosis, "what_failed", ""),
        why=str_or(diagnosis, "why", ""),
        try_next=str_or(diagnosis, "try_next", ""),
        focus=str_or(diagnosis, "focus", ""),
        source=source,
        model=opt_str(d, "model"),
        digest=str_or(d, "digest", ""),
        files_changed=str_tuple(d, "files_changed"),
        reused=bool_or(d, "reused", False),
        timestamp=opt_epoch(d, "timestamp"),
    )


def decode_review(d: Mapping[str, Any]) -> Review:
    scores = tuple(
        JudgeScore(
            judge=req_str(s, "judge"),
            dimension=req_str(s, "dimension"),
            score=float_or(s, "score", 0.0),
            reasoning=str_or(s, "reasoning", ""),
            dropped=bool_or(s, "dropped", False),
        )
        for s in _list_of_objects(d, "scores")
    )
    merged_raw = mapping(d, "merged")
    merged = {str(k): float_or(merged_raw, k, 0.0) for k in merged_raw}
    return Review(
        task_id=req_str(d, "task_id"),
        scores=scores,
        merged=MappingProxyType(merged),
        global_score=opt_float(d, "global_score"),
        threshold=float_or(d, "threshold", 3.0),
        passed=bool_or(d, "passed", False),
        timestamp=opt_epoch(d, "timestamp"),
    )


SLA_EVENTS = frozenset({"sla:warning", "sla:violated", "sla:met"})


def decode_sla_event(d: Mapping[str, Any]) -> SlaEvent:
    return SlaEvent(
        event=choice(d, "event", SLA_EVENTS),
        entity_id=req_str(d, "entity_id"),
        entity_type=str_or(d, "entity_type", "task"),
        deadline=opt_epoch(d, "deadline"),
        timestamp=opt_epoch(d, "timestamp"),
        elapsed=opt_float(d, "elapsed"),
        remaining=opt_float(d, "remaining"),
        percent_used=opt_float(d, "percent_used"),
        overdue_ms=opt_float(d, "overdue_ms"),
        margin_ms=opt_float(d, "margin_ms"),
    )


def decode_review_flag(d: Mapping[str, Any]) -> ReviewFlag:
    return ReviewFlag(
        task_id=req_str(d, "task_id"),
        source=str_or(d, "source", "review"),
        detail=str_or(d, "detail", ""),
        timestamp=opt_epoch(d, "timestamp"),
        attempt=opt_int(d, "attempt"),
        signal=str_or(d, "signal", ""),
    )


PHASE_EVENTS = frozenset({"quality:gate:passed", "quality:gate:failed", "quality:gate:released",
                          "quality:threshold:failed"})


def decode_phase_event(d: Mapping[str, Any]) -> PhaseGateEvent:
    return PhaseGateEvent(
        event=choice(d, "event", PHASE_EVENTS),
        mission_id=req_str(d, "mission_id"),
        gate_name=opt_str(d, "gate_name"),
        reason=opt_str(d, "reason"),
        avg_score=opt_float(d, "avg_score"),
        threshold=opt_float(d, "threshold"),
        timestamp=opt_epoch(d, "timestamp"),
        by=opt_str(d, "by"),
    )


EVENT_LEVELS = frozenset({"info", "warning", "error"})


def decode_engine_event(d: Mapping[str, Any]) -> EngineEvent:
    return EngineEvent(level=choice(d, "level", EVENT_LEVELS, "info"),
                       message=req_str(d, "message"),
                       timestamp=opt_epoch(d, "timestamp"), task_id=opt_str(d, "task_id"),
                       file=opt_str(d, "file"))


def decode_engine_status(d: Mapping[str, Any]) -> EngineStatus:
    return EngineStatus(pid=int_or(d, "pid", 0), workers=int_or(d, "workers", 0),
                        busy=int_or(d, "busy", 0), paused=bool_or(d, "paused", False),
                        running=bool_or(d, "running", False), base=str_or(d, "base", ""),
                        updated_at=opt_epoch(d, "updated_at"))


def encode_engine_status(status: EngineStatus) -> dict[str, Any]:
    return {"pid": status.pid, "workers": status.workers, "busy": status.busy,
            "paused": status.paused, "running": status.running, "base": status.base,
            "updated_at": status.updated_at}


def encode_engine_event(event: EngineEvent) -> dict[str, Any]:
    return {"timestamp": event.timestamp, "level": event.level, "message": event.message,
            "task_id": event.task_id, "file": event.file}


def encode_gate_result(result: GateResult) -> dict[str, Any]:
    return {"name": result.name, "status": result.status, "required": result.required,
            "blocked": result.blocked, "cached": result.cached, "duration_ms": result.duration_ms,
            "details": result.details, "digest": result.digest, "metadata": dict(result.metadata)}


def encode_gate_report(report: GateReport) -> dict[str, Any]:
    """runtime/gates/<task>.json, Bernstein's GateReport keys plus each result's digest."""
    return {
        "task_id": report.task_id, "overall_pass": report.overall_pass,
        "total_duration_ms": report.total_duration_ms,
        "gates_run": [r.name for r in report.results if r.status != "skipped"],
        "results": [encode_gate_result(r) for r in report.results],
        "changed_files": list(report.changed_files), "cache_hits": report.cache_hits,
    }


def gate_line(task_id: str, result: GateResult, timestamp: str) -> dict[str, Any]:
    """One metrics/quality_gates.jsonl line (Bernstein's keys, metadata merged at top level)."""
    line: dict[str, Any] = {
        "timestamp": timestamp, "task_id": task_id, "gate": result.name,
        "result": "blocked" if result.blocked else (
            "pass" if result.status in ("pass", "skipped", "bypassed") else "flagged"),
        "status": result.status, "duration_ms": result.duration_ms, "cached": result.cached,
        "required": result.required,
    }
    for key, value in result.metadata.items():
        line.setdefault(key, value)
    return line


class FinishedTask(msgspec.Struct, frozen=True):
    """What a finished task cost, summed over every attempt it had (all its chains)."""

    task_id: str
    role: str
    tenant_id: str
    status: str  # done | failed | cancelled
    model: str  # the model of the last attempt
    provider: str | None  # the agent adapter
    seconds: float
    tokens_in: int
    tokens_out: int
    cost_usd: float
    files_modified: int
    timestamp: float
    lines_added: int = 0  # by its merge (none when it did not merge)
    lines_deleted: int = 0

    @property
    def success(self) -> bool:
        return self.status in SUCCEEDED


def encode_task_metric(done: FinishedTask) -> dict[str, Any]:
    """One metrics/tasks.jsonl line: the keys of Bernstein's evolution collector
    (TaskMetrics.to_dict), every number a number, plus `status` and `success`, which its
    `cost` command, spend forecast and run export read from the same file. One line per
    finished task; a task run again gets a new line with its running totals (Bernstein's
    readers keep the last line per task_id)."""
    return {
        "timestamp": done.timestamp, "task_id": done.task_id, "role": done.role,
        "model": done.model, "provider": done.provider,
        "duration_seconds": round(done.seconds, 3), "tokens_prompt": done.tokens_in,
        "tokens_completion": done.tokens_out, "cost_usd": round(done.cost_usd, 6),
        "janitor_passed": done.success, "files_modified": done.files_modified,
        "lines_added": done.lines_added, "lines_deleted": done.lines_deleted,
        "status": done.status, "success": done.success,
    }


def metric_points(done: FinishedTask) -> dict[str, dict[str, Any]]:
    """Bernstein's daily metric points for a finished task (MetricsCollector, reference
    §3.3): its completion time, and its tokens when it used any; metric type → point.
    `GET /quality` reads these for its per-model success rate, time and tokens."""
    labels = {"task_id": done.task_id, "role": done.role, "model": done.model,
              "tenant_id": done.tenant_id}
    points = {"task_completion_time": {
        "timestamp": done.timestamp, "metric_type": "task_completion_time",
        "value": round(done.seconds, 3), "labels": {**labels, "success": str(done.success)}}}
    if done.tokens_in + done.tokens_out > 0:
        points["api_usage"] = {"timestamp": done.timestamp, "metric_type": "api_usage",
                               "value": float(done.tokens_in + done.tokens_out),
                               "labels": labels}
    return points


def metric_point_file(sdd: Path, metric_type: str, timestamp: float) -> Path:
    """metrics/<metric_type>_<YYYY-MM-DD>.jsonl, the local date, as Bernstein names them."""
    day = time.strftime("%Y-%m-%d", time.localtime(timestamp))
    return sdd / "metrics" / f"{metric_type}_{day}.jsonl"
