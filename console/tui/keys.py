"""Every key of the console, grouped, in one table: the bindings and the help screen
are both made from it, so they cannot disagree.

A key is bound where its target is shown: the task and view keys on the main screen
(they act on its table and selection, never on a table hidden under another screen),
the engine, screen and app keys on the app (they work everywhere). Every list moves
with ↑ ↓ / j k and Home End / g G, and Enter opens its row. No key whose action is
destructive has a shifted twin that opens a view (so Quality is M, not Q next to q)."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from console.tui.task_rows import QUICK_FILTERS

#: the key that selects the dependency a task waits on (its Summary tab names it)
BLOCKER_KEY = "d"
#: the quality screen's key (and its way back): never Q, one shift from q (quit)
QUALITY_KEY = "M"

#: (group, key(s), action, footer label, description, shown in the footer)
MAIN_KEYS: tuple[tuple[str, str, str, str, str, bool], ...] = (
    ("Tasks", "enter", "open_task", "Open",
     "Open the selected task: its tabs at full height (enter or escape: back)", False),
    ("Tasks", "r", "retry", "Retry", "Retry the selected task (a failed one opens again)",
     True),
    ("Tasks", "e", "escalate", "Escalate",
     "Escalate: next attempt on the next model tier (confirm)", True),
    ("Tasks", "x", "cancel_task", "Cancel", "Cancel the task and its subtasks (confirm)", True),
    ("Tasks", BLOCKER_KEY, "blocking_dependency", "Blocker",
     "Jump to the dependency holding the selected task back (its Summary names it)", False),
    ("Tasks", "c", "app.copy('id')", "Copy id", "Copy the task id (OSC 52; also shown)", False),
    ("Tasks", "w", "app.copy('worktree')", "Copy worktree",
     "Copy the running attempt's worktree path", False),
    ("Engine", "z", "pause", "Pause/resume", "Pause the engine / resume it", False),
    ("Engine", "t", "trust", "Trust", "Trust this project: its agents, gates and commands "
     "may run (confirm)", False),
    ("View", "slash", "filter", "Filter",
     "Filter: words, state:, role:, model:, p:, sla:, gates:, -term", True),
    ("View", "escape", "back", "Back", "Leave the opened task; else clear the filter", False),
    *(("View", number, f"quick_filter('{number}')", label, f"Quick filter: {label}", False)
      for number, label, _query in QUICK_FILTERS),
    ("Screens", "P", "proposals", "Proposals", "Evolution proposals: diff, approve, reject",
     True),
    ("Screens", "C", "chains", "Chains", "Cascade chains: escalation rate, savings", False),
    ("Screens", QUALITY_KEY, "quality", "Quality",
     "Quality: success, gates, durations, models, cost", True),
    ("Screens", "p", "problems", "Problems", "Records that could not be read", False),
    ("Screens", "m", "missions", "Missions", "Missions and their phase gates: waiting, "
     "passed, failed (mission halted), released; a releases the selected gate", False),
    ("Screens", "V", "review_queue", "Review queue", "Review queue: work that passed but "
     "that a check (a judge below 0.7 confidence) wants a human to look at", False),
    ("Screens", "L", "history", "History", "Event history: engine events, actions and their "
     "outcomes, SLA, gate blocks, proposals, notifications (newest first, / filters)", False),
    ("Screens", "question_mark,f1", "help", "Help", "This help", True),
    ("App", "ctrl+p", "command_palette", "Palette",
     "Command palette: tasks, proposals, actions", False),
    ("App", "q", "quit", "Quit", "Quit; while agents run, asks: stop the engine, detach "
     "(it keeps running in the background) or cancel", True),
)

#: keys handled inside widgets and screens, listed on the help screen only
OTHER_KEYS: tuple[tuple[str, str, str], ...] = (
    ("Any list", "↑ ↓ j k", "Move the cursor (in the task table the detail follows)"),
    ("Any list", "PgUp PgDn Home End g G", "A page up / down, the first / last row"),
    ("Table", "s / S", "Sort by the next column / reverse (or click a header)"),
    ("Detail", "tab, ← →", "Move focus to the tabs and switch tab"),
    ("Proposals", "a / d", "Approve (confirm) / decline: reject, with a reason"),
    ("Proposals", "enter", "Into the diff (↑ ↓ scroll it; escape: back)"),
    ("Missions", "a / enter", "Release the selected gate (with a reason) / go to its task"),
    ("Chains", "enter", "Go to the chain's task"),
    ("Review queue", "enter", "Go to the flagged task"),
    ("Any screen", "escape", "Back"),
    ("App", "ctrl+c ctrl+c", "Twice within 2 s: stop the engine and quit at once"),
)

#: the groups bound on the main screen; the others are the app's
SCREEN_GROUPS = frozenset({"Tasks", "View"})

#: keys carried out while the app routes them (before the next key is): `/` focuses
#: the filter box, so the keys typed right after it are the filter's, never actions
PRIORITY_KEYS = frozenset({"slash"})

MAIN_BINDINGS: list[BindingType] = [Binding(key, action, label, show=shown,
                                           priority=key in PRIORITY_KEYS)
                                   for group, key, action, label, _description, shown in MAIN_KEYS
                 if group in SCREEN_GROUPS]
APP_BINDINGS: list[BindingType] = [Binding(key, action, label, show=shown)
                for group, key, action, label, _description, shown in MAIN_KEYS
                if group not in SCREEN_GROUPS]


def key_label(key: str) -> str:
    return {"slash": "/", "question_mark": "?", "question_mark,f1": "? F1"}.get(key, key)
