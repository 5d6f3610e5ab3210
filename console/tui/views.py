"""The console's views of its data (DESIGN §5): the `/` filter, the quick filters and
going to a task (`FilterActions`, a mixin of the main screen: they act on its table),
the further screens (`ScreenActions`, a mixin of the app: proposals, chains, quality,
help, problems open from anywhere), and what an empty project shows.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Input

from console.sdd.sanitize import display_text
from console.tui.history import Session
from console.tui.task_rows import COLUMNS, QUICK_FILTERS, FilterError, parse_filter
from console.tui.widgets.lines import Lines
from console.tui.widgets.task_table import TaskTable

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    _Screen = Screen[None]
    _App = App[int]
else:
    _Screen = _App = object


def as_typed(root: Path) -> Path:
    """The project as the operator would type it where the console was started: relative
    to the working directory when inside it (`.` for itself), else absolute."""
    try:
        return root.relative_to(Path.cwd())
    except (ValueError, OSError):  # elsewhere, or the working directory is gone
        return root


def empty_text(root: Path, exists: bool) -> str:
    where = display_text(as_typed(root))  # a directory's name is data too
    if exists:
        return (
            f"No tasks yet in {where}/.sdd\n\n"
            "Tasks appear here as soon as anything writes them. To give the engine work,\n"
            "drop a ticket into .sdd/backlog/open/, for example hello.yaml:\n\n"
            "  title: Write hello.txt\n"
            "  completion_signals:\n"
            "    - {type: path_exists, path: hello.txt}\n\n"
            "and configure an agent in bernstein.yaml (agents.script.command), or run\n"
            "Bernstein itself here."
        )
    return (
        f"No .sdd/ directory in {where}\n\n"
        "This console shows what an orchestrator writes there. To start:\n\n"
        f"  bernstein-tui -C {where} init      create .sdd/ and a commented bernstein.yaml\n"
        "  bernstein run                   or run Bernstein itself in this directory\n\n"
        "The console is watching: it fills in as soon as .sdd/ appears."
    )


#: typing into the filter applies it this long after the last key (a view over many
#: rows is computed in a thread: the box keeps up with the keys)
FILTER_DEBOUNCE_S = 0.08


class FilterInput(Input):
    """The `/` box. Keys reach it in the order typed, but the app routes each key to the
    widget focused when it takes the key, so keys typed right after Enter are already
    queued here when Enter closes the box: Enter and Escape act as the box takes them,
    and a key that arrives once it is closed is handed on (not typed in), to act as
    typed after the box closed — on the table, with its bindings."""

    def on_key(self, event: events.Key) -> None:
        screen = self.screen
        if not isinstance(screen, FilterActions):
            return
        if not self.display or not self.has_focus:  # closed: a key meant for what follows
            event.prevent_default()  # not typed in; it bubbles to the app's bindings
            return
        if event.key in ("enter", "escape"):
            event.prevent_default()
            event.stop()
            if event.key == "enter":
                screen.commit_filter(self.value)
            else:
                screen.action_clear_filter()


class FilterActions(_Screen):
    selected: str | None
    source: Any
    filter_text: str
    filter_error = ""  # why the text in the filter box means nothing (kept until fixed)
    filter_tried = ""  # the text last applied, meaningful or not
    _typed_timer: Timer | None = None

    # -- filter and sort -----------------------------------------------------------

    def show_view_line(self) -> None:
        """The line over the table: the filter, how many tasks it shows, the sort; or
        what is wrong with the filter being typed (a later redraw keeps saying it)."""
        error = self.filter_error
        table = self.query_one(TaskTable)
        sort = "task log order"
        if table.sort_key is not None:
            label = next(c.label for c in COLUMNS if c.key == table.sort_key)
            sort = f"{label} {'▼' if table.reverse else '▲'}"
        shown = (f"{table.row_count} of {len(table.rows)} tasks" if table.predicate
                 else f"all {len(table.rows)} tasks")
        what = f"filter: {self.filter_text}  ·  " if self.filter_text else ""
        keys = "(/ 0-8 s)" if self.has_class("-narrow") else \
            "(/ filter · 0-8 quick filters · s sort)"
        text = f"{what}{shown}  ·  sort: {sort}   {keys}"
        if error:
            text = f"✗ {error}  ·  {shown}"
        line = self.query_one("#view-line", Lines)
        line.show_lines(display_text(text))  # the filter may be pasted
        line.set_class(bool(error), "-error")

    @staticmethod
    def filter_box() -> FilterInput:
        """Composed hidden with the screen: `/` only shows and focuses it, at once."""
        box = FilterInput(placeholder="filter: words, state:failed role:qa model:opus p:1 "
                                      "sla:risk gates:fail, -state:done (Enter: keep, Esc: "
                                      "clear)", id="filter")
        box.display = False
        return box

    def action_filter(self) -> None:
        """`/` (a priority key: the box has the focus before the next key is routed)."""
        box = self.query_one("#filter", FilterInput)
        if box.has_focus:  # a `/` typed into the filter is part of it
            box.insert_text_at_cursor("/")
            return
        box.display = True
        box.value = self.filter_text
        self.set_focus(box)  # now (focus() is queued): the next keys are the filter's

    def apply_filter(self, text: str, *, off_loop: bool = False) -> bool:
        """Filter the table; a term that means nothing is said, and the view kept.
        `off_loop`: a large view is computed in a thread (typing)."""
        if self._typed_timer is not None:  # what was typed is superseded
            self._typed_timer.stop()
            self._typed_timer = None
        table = self.query_one(TaskTable)
        self.filter_tried = text.strip()
        try:
            predicate = parse_filter(text)
        except FilterError as exc:
            self.filter_error = str(exc)
            self.show_view_line()
            return False
        self.filter_text = text.strip()
        self.filter_error = ""
        table.set_view(predicate, table.sort_key, table.reverse, off_loop=off_loop)
        self.show_view_line()
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        """Keys into the filter: applied once typing pauses, the view built off the loop."""
        if event.input.id != "filter" or not event.input.display:
            return  # a change that arrives after Esc or Enter closed the box is no typing
        if self._typed_timer is not None:
            self._typed_timer.stop()
        value = event.value
        self._typed_timer = self.set_timer(
            FILTER_DEBOUNCE_S, lambda: self.apply_filter(value, off_loop=True))

    def commit_filter(self, text: str) -> None:
        """Enter in the filter: applied now, the box closed, the table focused."""
        if self.apply_filter(text):
            self._close_filter()

    def _close_filter(self) -> None:
        with contextlib.suppress(NoMatches):
            self.query_one("#filter").display = False
        table = self.query_one(TaskTable)
        self.set_focus(table)  # at once, like the filter box's: no queued focus
        # left to land after a quick `/` has focused the box again

    def action_clear_filter(self) -> None:
        box = self.query_one_optional("#filter")
        if self._typed_timer is not None:
            self._typed_timer.stop()
            self._typed_timer = None
        if (box is not None and box.display) or self.filter_text:
            self.apply_filter("")
            self._close_filter()

    def action_quick_filter(self, key: str) -> None:
        for number, _label, query in QUICK_FILTERS:
            if number == key:
                self.apply_filter(query)

    # -- going to a task --------------------------------------------------------------

    def go_to_task(self, task_id: str) -> None:
        """Select a task; a filter that hides it is cleared first."""
        table = self.query_one(TaskTable)
        if not table.move_to(task_id) and task_id in table.rows:
            self.apply_filter("")
            table.move_to(task_id)
        table.focus()

    def action_blocking_dependency(self) -> None:
        """Select the dependency the selected task waits on (the one its Summary names)."""
        from console.tui.summary_render import blocking_dependency

        with self.source.lock:
            task = self.source.state.tasks.get(self.selected) if self.selected else None
            target = blocking_dependency(self.source.state, task) if task else None
            known = target is not None and target in self.source.state.tasks
        if task is None:
            self.notify("select a task first", severity="warning")
        elif target is None:
            self.notify(f"task {display_text(task.id)} waits on no dependency",
                        markup=False)
        elif not known:
            self.notify(f"dependency {display_text(target)} is not known here",
                        severity="warning", markup=False)
        else:
            self.go_to_task(target)


class ScreenActions(_App):
    read_only: bool
    source: Any
    clock: Any
    history: Session

    def open_proposal(self, proposal_id: str, then: str | None = None) -> None:
        from console.tui.screens.proposals import ProposalsScreen

        screen = ProposalsScreen(self.source, self.read_only, selected=proposal_id)
        self.push_screen(screen)
        if then is not None:
            self.call_after_refresh(screen.run_action, then)

    def action_proposals(self) -> None:
        from console.tui.screens.proposals import ProposalsScreen

        self.push_screen(ProposalsScreen(self.source, self.read_only))

    def action_chains(self) -> None:
        from console.tui.screens.chains import ChainsScreen

        self.push_screen(ChainsScreen(self.source))

    def action_missions(self) -> None:
        from console.tui.screens.missions import MissionsScreen

        self.push_screen(MissionsScreen(self.source))

    def action_review_queue(self) -> None:
        from console.tui.screens.review_queue import ReviewQueueScreen

        self.push_screen(ReviewQueueScreen(self.source))

    def action_quality(self) -> None:
        from console.tui.screens.quality import QualityScreen

        self.push_screen(QualityScreen(self.source, self.clock))

    def action_help(self) -> None:
        from console.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.read_only))

    def action_history(self) -> None:
        from console.tui.screens.history import HistoryScreen

        self.push_screen(HistoryScreen(self.source, self.history))

    def action_problems(self) -> None:
        from console.tui.screens.problems import ProblemsScreen

        with self.source.lock:
            problems = self.source.state.problems
        self.push_screen(ProblemsScreen(problems))
