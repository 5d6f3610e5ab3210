"""The records and files that could not be read, per file: kept, counted, bounded, and
cleared when their file is read again from the start. A mixin of `State`."""

from __future__ import annotations

from collections import Counter, defaultdict

from console.model import Problem
from console.sdd.delta import Delta
from console.sdd.kinds import Section

#: problems listed per file; the rest are counted
MAX_PROBLEMS_PER_FILE = 10_000


class ProblemLog:
    def __init__(self) -> None:
        self._problems: dict[str, list[Problem]] = defaultdict(list)
        self._overflow: Counter[str] = Counter()
        self._file_errors: dict[str, Problem] = {}

    @property
    def problems(self) -> list[Problem]:
        """Files that cannot be read, then each file's bad records, by file name: the
        same list whatever order the files were read in (a cold start or a warm one)."""
        out = [self._file_errors[name] for name in sorted(self._file_errors)]
        for name in sorted(self._problems):
            items = self._problems[name]
            out.extend(items)
            if self._overflow[name]:
                out.append(Problem(name, None, f"{self._overflow[name]} more problems not listed"))
        return out

    @property
    def problem_count(self) -> int:
        return (len(self._file_errors) + sum(len(v) for v in self._problems.values())
                + sum(self._overflow.values()))

    def problem_files(self) -> dict[str, tuple[list[Problem], int]]:
        """Per file, the problems listed and how many more were counted (a checkpoint)."""
        return {name: (list(items), self._overflow[name])
                for name, items in self._problems.items()}

    def restore_problems(self, name: str, listed: list[Problem], more: int) -> None:
        """Put back a file's problems as a checkpoint kept them."""
        if listed:
            self._problems[name] = list(listed[:MAX_PROBLEMS_PER_FILE])
        if more:
            self._overflow[name] = more

    def _problem(self, problem: Problem) -> None:
        items = self._problems[problem.file]
        if len(items) < MAX_PROBLEMS_PER_FILE:
            items.append(problem)
        else:
            self._overflow[problem.file] += 1

    def _clear_problems(self, display: str) -> None:
        self._problems.pop(display, None)
        self._overflow.pop(display, None)

    def set_file_error(self, display: str, reason: str | None) -> Delta:
        """A whole file is unreadable right now (or readable again, reason None)."""
        delta = Delta()
        self._set_file_error(display, reason, delta)
        return delta

    def _set_file_error(self, display: str, reason: str | None, delta: Delta) -> None:
        had = self._file_errors.get(display)
        if reason is None:
            if had is not None:
                del self._file_errors[display]
                delta.sections.add(Section.PROBLEMS)
        elif had is None or had.reason != reason:
            self._file_errors[display] = Problem(display, None, reason)
            delta.sections.add(Section.PROBLEMS)
