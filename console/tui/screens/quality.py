"""The quality screen: what seed 000's quality routes and Polpo's quality
metrics report, from the State — refreshed as the metrics files grow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from console.sdd.mission_view import mission_task_ids
from console.sdd.missions import Mission, load_missions
from console.sdd.paths import SddPaths
from console.sdd.project_config import ConfigError, load_config
from console.sdd.quality_metrics import quality_metrics
from console.sdd.sanitize import CELL_LIMIT, data_text, display_text
from console.sdd.source_protocol import Source
from console.tui.keys import QUALITY_KEY
from console.tui.quality import Quality, parse_budget, quality_of, sparkline
from console.tui.screens.built_view import BuiltView
from console.tui.screens.narrow import FitsNarrow


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}s"


#: tasks listed in the per-task table (the lowest scored first); all are in status --json
MAX_TASK_ROWS = 20


def _entity_table(title: str, label: str, rows: dict[str, dict[str, Any]]) -> Table:
    """Polpo's quality metrics, one row per task, agent or mission."""
    table = Table(title=title, title_justify="left", box=None, expand=True)
    for column in (label, "tasks", "assessed (passed)", "avg score (min–max)",
                   "retries", "fixes", "deadlines met / missed"):
        table.add_column(column)
    for name, m in rows.items():
        score = "–" if m["avg_score"] is None else \
            f"{m['avg_score']:.2f} ({m['min_score']:.1f}–{m['max_score']:.1f})"
        table.add_row(data_text(name, limit=CELL_LIMIT), str(m["tasks"]),
                      f"{m['total_assessments']} ({m['passed_assessments']})", score,
                      str(m["total_retries"]), str(m["total_fixes"]),
                      f"{m['deadlines_met']} / {m['deadlines_missed']}")
    if not rows:
        table.add_row("(none yet)", "", "", "", "", "", "")
    return table


def polpo_view(metrics: dict[str, dict[str, dict[str, Any]]]) -> list[RenderableType]:
    tasks = sorted(metrics["tasks"].items(),
                   key=lambda item: (item[1]["avg_score"] is None,
                                     item[1]["avg_score"] or 0.0, item[0]))[:MAX_TASK_ROWS]
    return [Text(""), _entity_table("By agent (role/model)", "agent", metrics["agents"]),
            Text(""), _entity_table("By mission", "mission", metrics["missions"]),
            Text(""), _entity_table(f"By task (lowest score first, {MAX_TASK_ROWS} at most)",
                                    "task", dict(tasks))]


def quality_view(quality: Quality, budget: float | None,
                 metrics: dict[str, dict[str, dict[str, Any]]] | None = None
                 ) -> RenderableType:
    rate = quality.success_rate
    parts: list[RenderableType] = [Text(
        f"Task success: {'–' if rate is None else f'{rate:.0%}'} "
        f"({quality.succeeded} of {quality.finished} finished)  ·  duration "
        f"p50 {_seconds(quality.durations[0])}  p90 {_seconds(quality.durations[1])}  "
        f"p99 {_seconds(quality.durations[2])} over {quality.duration_count} task(s)",
        style="bold")]
    gates = Table(title="Gates", title_justify="left", box=None, expand=True)
    for column in ("gate", "runs", "pass rate", "recent runs (oldest → newest)", "mean",
                   "cache hits"):
        gates.add_column(column)
    for row in quality.gates:
        gates.add_row(data_text(row.gate, limit=CELL_LIMIT), str(row.runs),
                      f"{row.pass_rate:.0%}", row.recent, f"{row.mean_ms:.0f} ms",
                      f"{row.cache_rate:.0%}")
    if not quality.gates:
        gates.add_row("(no gate has run yet)", "", "", "", "", "")
    parts += [Text(""), gates]
    models = Table(title="Models", title_justify="left", box=None, expand=True)
    for column in ("model", "attempts", "success", "cost"):
        models.add_column(column)
    for model in quality.models:
        models.add_row(data_text(model.model, limit=CELL_LIMIT), str(model.attempts),
                       f"{model.success_rate:.0%}", f"${model.cost_usd:.4f}")
    if not quality.models:
        models.add_row("(no chain yet)", "", "", "")
    parts += [Text(""), models, Text("")]
    trend = sparkline(quality.cost_trend)
    parts.append(Text(f"Cost trend ({quality.bucket_s}s a bar): {trend or '–'}"))
    parts.append(Text(f"Budget forecast: {quality.forecast(budget)}"))
    flagged = display_text(", ".join(f"{path} ({n})" for path, n in quality.flagged_files))
    parts.append(Text(f"Files most often flagged by failing gates: {flagged or 'none'}"))
    if metrics is not None:
        parts += polpo_view(metrics)
    return Group(*parts)


class QualityScreen(FitsNarrow, BuiltView, Screen[None]):
    AUTO_FOCUS = "*"  # its content, from the first key
    SECTIONS: ClassVar[frozenset[str]] = frozenset(
        {"gates", "chains", "metrics", "archive", "tasks", "reviews", "sla"})
    BINDINGS = [Binding(f"escape,q,{QUALITY_KEY}", "app.pop_screen", "Back")]

    def __init__(self, source: Source, clock: Callable[[], float]) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.budget: float | None = None
        self.missions: list[Mission] = []

    def compose(self) -> ComposeResult:
        yield Static("Quality — task success, gates, durations, models, cost; assessments "
                     "by agent, mission and task",
                     classes="screen-title", markup=False)
        with VerticalScroll(id="quality-body"):
            yield Static(id="quality")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_rows()
        self.run_worker(self._read_budget, thread=True, exit_on_error=False)

    def _read_budget(self) -> None:
        """bernstein.yaml is a file: read in a thread (a task server has none here)."""
        root = self.source.root
        if root is None:
            return
        try:
            raw = load_config(root).raw
            budget = parse_budget(raw.get("budget"))
            missions, _problems = load_missions(SddPaths(root), raw.get("missions"))
        except ConfigError:
            budget, missions = None, []
        self.app.call_from_thread(self._set_config, budget, missions)

    def _set_config(self, budget: float | None, missions: list[Mission]) -> None:
        self.budget = budget
        self.missions = missions
        self.refresh_rows()

    def build_view(self) -> RenderableType:
        """In a worker thread: every figure is recomputed from the State (with 10,000
        tasks and their gate runs, far too slow for the event loop on each batch)."""
        with self.source.lock:
            state = self.source.state
            quality = quality_of(state)
            metrics = quality_metrics(state, mission_task_ids(self.missions, state))
        return quality_view(quality, self.budget, metrics)

    def show_view(self, view: RenderableType) -> None:
        self.query_one("#quality", Static).update(view)
