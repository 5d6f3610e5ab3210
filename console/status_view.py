"""`bernstein-tui status` without --json: the summary as rich tables.

Every name in it (states, gates, ids, files, reasons) is data: shown through the
sanitiser as `Text` or with markup off, never as markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from console.model import state_label
from console.sdd.sanitize import CELL_LIMIT, data_text, display_text

MAX_PROBLEMS_SHOWN = 40


def print_status(summary: dict[str, Any], where: str, console: Console | None = None) -> None:
    out = console or Console()
    tasks = summary["tasks"]
    out.print(data_text(f"Tasks in {where}: {tasks['total']}", "bold"))
    table = Table()
    table.add_column("state")
    table.add_column("count", justify="right")
    for status, count in tasks["by_state"].items():
        table.add_row(data_text(state_label(status), limit=CELL_LIMIT), str(count))
    out.print(table)

    gates = summary["gates"]["by_gate"]
    if gates:
        statuses = sorted({s for counts in gates.values() for s in counts})
        out.print(Text("Quality gates (runs per status)", style="bold"))
        gate_table = Table()
        gate_table.add_column("gate")
        for status in statuses:
            gate_table.add_column(data_text(status, limit=CELL_LIMIT), justify="right")
        for gate, counts in gates.items():
            gate_table.add_row(data_text(gate, limit=CELL_LIMIT),
                               *(str(counts.get(s, 0)) for s in statuses))
        out.print(gate_table)

    chains, sla, props = summary["chains"], summary["sla"], summary["proposals"]
    out.print(
        f"chains {chains['total']} (escalated {chains['escalated']})  ·  "
        f"reflections {summary['reflections']['total']}  ·  reviews {summary['reviews']['total']}"
        f"  ·  archive {summary['archive']['total']}  ·  backlog open {summary['backlog']['open']}"
    )
    out.print(f"SLA: ⚠ warning {sla['warning']}  ✗ violated {sla['violated']}  ✓ met {sla['met']}")
    pending = display_text(", ".join(props["pending_ids"]) or "none")
    out.print(f"proposals pending a human decision: {props['pending']} ({pending})",
              markup=False, highlight=False)

    problems = summary["problems"]
    if not problems:
        out.print("problems: none")
        return
    out.print(f"[bold]problems: {len(problems)} record(s) could not be read[/bold]")
    for item in problems[:MAX_PROBLEMS_SHOWN]:
        where_at = item["file"] if item["line"] is None else f"{item['file']}:{item['line']}"
        out.print(display_text(f"  {where_at}: {item['reason']}"), markup=False,
                  highlight=False)
    if len(problems) > MAX_PROBLEMS_SHOWN:
        out.print(f"  … and {len(problems) - MAX_PROBLEMS_SHOWN} more (see status --json)")
