"""The whole files in a checkpoint (sdd/checkpoint.py): each gate report
(`runtime/gates/<task>.json`) and backlog ticket read without a problem, kept with the
signature its file had when it was read (fileio.Signature: device, inode, size,
mtime, ctime, mode).

On start each directory is listed as usual (LocalSource._sync_dir), and a file whose
listing shows the signature it had is put back instead of read — as the quiet-time poll
decides that a file is unchanged — so a warm start neither opens and parses 200 JSON
files nor imports a YAML parser. The checkpoint's names are only looked up by what the
listing gives: no path is ever made from them. A file that had a problem is not kept:
it is read again, and says so again."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import msgspec

from console.model import GateReport, Ticket
from console.sdd.fileio import Signature
from console.sdd.paths import Kind

if TYPE_CHECKING:
    from console.sdd.delta import Delta
    from console.sdd.source import LocalSource
    from console.sdd.state import State


class SavedReport(msgspec.Struct, frozen=True, array_like=True):
    display: str  # the file, as the State names it (under runtime/gates/)
    signature: Signature
    report: GateReport

    def put(self, state: State) -> Delta:
        return state.restore_gate_report(self.display, self.report)


class SavedTicket(msgspec.Struct, frozen=True, array_like=True):
    display: str  # (under backlog/open/)
    signature: Signature
    ticket: Ticket

    def put(self, state: State) -> Delta:
        return state.apply_ticket(self.display, self.ticket)


Saved = SavedReport | SavedTicket


def saved_files(source: LocalSource) -> tuple[list[SavedReport], list[SavedTicket]]:
    """The gate reports and tickets read without a problem, with their signatures. A
    report is kept only when its task has no other report file: the State holds one
    report a task (the last file read), which is not what the other file says."""
    state, problems, signatures = source.state, source.state.problem_files(), source.signatures
    files = state.gate_report_files()
    files_of_task = Counter(files.values())

    def signed(display: str) -> Signature | None:
        if display in problems:
            return None
        return signatures.get(str(source.paths.root / display))

    reports = [SavedReport(display, signature, report)
               for display, task_id in files.items()
               if files_of_task[task_id] == 1
               and (report := state.gate_reports.get(task_id)) is not None
               and (signature := signed(display)) is not None]
    tickets = [SavedTicket(display, signature, ticket)
               for display, ticket in state.tickets.items()
               if (signature := signed(display)) is not None]
    return reports, tickets


def offer(source: LocalSource, reports: list[SavedReport], tickets: list[SavedTicket]
          ) -> None:
    """Hand the saved files to the source's first listing of their directories."""
    source.saved_files[Kind.GATE_REPORT] = {item.display: item for item in reports}
    source.saved_files[Kind.TICKET] = {item.display: item for item in tickets}
