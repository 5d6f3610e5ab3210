"""Git for the engine (gitpython): one worktree and branch per attempt, merge into base.

Merges happen in the project's own checkout of the base branch, one at a time;
a conflict aborts the merge and names the conflicting files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")  # no git: our own one-line error, below

import git

from console.engine.errors import EngineError
from console.engine.orphans import PROJECT_MARKER
from console.sdd.confine import remove_tree

IDENTITY = ("-c", "user.name=bernstein-tui", "-c", "user.email=engine@bernstein-tui.invalid",
            "-c", "gc.auto=0")


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
        if shutil.which("git") is None:
            raise EngineError("git is not installed (not found on PATH); the engine needs it "
                              "(the console still watches)")
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
        # one git command at a time for anything that touches shared repository
        # metadata (worktree admin dirs, branch refs, the base checkout)
        self.lock = threading.RLock()
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
        command = git.Git(str(cwd or self.root))
        command.update_environment(**{PROJECT_MARKER: str(self.root)})
        return command

    def branch_exists(self, branch: str) -> bool:
        try:
            self._git().execute(["git", "rev-parse", "--verify", "--quiet",
                                 f"refs/heads/{branch}"])
        except git.GitCommandError:
            return False
        return True

    def add_worktree(self, path: Path, branch: str) -> None:
        cmd = self._git()
        with self.lock:
            try:
                self._add_worktree(cmd, path, branch)
            except git.GitCommandError:
                self._drop_broken_admin_dirs()  # left by a git killed mid-way; then once more
                try:
                    self._add_worktree(cmd, path, branch)
                except git.GitCommandError as exc:
                    raise EngineError(f"cannot create worktree {path.name} on {branch}: "
                                      f"{_short(exc)}") from None

    def _add_worktree(self, cmd: git.Git, path: Path, branch: str) -> None:
        if path.exists():
            self.remove_worktree(path)
        if self.branch_exists(branch):
            cmd.execute(["git", "branch", "-D", branch])
        cmd.execute(["git", "worktree", "add", "-q", "-b", branch, str(path), self.base])

    def _drop_broken_admin_dirs(self) -> None:
        """Worktree admin dirs missing their gitdir/commondir make every worktree command fail."""
        admin = Path(self.repo.git_dir) / "worktrees"
        for entry in admin.iterdir() if admin.is_dir() else []:
            if not ((entry / "gitdir").is_file() and (entry / "commondir").is_file()):
                shutil.rmtree(entry, ignore_errors=True)
        self.prune()

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

    def diff(self, worktree: Path, limit: int = 200_000) -> str:
        """What the attempt changed (base...HEAD), capped, for reviewers and judges."""
        try:
            text = self._git(worktree).execute(["git", "diff", f"{self.base}...HEAD"])
        except git.GitCommandError:
            return ""
        return text[:limit]

    def merge(self, branch: str, message: str) -> MergeResult:
        with self.lock:
            cmd = self._git()
            try:
                current = cmd.execute(["git", "symbolic-ref", "--short", "HEAD"]).strip()
            except git.GitCommandError:
                current = ""
            if current != self.base:
                where = current or "a detached HEAD"
                return MergeResult(False, f"the project checkout is on '{where}', "
                                          f"not the base branch '{self.base}'")
            files = ""
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
                dirty = self._dirty(files)
                if dirty:
                    return MergeResult(False, "the project checkout has uncommitted changes "
                                              "the merge would overwrite: " + ", ".join(dirty))
                return MergeResult(False, f"merge failed: {_short(exc)}")
            merged = tuple(n for n in files.splitlines() if n)
            return MergeResult(True, f"merged {len(merged)} file(s) into {self.base}",
                               files=merged)

    def _dirty(self, merging: str) -> list[str]:
        """Files the merge would touch that have uncommitted changes in the checkout."""
        try:
            status = self._git().execute(["git", "status", "--porcelain", "-z"])
        except git.GitCommandError:
            return []
        touched = set(merging.splitlines())
        local = {entry[3:] for entry in status.split("\0") if len(entry) > 3}
        return sorted(touched & local) or sorted(local)[:5]

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

    def worktrees(self) -> set[Path]:
        """The worktrees git has registered (`git worktree list --porcelain`), the main
        checkout excluded: the only directories the engine ever removes."""
        try:
            listing = self._git().execute(["git", "worktree", "list", "--porcelain", "-z"])
        except git.GitCommandError:
            return set()
        found = {Path(os.path.realpath(field.removeprefix("worktree ")))
                 for field in listing.split("\0") if field.startswith("worktree ")}
        return found - {Path(os.path.realpath(self.root))}

    def remove_worktree(self, path: Path, branch: str | None = None) -> None:
        """Remove an attempt's worktree: through git when git lists it, and what is left
        only when it is a real directory inside `.sdd/` (never through a link)."""
        cmd = self._git()
        with self.lock:
            if Path(os.path.realpath(path.parent)) / path.name in self.worktrees():
                with contextlib.suppress(git.GitCommandError):
                    cmd.execute(["git", "worktree", "remove", "--force", str(path)])
            if os.path.lexists(path):
                remove_tree(path, self.root / ".sdd", self.root, "worktree")
            with contextlib.suppress(git.GitCommandError):
                cmd.execute(["git", "worktree", "prune"])
            if branch is not None:
                self.delete_branch(branch)

    def delete_branch(self, branch: str) -> None:
        with self.lock, contextlib.suppress(git.GitCommandError):
            self._git().execute(["git", "branch", "-D", branch])

    def recover(self, wait_s: float = 10.0) -> list[str]:
        """After a crash: let an orphaned git finish, then clear what it left. Returns notes."""
        notes = []
        git_dir = Path(self.repo.git_dir)
        self._drop_broken_admin_dirs()
        lock = git_dir / "index.lock"
        deadline = time.monotonic() + wait_s
        while lock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if lock.exists():
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            notes.append(f"removed a stale {lock} left by a stopped engine")
        if (git_dir / "MERGE_HEAD").exists():
            with contextlib.suppress(git.GitCommandError):
                self._git().execute(["git", "merge", "--abort"])
            notes.append("aborted a merge a stopped engine left unfinished")
        self.prune()
        return notes

    def prune(self) -> None:
        with self.lock, contextlib.suppress(git.GitCommandError):
            self._git().execute(["git", "worktree", "prune"])
