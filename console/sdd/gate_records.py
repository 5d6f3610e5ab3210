"""The one writer of gate records: metrics/quality_gates.jsonl and runtime/gates/<task>.json."""

from __future__ import annotations

import datetime as dt
import re

from console.model import GateReport
from console.sdd.fileio import append_jsonl, atomic_write_json
from console.sdd.metric_codec import encode_gate_report, gate_line
from console.sdd.paths import Kind, SddPaths

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def write_gate_run(paths: SddPaths, report: GateReport) -> None:
    stamp = dt.datetime.now(dt.UTC).isoformat()
    append_jsonl(paths.of(Kind.GATE_LINES),
                 [gate_line(report.task_id, result, stamp) for result in report.results])
    atomic_write_json(paths.gates_dir / f"{_UNSAFE.sub('_', report.task_id)}.json",
                      encode_gate_report(report))
