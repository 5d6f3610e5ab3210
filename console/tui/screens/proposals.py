"""Evolution proposals: pending and decided, the diff, approve (confirmed) and reject
(with a reason), through the Control interface."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Static

from console.sdd.sanitize import CELL_LIMIT, data_text, display_text
from console.sdd.source_protocol import Source
from console.sdd.state import State
from console.tui.messages import OperatorRequest
from console.tui.screens.built_view import BuiltView
from console.tui.screens.narrow import FitsNarrow
from console.tui.widgets.approval_line import ApprovalLine
from console.tui.widgets.list_table import ListTable, Row, sync_rows


def proposal_rows(state: State) -> list[tuple[str, ...]]:
    pending = set(state.pending_proposals())
    rows: list[tuple[str, ...]] = []
    for pid in sorted(set(state.proposals) | set(state.decisions)):
        proposal = state.proposals.get(pid)
        last = state.decisions[pid][-1] if state.decisions.get(pid) else None
        outcome = last.shown_outcome if last else ""
        rows.append((pid, "! pending" if pid in pending else "✓ decided",
                     (proposal.risk_level if proposal and proposal.risk_level else
                      last.risk_level if last else "") or "",
                     f"{(proposal.confidence if proposal else last.confidence if last else 0):.2f}",
                     proposal.title if proposal else "", outcome))
    return rows


def proposal_detail(state: State, pid: str) -> Group:
    proposal = state.proposals.get(pid)
    decisions = state.decisions.get(pid, [])
    parts: list = []
    if proposal is not None:
        parts.append(data_text(proposal.title, "bold"))
        risk = proposal.risk_level or (decisions[-1].risk_level if decisions else "?")
        parts.append(data_text(f"{proposal.category} · risk {risk} · "
                               f"confidence {proposal.confidence:.2f} · targets "
                               f"{', '.join(proposal.target_files) or '(none)'}"))
        parts.append(data_text(proposal.description, multiline=True))
        if proposal.diff:
            parts.append(Syntax(display_text(proposal.diff, multiline=True), "diff",
                                theme="ansi_dark", word_wrap=True))
        else:
            parts.append(Text("(no diff: a proposal a real Bernstein deferred; approving "
                              "records the decision only)", style="italic"))
    for decision in decisions:
        who = f" by {decision.reviewer}" if decision.reviewer else ""
        parts.append(data_text(f"{decision.outcome}{who}: {decision.reason}", multiline=True))
    return Group(*parts) if parts else Group(Text("Select a proposal.", style="italic"))


class ReasonScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, question: str, verb: str = "Reject") -> None:
        super().__init__()
        self.question = question
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(display_text(self.question, multiline=True), id="confirm-question",
                         markup=False)
            yield Input(placeholder="the reason (required)", id="reason")
            yield Button(self.verb, id="reject", variant="warning")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self._done()

    def _done(self) -> None:
        reason = self.query_one(Input).value.strip()
        if reason:
            self.dismiss(reason)
        else:
            self.notify(f"{self.verb.lower()}: a reason is needed (it is recorded)",
                        severity="warning")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class ProposalsScreen(FitsNarrow, BuiltView, Screen[None]):
    AUTO_FOCUS = "#proposals-table"  # its content, from the first key
    SECTIONS: ClassVar[frozenset[str]] = frozenset({"proposals"})
    BINDINGS = [Binding("escape,q,P", "back", "Back"),
                Binding("a", "approve", "Approve"), Binding("d", "reject", "Decline")]

    def __init__(self, source: Source, read_only: bool, selected: str | None = None) -> None:
        super().__init__()
        self.source = source  # read under its lock: the watcher thread writes the State
        self.read_only = read_only
        self.selected: str | None = selected

    def compose(self) -> ComposeResult:
        yield Static("Evolution proposals — a: approve (sandbox, tests, merge) · d: decline "
                     "(reject, with a reason) · enter: the diff",
                     classes="screen-title", markup=False)
        yield ListTable(id="proposals-table", cursor_type="row")
        yield ApprovalLine(id="approval-line")
        with VerticalScroll(id="proposal-detail"):
            yield Static(id="proposal-body")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in (("id", "ID"), ("state", "State"), ("risk", "Risk"),
                           ("confidence", "Conf."), ("title", "Title"), ("last", "Decision")):
            table.add_column(label, key=key)
        self.refresh_rows()

    def build_view(self) -> tuple[list[Row], str | None, Group]:
        """In a worker thread: the rows, which proposal is selected, and its detail (a
        diff made into a Syntax)."""
        selected = self.selected
        with self.source.lock:
            rows = proposal_rows(self.source.state)
            if selected is None and rows:
                selected = rows[0][0]
            detail = proposal_detail(self.source.state, selected or "")
        cells: list[Row] = [(row[0], [data_text(v, limit=CELL_LIMIT) for v in row])
                            for row in rows]
        return cells, selected, detail

    def show_view(self, view: tuple[list[Row], str | None, Group]) -> None:
        rows, selected, detail = view
        table = self.query_one(DataTable)
        sync_rows(table, rows)
        if self.selected is None:
            self.selected = selected
        if self.selected is not None and self.selected in table.rows:
            index = table.get_row_index(self.selected)
            if index != table.cursor_row:
                table.move_cursor(row=index)
        if selected == self.selected:  # else a newer build, for the new one, is coming
            self.query_one("#proposal-body", Static).update(detail)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is not None and key != self.selected:
            self.selected = str(key)
            self.refresh_rows()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a proposal: into its diff (↑ ↓ PgUp PgDn scroll it, escape: back)."""
        self.query_one("#proposal-detail", VerticalScroll).focus()

    def action_back(self) -> None:
        detail = self.query_one("#proposal-detail", VerticalScroll)
        if detail.has_focus:
            self.query_one(DataTable).focus()
        else:
            self.app.pop_screen()

    def _allowed(self, verb: str) -> str | None:
        if self.read_only:
            self.notify(f"{verb} refused: the console is read-only", severity="warning")
            return None
        if self.selected is None:
            self.notify(f"{verb}: select a proposal first", severity="warning")
        return self.selected

    def _decided(self, verb: str, pid: str) -> bool:
        """A decided proposal is refused at once (#19.7), before any question."""
        with self.source.lock:
            pending = pid in self.source.state.pending_proposals()
        if not pending:
            self.notify(f"{verb} refused: proposal {pid} is already decided", severity="warning")
        return not pending

    def action_approve(self) -> None:
        from console.tui.screens.confirm import ConfirmScreen

        pid = self._allowed("approve")
        if pid is None or self._decided("approve", pid):
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(OperatorRequest("approve", lambda control: control.approve(
                    pid, "approved from the console")))
                self.query_one(ApprovalLine).start(self.source.root, pid)

        self.app.push_screen(ConfirmScreen(
            f"Approve {pid}?", "Its diff is applied in a sandbox worktree; the tests, eval "
                               "suite and benchmark run there; it merges into the base branch "
                               "only if they pass."), answered)

    def action_reject(self) -> None:
        pid = self._allowed("reject")
        if pid is None or self._decided("reject", pid):
            return

        def answered(reason: str | None) -> None:
            if reason:
                self.post_message(OperatorRequest("reject", lambda control: control.reject(
                    pid, reason)))

        self.app.push_screen(ReasonScreen(f"Reject {pid}: why?"), answered)
