"""The command palette (ctrl+p): tasks, proposals and actions by name.

Every entry runs the same action as its key, so the palette, the keys and the
CLI reach one Control interface. Ids, titles and states are data: an entry is display
text and never goes through markup (the palette parses a plain string as markup).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.model import TaskState
from console.sdd.sanitize import CELL_LIMIT, display_text
from console.tui.keys import MAIN_KEYS, SCREEN_GROUPS

if TYPE_CHECKING:
    from console.tui.app import ConsoleApp

#: tasks searched per keystroke; the palette stays quick at 10,000 tasks
MAX_TASK_HITS = 2_000


class ConsoleCommands(Provider):
    @property
    def console(self) -> ConsoleApp:
        return cast("ConsoleApp", self.app)

    def _entries(self) -> list[tuple[str, Callable[[], object], str]]:
        app = self.console
        entries: list[tuple[str, Callable[[], object], str]] = []
        for group, _key, action, _label, description, _shown in MAIN_KEYS:
            if action in ("command_palette", "help") or action.startswith("quick_filter"):
                continue
            # a task key acts on the main screen, whichever screen the palette opened on
            where = app.main if group in SCREEN_GROUPS else app
            entries.append((description.split(" (")[0],
                            partial(app.run_action, action, where), f"key {_key}"))
        with app.source.lock:
            state = app.source.state
            proposals = list(state.pending_proposals())
            titles = {pid: state.proposals[pid].title for pid in proposals
                      if pid in state.proposals}
            tasks = [(t.id, t.title, t.status) for t in list(state.tasks.values())[
                -MAX_TASK_HITS:]]
        for pid in proposals:
            title = display_text(titles.get(pid, ""), limit=CELL_LIMIT)
            pid_text = display_text(pid, limit=CELL_LIMIT)
            entries.append((f"Approve proposal {pid_text} {title}",
                            partial(app.open_proposal, pid, "approve"), "pending proposal"))
            entries.append((f"Reject proposal {pid_text} {title}",
                            partial(app.open_proposal, pid, "reject"), "pending proposal"))
        for task_id, title, status in tasks:
            shown = (f"{display_text(task_id, limit=CELL_LIMIT)} "
                     f"{display_text(title, limit=CELL_LIMIT)}")
            # the help line is always parsed as markup: only a known state's name goes in
            entries.append((f"Task {shown}", partial(app.main.go_to_task, task_id),
                            status if TaskState.parse(status) else "task (unknown state)"))
            if status == "failed":
                entries.append((f"Retry task {shown}",
                                partial(app.main.action_retry, task_id), "failed task"))
        return entries

    async def discover(self) -> Hits:
        for name, run, help_text in self._entries()[:40]:
            yield DiscoveryHit(Text(name), run, text=name, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, run, help_text in self._entries():
            score = matcher.match(name)
            if score > 0:
                # highlight() parses its argument as markup: only a name with no `[` in it
                # is the same text both ways
                shown = matcher.highlight(name) if "[" not in name else Text(name)
                yield Hit(score, shown, run, text=name, help=help_text)
