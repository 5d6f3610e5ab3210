"""The gate reports (`runtime/gates/<task>.json`) in a checkpoint (sdd/checkpoint.py):
each kept with the signature its file had when it was read (inode, size, mtime, mode),
and put back on start only when the file still has that signature — as the quiet-time
poll decides that a file is unchanged — so a warm start does not open and parse 200
JSON files again. A report whose file had a problem is not kept: it is read again."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from console.model import GateReport
from console.sdd.confine import within

if TYPE_CHECKING:
    from console.sdd.source import LocalSource


class SavedReport(msgspec.Struct, frozen=True, array_like=True):
    display: str  # the file, as the State names it (under runtime/gates/)
    signature: tuple[int, int, int, int]
    report: GateReport


def saved_reports(source: LocalSource) -> list[SavedReport]:
    """The reports read from files without a problem, with their files' signatures."""
    state, out = source.state, []
    problems = state.problem_files()
    for display, task_id in state.gate_report_files().items():
        signature = source.signatures.get(str(source.paths.root / display))
        report = state.gate_reports.get(task_id)
        if signature is not None and report is not None and display not in problems:
            out.append(SavedReport(display, signature, report))
    return out


def restore_reports(source: LocalSource, saved: list[SavedReport]) -> bool:
    """Put back each report whose file is where the gate reports are and still as it
    was (the rest are read as usual); whether any was."""
    folder = source.paths.display(source.paths.gates_dir) + os.sep
    done = False
    for item in saved:
        name = item.display.removeprefix(folder)
        if (name == item.display or os.sep in name or name.startswith(".")
                or not name.endswith(".json")):
            continue  # (only a file the directory listing would read)
        try:  # (the one confinement check: inside runtime/gates/, through no link)
            path = within(source.paths.gates_dir, name, what="gate report",
                          top=source.paths.root)
            info = os.stat(path)
        except OSError:  # (UnsafePath is one)
            continue
        if (info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode) != item.signature:
            continue
        source.state.restore_gate_report(item.display, item.report)
        source.signatures[str(path)] = item.signature
        done = True
    return done
