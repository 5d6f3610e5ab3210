"""Git for the engine: one worktree and branch per attempt, merge into base.

Merges happen in the project's own checkout of the base branch, one at a time;
a conflict aborts the merge and names the conflicting files. Every command goes
through safegit (minimal environment, no repository-controlled programs), and what
an agent writes into the repository's config or hooks is put back before every step
the engine takes after an agent ran (its commit, the merge) and when its attempt
ends (gitguard).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from console.engine.errors import EngineError
from console.engine.gitguard import GitMetaGuard
from console.engine.safegit import NO_DIFF_PROGRAMS, GitFailed, GitRefused, run_git
from console.sdd.confine import real_dir, remove_tree

IDENTITY = ("-c", "user.name=bernstein-tui", "-c", "user.email=engine@bernstein-tui.invalid",
            "-c", "gc.auto=0")


@dataclass(frozen=True, slots=True)
class MergeResult:
    ok: bool
    message: str
    conflicts: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    lines: tuple[int, int] = (0, 0)  # added, deleted (text files) by the merge


class _Git:
    """Commands run in one directory, marked as the engine's (for the orphan reaper)."""

    def __init__(self, cwd: Path, marker: Path) -> None:
        self.cwd = cwd
        self.marker = marker

    def execute(self, argv: Sequence[str], *, work_tree: bool = True) -> str:
        assert argv[0] == "git"
        return run_git(argv[1:], self.cwd, marker=self.marker, work_tree=work_tree)


