"""The command palette (ctrl+p): tasks, proposals and actions by name.

Every entry runs the same action as its key, so the palette, the keys and the
CLI reach one Control interface.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.tui.keys import MAIN_KEYS

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
        for _group, _key, action, _label, description, _shown in MAIN_KEYS:
            if action in ("command_palette", "help") or action.startswith("quick_filter"):
                continue
            entries.append((description.split(" (")[0],
                            partial(app.run_action, action), f"key {_key}"))
        with app.source.lock:
            state = app.source.state
            proposals = list(state.pending_proposals())
            titles = {pid: state.proposals[pid].title for pid in proposals
                      if pid in state.proposals}
            tasks = [(t.id, t.title, t.status) for t in list(state.tasks.values())[
                -MAX_TASK_HITS:]]
        for pid in proposals:
            title = titles.get(pid, "")
            entries.append((f"Approve proposal {pid} {title}",
                            partial(app.open_proposal, pid, "approve"), "pending proposal"))
            entries.append((f"Reject proposal {pid} {title}",
                            partial(app.open_proposal, pid, "reject"), "pending proposal"))
        for task_id, title, status in tasks:
            entries.append((f"Task {task_id} {title}", partial(app.go_to_task, task_id),
                            status))
            if status == "failed":
                entries.append((f"Retry task {task_id} {title}",
                                partial(app.action_retry, task_id), "failed task"))
        return entries

    async def discover(self) -> Hits:
        for name, run, help_text in self._entries()[:40]:
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, run, help_text in self._entries():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help_text)
