"""What an operator can do, whatever runs the project (DESIGN §1).

Three implementations: the embedded engine, a remote Bernstein task server,
and file-only (a project no process runs). Every action returns an `Outcome`
whose message the UI and the CLI show as it is: a refused action says why.
"""

from __future__ import annotations

from typing import Protocol

import msgspec


class Outcome(msgspec.Struct, frozen=True):
    ok: bool
    message: str

    @classmethod
    def done(cls, message: str) -> Outcome:
        return cls(True, message)

    @classmethod
    def refused(cls, message: str) -> Outcome:
        return cls(False, message)


class Control(Protocol):
    def retry(self, task_id: str) -> Outcome: ...

    def escalate(self, task_id: str, model: str | None = None) -> Outcome: ...

    def cancel(self, task_id: str, reason: str) -> Outcome: ...

    def approve(self, proposal_id: str, reason: str = "") -> Outcome: ...

    def reject(self, proposal_id: str, reason: str) -> Outcome: ...

    def evolve(self) -> Outcome: ...

    def pause(self) -> Outcome: ...

    def resume(self) -> Outcome: ...

    def release_gate(self, mission_id: str, gate_name: str, reason: str) -> Outcome: ...