class GitRepo:
    """The project's repository; thread-safe through per-call git processes and a merge lock."""

    def __init__(self, root: Path, base_branch: str | None = None) -> None:
        if shutil.which("git") is None:
            raise EngineError("git is not installed (not found on PATH); the engine needs it "
                              "(the console still watches)")
        self.root = root
        self.marker = root  # as the engine's other processes carry it (orphans.reap_orphans)
        if not root.is_dir():
            raise EngineError(f"{root} is not a git repository; the engine needs one "
                              "(the console still watches)")
        try:
            bare, git_dir, common = self._git().execute(
                ["git", "rev-parse", "--is-bare-repository", "--absolute-git-dir",
                 "--git-common-dir"], work_tree=False).splitlines()[:3]
        except GitRefused as exc:
            raise EngineError(exc.line) from None
        except (GitFailed, ValueError):
            raise EngineError(f"{root} is not a git repository; the engine needs one "
                              "(the console still watches)") from None
        if bare == "true":
            raise EngineError(f"{root} is a bare repository; the engine needs a checkout")
        self.git_dir = Path(git_dir)
        self.common_dir = (root / common).resolve()
        try:
            top = self._git().execute(["git", "rev-parse", "--show-toplevel"], work_tree=False)
        except GitFailed as exc:
            raise EngineError(f"git cannot open {root}: {exc.line}") from None
        if Path(top).resolve() != root.resolve():
            raise EngineError(f"{root} is not a git repository (it is inside {top}); the "
                              "engine needs the project to be its own repository")
        self.root = Path(top)
        # one git command at a time for anything that touches shared repository
        # metadata (worktree admin dirs, branch refs, the base checkout)
        self.lock = threading.RLock()
        self.meta = GitMetaGuard(self.common_dir)
        self.check_admin()
        self.on_note: Callable[[str], object] | None = None  # where put-back notes are said
        self._guarded: dict[Path, Path | None] = {}  # attempts' worktrees → admin dirs
        if not self._valid("HEAD"):
            raise EngineError(f"{root} has no commits yet; commit once so agents can branch "
                              "from it")
        self.base = base_branch or self._current_branch()

    def _current_branch(self) -> str:
        try:
            return self._git().execute(["git", "symbolic-ref", "--short", "-q", "HEAD"])
        except GitFailed:
            raise EngineError("the project's HEAD is detached; set base_branch in "
                              "bernstein.yaml") from None

    def _valid(self, ref: str) -> bool:
        try:
            self._git().execute(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
        except GitFailed:
            return False
        return True

    def _git(self, cwd: Path | None = None) -> _Git:
        return _Git(cwd or self.root, self.marker)

    def branch_exists(self, branch: str) -> bool:
        return self._valid(f"refs/heads/{branch}")

    def check_admin(self) -> None:
        """EngineError when .git/worktrees is a link: git's own worktree commands would
        write and prune (delete files) wherever it points."""
        admin = self.common_dir / "worktrees"
        if admin.is_symlink():
            raise EngineError(f"{admin} is a symbolic link; the engine runs no worktree "
                              "command through it (replace it with a real directory)")

    def add_worktree(self, path: Path, branch: str, start: str | None = None) -> None:
        """A worktree on a new `branch` from the base (or from `start`, a branch whose
        work is to be built on)."""
        cmd = self._git()
        self.check_admin()
        with self.lock:
            try:
                self._add_worktree(cmd, path, branch, start)
            except GitFailed:
                self._drop_broken_admin_dirs()  # left by a git killed mid-way; then once more
                try:
                    self._add_worktree(cmd, path, branch, start)
                except GitFailed as exc:
                    raise EngineError(f"cannot create worktree {path.name} on {branch}: "
                                      f"{exc.line}") from None
            self.meta.begin()  # before its agent can write the shared config or hooks
            self._guarded[path] = self._admin_dir(path)

    def _admin_dir(self, worktree: Path) -> Path | None:
        """The worktree's own admin dir (`.git/worktrees/<name>`), as git made it."""
        try:
            found = Path(self._git(worktree).execute(
                ["git", "rev-parse", "--absolute-git-dir"], work_tree=False))
        except GitFailed:
            return None
        found = found.resolve()
        return found if found.parent == self.common_dir / "worktrees" else None

    def check_meta(self, worktree: Path | None = None) -> None:
        """Before a step the engine takes after an agent ran: put back what any running
        agent changed in the shared git metadata (and remove what `worktree`'s agent
        added to its own admin dir), saying so."""
        notes = [self.meta.check()]
        admin = self._guarded.get(worktree) if worktree is not None else None
        if admin is not None:
            notes.append(self.meta.clear(admin))
        for note in notes:
            if note and self.on_note is not None:
                self.on_note(note)

    def _add_worktree(self, cmd: _Git, path: Path, branch: str, start: str | None) -> None:
        if path.exists():
            self.remove_worktree(path)
        if self.branch_exists(branch):
            cmd.execute(["git", "branch", "-D", branch])
        origin = start if start and start != branch and self.branch_exists(start) else self.base
        cmd.execute(["git", "worktree", "add", "-q", "-b", branch, str(path), origin])

    def _drop_broken_admin_dirs(self) -> None:
        """Worktree admin dirs missing their gitdir/commondir make every worktree command fail."""
        admin = self.common_dir / "worktrees"
        # a .git/worktrees (or an entry in it) that is a link is never walked or removed
        # through: git's own prune deals with what is really there
        for entry in admin.iterdir() if real_dir(admin) else []:
            if real_dir(entry) and not ((entry / "gitdir").is_file()
                                        and (entry / "commondir").is_file()):
                with contextlib.suppress(OSError):
                    remove_tree(entry, admin, admin, "worktree admin dir")
        self.prune()

    def commit_all(self, worktree: Path, message: str) -> tuple[str, ...]:
        """Commit everything the agent changed; return the files changed against base."""
        cmd = self._git(worktree)
        self.check_meta(worktree)
        try:
            cmd.execute(["git", "add", "-A"])
            status = cmd.execute(["git", "status", "--porcelain"])
            if status.strip():
                cmd.execute(["git", *IDENTITY, "commit", "-q", "--no-verify", "-m", message])
            names = cmd.execute(["git", "diff", "--name-only", f"{self.base}...HEAD"])
        except GitFailed as exc:
            raise EngineError(f"cannot commit the agent's work: {exc.line}") from None
        return tuple(n for n in names.splitlines() if n)

    def diff(self, worktree: Path, limit: int = 200_000) -> str:
        """What the attempt changed (base...HEAD), capped, for reviewers and judges."""
        try:
            text = self._git(worktree).execute(["git", "diff", *NO_DIFF_PROGRAMS,
                                                f"{self.base}...HEAD"])
        except GitFailed:
            return ""
        return text[:limit]

    def merge(self, branch: str, message: str) -> MergeResult:
        with self.lock:
            self.check_meta()
            cmd = self._git()
            try:
                current = cmd.execute(["git", "symbolic-ref", "--short", "HEAD"]).strip()
            except GitFailed:
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
            except GitFailed as exc:
                conflicts: tuple[str, ...] = ()
                with contextlib.suppress(GitFailed):
                    conflicts = tuple(n for n in cmd.execute(
                        ["git", "diff", "--name-only", "--diff-filter=U"]).splitlines() if n)
                with contextlib.suppress(GitFailed):
                    cmd.execute(["git", "merge", "--abort"])
                if conflicts:
                    return MergeResult(False, "merge conflict in " + ", ".join(conflicts),
                                       conflicts)
                dirty = self._dirty(files)
                if dirty:
                    return MergeResult(False, "the project checkout has uncommitted changes "
                                              "the merge would overwrite: " + ", ".join(dirty))
                return MergeResult(False, f"merge failed: {exc.line}")
            merged = tuple(n for n in files.splitlines() if n)
            return MergeResult(True, f"merged {len(merged)} file(s) into {self.base}",
                               files=merged, lines=self._merged_lines(cmd))

    @staticmethod
    def _merged_lines(cmd: _Git) -> tuple[int, int]:
        """Lines added and deleted by the merge just made (its first parent's diff);
        binary files count none."""
        try:
            stat = cmd.execute(["git", "diff", "--numstat", *NO_DIFF_PROGRAMS, "HEAD^1", "HEAD"])
        except GitFailed:
            return (0, 0)
        added = deleted = 0
        for row in stat.splitlines():
            parts = row.split("\t")
            if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
                added, deleted = added + int(parts[0]), deleted + int(parts[1])
        return (added, deleted)

    def _dirty(self, merging: str) -> list[str]:
        """Files the merge would touch that have uncommitted changes in the checkout."""
        try:
            status = self._git().execute(["git", "status", "--porcelain", "-z"])
        except GitFailed:
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
        except GitFailed:
            return False
        return bool(found.strip())

    def worktrees(self) -> set[Path]:
        """The worktrees git has registered (`git worktree list --porcelain`), the main
        checkout excluded: the only directories the engine ever removes."""
        try:
            listing = self._git().execute(["git", "worktree", "list", "--porcelain", "-z"])
        except GitFailed:
            return set()
        found = {Path(os.path.realpath(field.removeprefix("worktree ")))
                 for field in listing.split("\0") if field.startswith("worktree ")}
        return found - {Path(os.path.realpath(self.root))}

    def remove_worktree(self, path: Path, branch: str | None = None) -> None:
        """Remove an attempt's worktree: through git when git lists it, and what is left
        only when it is a real directory inside `.sdd/` (never through a link)."""
        cmd = self._git()
        with self.lock:
            if path in self._guarded:  # its attempt is over: nothing it wrote stays
                del self._guarded[path]
                note = self.meta.end()
                if note and self.on_note is not None:
                    self.on_note(note)
            if Path(os.path.realpath(path.parent)) / path.name in self.worktrees():
                with contextlib.suppress(GitFailed):
                    cmd.execute(["git", "worktree", "remove", "--force", str(path)])
            if os.path.lexists(path):
                remove_tree(path, self.root / ".sdd", self.root, "worktree")
            self.prune()
            if branch is not None:
                self.delete_branch(branch)

    def delete_branch(self, branch: str) -> None:
        with self.lock, contextlib.suppress(GitFailed):
            self._git().execute(["git", "branch", "-D", branch])

    def recover(self, wait_s: float = 10.0) -> list[str]:
        """After a crash: let an orphaned git finish, then clear what it left. Returns notes."""
        notes = []
        git_dir = self.git_dir
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
            with contextlib.suppress(GitFailed):
                self._git().execute(["git", "merge", "--abort"])
            notes.append("aborted a merge a stopped engine left unfinished")
        self.prune()
        return notes

    def prune(self) -> None:
        if (self.common_dir / "worktrees").is_symlink():
            return  # git would prune (delete) wherever the link points
        with self.lock, contextlib.suppress(GitFailed):
            self._git().execute(["git", "worktree", "prune"])
