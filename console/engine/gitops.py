"""Git for the engine (gitpython): one worktree and branch per attempt, merge into base.

Merges happen in the project's own checkout of the base branch, one at a time;
a conflict aborts the merge and names the conflicting files.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import git

from console.engine.errors import EngineError

IDENTITY = ("-c", "user.name=bernstein-tui", "-c", "user.email=engine@bernstein-tui.invalid")


@dataclass(frozen=True, slots=True)
class MergeResult:
    ok: bool
    message: str
    conflicts: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def _short(exc: git.GitCommandError) -> str:
    text = (exc.stderr or exc.stdout or str(exc)).strip().replace("stderr: ", "").strip("'\n ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else str(exc)


class GitRepo:
    """The project's repository; thread-safe through per-call git processes and a merge lock."""

    def __init__(self, root: Path, base_branch: str | None = None) -> None:
        try:
            self.repo = git.Repo(root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise EngineError(f"{root} is not a git repository; the engine needs one "
                              "(the console still watches)") from None
        except git.GitError as exc:
            raise EngineError(f"git cannot open {root}: {exc}") from None
        if self.repo.bare:
            raise EngineError(f"{root} is a bare repository; the engine needs a checkout")
        self.root = Path(self.repo.working_tree_dir or root)
        self.merge_lock = threading.Lock()
        if not self.repo.head.is_valid():
            raise EngineError(f"{root} has no commits yet; commit once so agents can branch "
                              "from it")
        self.base = base_branch or self._current_branch()

    def _current_branch(self) -> str:
        try:
            return self.repo.active_branch.name
        except TypeError:
            raise EngineError("the project's HEAD is detached; set base_branch in "
                              "bernstein.yaml") from None

    def _git(self, cwd: Path | None = None) -> git.Git:
        return git.Git(str(cwd or self.root))

    def branch_exists(self, branch: str) -> bool:
        try:
            self._git().execute(["git", "rev-parse", "--verify", "--quiet",
                                 f"refs/heads/{branch}"])
        except git.GitCommandError:
            return False
        return True

    def add_worktree(self, path: Path, branch: str) -> None:
        cmd = self._git()
        try:
            if path.exists():
                self.remove_worktree(path)
            if self.branch_exists(branch):
                cmd.execute(["git", "branch", "-D", branch])
            cmd.execute(["git", "worktree", "add", "-q", "-b", branch, str(path), self.base])
        except git.GitCommandError as exc:
            raise EngineError(f"cannot create worktree {path.name} on {branch}: "
                              f"{_short(exc)}") from None

    def commit_all(self, worktree: Path, message: str) -> tuple[str, ...]:
        """Commit everything the agent changed; return the files changed against base."""
        cmd = self._git(worktree)
        try:
            cmd.execute(["git", "add", "-A"])
            status = cmd.execute(["git", "status", "--porcelain"])
            if status.strip():
                cmd.execute(["git", *IDENTITY, "commit", "-q", "--no-verify", "-m", message])
            names = cmd.execute(["git", "diff", "--name-only", f"{self.base}...HEAD"])
        except git.GitCommandError as exc:
            raise EngineError(f"cannot commit the agent's work: {_short(exc)}") from None
        return tuple(n for n in names.splitlines() if n)

    def merge(self, branch: str, message: str) -> MergeResult:
        with self.merge_lock:
            cmd = self._git()
            try:
                current = cmd.execute(["git", "symbolic-ref", "--short", "HEAD"]).strip()
            except git.GitCommandError:
                current = ""
            if current != self.base:
                where = current or "a detached HEAD"
                return MergeResult(False, f"the project checkout is on '{where}', "
                                          f"not the base branch '{self.base}'")
            try:
                files = cmd.execute(["git", "diff", "--name-only", f"{self.base}...{branch}"])
                cmd.execute(["git", *IDENTITY, "merge", "--no-ff", "--no-edit", "-q", "-m",
                             message, branch])
            except git.GitCommandError as exc:
                conflicts = ()
                with contextlib.suppress(git.GitCommandError):
                    conflicts = tuple(n for n in cmd.execute(
                        ["git", "diff", "--name-only", "--diff-filter=U"]).splitlines() if n)
                with contextlib.suppress(git.GitCommandError):
                    cmd.execute(["git", "merge", "--abort"])
                if conflicts:
                    return MergeResult(False, "merge conflict in " + ", ".join(conflicts),
                                       conflicts)
                return MergeResult(False, f"merge failed: {_short(exc)}")
            merged = tuple(n for n in files.splitlines() if n)
            return MergeResult(True, f"merged {len(merged)} file(s) into {self.base}",
                               files=merged)

    @staticmethod
    def merge_message(branch: str, title: str) -> str:
        return f"Merge {branch}: {title}"

    def is_merged(self, branch: str) -> bool:
        """Base already holds this branch's merge commit (merged just before a crash)."""
        try:
            found = self._git().execute(["git", "log", "-1", "--format=%H", "--fixed-strings",
                                         f"--grep=Merge {branch}:", self.base])
        except git.GitCommandError:
            return False
        return bool(found.strip())

    def remove_worktree(self, path: Path, branch: str | None = None) -> None:
        cmd = self._git()
        with contextlib.suppress(git.GitCommandError):
            cmd.execute(["git", "worktree", "remove", "--force", str(path)])
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(git.GitCommandError):
            cmd.execute(["git", "worktree", "prune"])
        if branch is not None:
            with contextlib.suppress(git.GitCommandError):
                cmd.execute(["git", "branch", "-D", branch])

    def prune(self) -> None:
        with contextlib.suppress(git.GitCommandError):
            self._git().execute(["git", "worktree", "prune"])
