"""`bernstein-tui gates`: a gate report as a rich table plus the digests (tool output:
data, shown through the sanitiser)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from console.model import GateReport, gate_label
from console.sdd.sanitize import data_text


def print_report(report: GateReport, console: Console | None = None) -> None:
    out = console or Console()
    table = Table(title_justify="left")
    for column in ("gate", "status", "required", "cached", "ms", "details"):
        table.add_column(column, justify="right" if column == "ms" else "left")
    for result in report.results:
        style = "bold" if result.blocked or (result.required and result.status == "skipped") \
            else ""
        table.add_row(data_text(result.name), data_text(gate_label(result.status), style),
                      "yes" if result.required else "no", "yes" if result.cached else "",
                      str(result.duration_ms), data_text(result.details, multiline=True))
    out.print(table)
    for result in report.results:
        if result.digest:
            out.print(data_text(f"── {result.name}", "bold"))
            out.print(data_text(result.digest, multiline=True))
    ran = sorted({str(r.metadata["ran_with"]) for r in report.results
                  if r.metadata.get("ran_with")})
    if ran:  # which interpreter ran the tools: the project's .venv, uv, or PATH
        out.print(data_text("tools ran with: " + " | ".join(ran)))
    verdict = "PASS: no required gate blocks" if report.overall_pass else \
        "BLOCKED by " + ", ".join(r.name for r in report.results if r.blocked)
    out.print(data_text(f"{verdict}  ·  {len(report.changed_files)} changed file(s)  ·  "
                        f"{report.cache_hits} cached  ·  {report.total_duration_ms} ms", "bold"))
