"""Missions and their phase gates (issue #20.5, seed 003): one row per gate — waiting,
passed, failed (its mission halted) or released (by whom, why) — under a line per
mission (halted by which gate, tasks done, threshold). `a` releases the selected gate
(a held or a failed one) after asking why; the release is recorded. Enter goes to the
first task the gate holds.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.binding import Binding
from textual.widgets import DataTable, Static

from console.sdd.missions import Mission
from console.sdd.sanitize import CELL_LIMIT, data_text, display_text
from console.sdd.source_protocol import Source
from console.tui.messages import OperatorRequest, ShowTask
from console.tui.screens.table_screen import TableScreen
from console.tui.widgets.list_table import Row, sync_rows

GLYPHS = {"waiting": "… waiting", "passed": "✓ passed", "failed": "✗ failed (halted)",
          "released": "⇥ released"}
COLUMNS = (("mission", "Mission"), ("gate", "Gate"), ("status", "Status"),
           ("after", "After"), ("blocks", "Blocks"), ("why", "Why / score / by"))


def load_view(source: Source) -> tuple[list[dict[str, Any]], list[str]]:
    """In a worker thread: the missions (definitions from the project's config) and
    what could not be read of them."""
    from console.sdd.mission_view import missions_view
    from console.sdd.missions import load_missions
    from console.sdd.paths import SddPaths
    from console.sdd.project_config import ConfigError, load_config

    root = source.root
    problems: list[str] = []
    missions: list[Mission] = []
    if root is not None:
        try:
            missions, problems = load_missions(SddPaths(root),
                                               load_config(root).raw.get("missions"))
        except ConfigError as exc:
            problems = [str(exc)]
    with source.lock:
        return missions_view(missions, source.state), problems


def gate_rows(missions: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    rows = []
    for mission in missions:
        for gate in mission["gates"] or [{"name": "", "status": "", "after": [],
                                          "blocks": [], "reason": None}]:
            why = gate.get("reason") or ""
            if gate.get("avg_score") is not None:
                why = f"avg {gate['avg_score']}" + (f" · {why}" if why else "")
            if gate.get("by"):
                why += f" · by {gate['by']}"
            rows.append((f"{mission['id']}\x00{gate['name']}", [
                mission["id"], gate["name"] or "—", GLYPHS.get(gate["status"], "—"),
                ", ".join(gate["after"]), ", ".join(gate["blocks"]), why]))
    return rows


def missions_line(missions: list[dict[str, Any]], problems: list[str]) -> str:
    if not missions:
        text = "No missions (bernstein.yaml `missions:` or .sdd/missions/*.yaml)."
    else:
        text = "   ".join(
            f"{m['id']}: {m['state']}" + (f" by {m['halted_by']}" if m["halted_by"] else "")
            + f", {m['done']}/{m['total']} done"
            + (f", threshold {m['threshold']}" if m["threshold"] is not None else "")
            + (" ✗ below" if m["threshold_failed"] else "") for m in missions)
    if problems:
        text += f"\n⚠ {problems[0]}" + (f" (+{len(problems) - 1} more)"
                                       if len(problems) > 1 else "")
    return text


class MissionsScreen(TableScreen):
    TITLE_ID, TABLE_ID = "missions-line", "missions-table"
    COLUMNS = COLUMNS
    SECTIONS: ClassVar[frozenset[str]] = frozenset({"phase_gates", "tasks"})
    BINDINGS = [Binding("escape,q,m", "app.pop_screen", "Back"),
                Binding("a", "release", "Release gate")]

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source
        self.missions: list[dict[str, Any]] = []

    def build_view(self) -> tuple[list[dict[str, Any]], list[str]]:
        return load_view(self.source)

    def show_view(self, view: tuple[list[dict[str, Any]], list[str]]) -> None:
        self.missions, problems = view
        self.query_one("#missions-line", Static).update(
            display_text(missions_line(self.missions, problems), multiline=True))
        rows: list[Row] = [(key, [data_text(v, limit=CELL_LIMIT) for v in cells])
                           for key, cells in gate_rows(self.missions)]
        sync_rows(self.query_one(DataTable), rows)

    def _selected(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        mission_id, _, gate_name = key.partition("\x00")
        mission = next((m for m in self.missions if m["id"] == mission_id), None)
        gate = next((g for g in mission["gates"] if g["name"] == gate_name), None) \
            if mission else None
        return (mission, gate) if mission is not None and gate is not None else None

    def action_release(self) -> None:
        """`a`: release the selected gate — refused at once when nothing is held."""
        chosen = self._selected()
        if chosen is None:
            self.notify("release: select a gate first", severity="warning")
            return
        mission, gate = chosen
        if gate["status"] in ("passed", "released"):
            self.notify(f"release refused: phase gate {gate['name']} is already "
                        f"{gate['status']}; nothing is held", severity="warning", markup=False)
            return
        from console.tui.screens.proposals import ReasonScreen

        mission_id, gate_name = mission["id"], gate["name"]

        def answered(reason: str | None) -> None:
            if reason:
                self.post_message(OperatorRequest("release-gate", lambda control: (
                    control.release_gate(mission_id, gate_name, reason))))

        self.app.push_screen(ReasonScreen(
            f"Release phase gate {gate_name} of mission {mission_id} ({gate['status']})? "
            "Its held tasks run. Why?", verb="Release"), answered)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter: the first task the gate holds (or its mission's first task)."""
        chosen = self._selected()
        if chosen is None:
            return
        mission, gate = chosen
        ids = {t["ref"]: t["id"] for t in mission["tasks"]}
        for ref in (*gate.get("blocks", ()), *ids):
            task_id = ids.get(ref) or (ref if ref in ids.values() else None)
            if task_id:
                self.post_message(ShowTask(task_id))
                return
