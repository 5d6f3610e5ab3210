"""Integration through a shared git remote, for a cluster worker: the worker's clone keeps
its base branch equal to the remote's, and an attempt's work lands by fetch → merge onto
the freshly fetched remote base → push. A push that loses a race (another worker pushed
first) is undone and tried again on the new remote base; a true conflict fails the
attempt naming the files, as a local merge does.

Each landing carries a `Bernstein-Task: <server task id>` trailer, and before merging
the remote base is searched for it: a task whose work is already there (a worker that
pushed and was killed before it could report) is never merged twice.

Fetch and push go through the engine's safe git, with the transports a remote needs
allowed back (file, ssh, https; never ext:: or other programs), the ssh agent's socket,
a time limit, and nothing else. They name the program the other side runs: a
`remote.<name>.uploadpack` or `receivepack` in the config (which a local remote would
run here, through the shell) is never used. Over ssh that is plain `git-upload-pack` /
`git-receive-pack` (all a forge accepts; it runs on the server). A local remote (a
path, a file:// URL) runs here, as us, and git does not pass our `-c` options on to it:
its own hooks and config would run; so its side is git with the engine's overrides on
its own command line (`git -c core.hooksPath=/dev/null … receive-pack`).
Before each, what running agents changed in the git metadata (the remote's URL, say)
is put back (gitguard).
"""

from __future__ import annotations

import contextlib
import random
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from console.engine.errors import EngineError
from console.engine.gitops import IDENTITY, GitRepo, MergeResult
from console.engine.safegit import SAFE_CONFIG, GitFailed, options, run_git

PUSH_TRIES = 12
NETWORK_S = 120.0  # one fetch or push
TRAILER = "Bernstein-Task"
#: the author of the engine's own merges (what `sync` may drop when they never landed)
ENGINE_EMAIL = next(o.split("=", 1)[1] for o in IDENTITY if o.startswith("user.email="))
#: transports allowed back for fetch and push (safegit sets protocol.allow=never)
NETWORK = ("-c", "protocol.file.allow=always", "-c", "protocol.ssh.allow=always",
           "-c", "protocol.https.allow=always", "-c", "core.sshCommand=ssh",
           "-c", "http.saveCookies=false")  # a config's cookie file is never written
_BRANCH = re.compile(r"bernstein/(?P<task>[A-Za-z0-9._-]+)-\d+")
#: the program a fetch and a push run on the other side, whatever the config says: over
#: ssh, the one name a forge accepts; for a local remote, which runs here, git with
#: every override (its hooks, fsmonitor, alternate-refs command, auto gc all off)
UPLOAD_PACK = "git-upload-pack"
RECEIVE_PACK = "git-receive-pack"
LOCAL_UPLOAD_PACK = shlex.join(["git", *options(SAFE_CONFIG), "upload-pack"])
#: (a checked-out branch is never updated there: `updateInstead` would run that
#: checkout's filters)
LOCAL_RECEIVE_PACK = shlex.join(["git", *options(SAFE_CONFIG), "-c", "receive.autoGc=false",
                                 "-c", "receive.denyCurrentBranch=refuse", "receive-pack"])
_SSH_SCHEMES = ("ssh://", "git+ssh://", "ssh+git://")
_REJECTED = ("non-fast-forward", "fetch first", "rejected", "stale info", "cannot lock ref")
#: a remote's refusal that another push racing ours causes (anything else is for good)
_RACED = ("lock", "failed to update ref", "incorrect old value", "stale info", "fetch first",
          "non-fast-forward")


def over_ssh(url: str) -> bool:
    """Whether git reaches `url` through ssh (an ssh:// URL, or scp-like `host:path`:
    a ':' before any '/'), as git itself decides; anything else that is no URL
    (`scheme://`) is a local path."""
    if "://" in url:
        return url.lower().startswith(_SSH_SCHEMES)
    colon, slash = url.find(":"), url.find("/")
    return colon > 0 and (slash < 0 or colon < slash)


def _refused_for_good(exc: GitFailed) -> str | None:
    """Why a failed push will fail again (the remote refused the ref: a checked-out
    branch, a declined update), or None when it lost a race with another worker's push
    (not a fast-forward, a ref that push holds locked) and is tried again."""
    refused = [line.split("\t")[-1] for line in exc.stdout.splitlines()
               if line.startswith("!")]  # --porcelain: "!<TAB>ref<TAB>[why] (detail)"
    if not refused:
        return None if any(word in exc.stderr + exc.stdout for word in _REJECTED) \
            else exc.line
    for why in refused:
        if why.startswith("[remote rejected]") and not any(word in why for word in _RACED):
            return why
    return None


def task_of_branch(branch: str) -> str | None:
    """The task id in an attempt's branch name (`bernstein/<task>-<attempt>`)."""
    match = _BRANCH.fullmatch(branch)
    return match["task"] if match else None


class SharedRemoteRepo(GitRepo):
    """A GitRepo whose base branch lives on a remote (default `origin`)."""

    def __init__(self, root: Path, base_branch: str | None = None, *,
                 remote: str = "origin") -> None:
        super().__init__(root, base_branch)
        self.remote = remote
        try:
            self.remote_url = self._run(["remote", "get-url", remote])
        except GitFailed:
            raise EngineError(f"{root}: no git remote '{remote}'; a cluster worker lands its "
                              "work through the shared remote (git remote add origin URL)"
                              ) from None
        self.tracking = f"refs/remotes/{remote}/{self.base}"
        #: branch → the commit on the remote base its work landed in
        self.landed_at: dict[str, str] = {}
        #: the landing id of a branch (the server's task id); default: its task id
        self.landing_id: Callable[[str], str | None] = task_of_branch
        self.fetch()

    def _run(self, args: list[str]) -> str:
        return self._git().execute(["git", *args])

    def _net(self, args: list[str]) -> str:
        """A fetch or push: the transports allowed back, the program the other side runs,
        the ssh agent reachable, and a time limit (a remote that hangs fails the attempt,
        not the worker); the git metadata as it was before any agent ran."""
        self.check_meta()
        pack = self._pack_program(push=args[0] == "push")
        return run_git([*NETWORK, args[0], pack, *args[1:]], self.root, marker=self.marker,
                       timeout_s=NETWORK_S, pass_env=("SSH_AUTH_SOCK",))

    def _pack_program(self, push: bool) -> str:
        """`--upload-pack=…` / `--receive-pack=…` for the URL(s) git uses now (`insteadOf`
        applied): the plain name when all go over ssh, else the local one."""
        urls = self._run(["remote", "get-url", *(["--push", "--all"] if push else []),
                          self.remote]).splitlines()
        ssh = bool(urls) and all(map(over_ssh, urls))
        if push:
            return f"--receive-pack={RECEIVE_PACK if ssh else LOCAL_RECEIVE_PACK}"
        return f"--upload-pack={UPLOAD_PACK if ssh else LOCAL_UPLOAD_PACK}"

    # -- the remote base -----------------------------------------------------------------

    def fetch(self) -> None:
        """The remote's base into refs/remotes/<remote>/<base>; EngineError when it fails."""
        try:
            self._net(["fetch", "-q", "--no-tags", "--no-recurse-submodules", self.remote,
                       f"+refs/heads/{self.base}:{self.tracking}"])
        except GitFailed as exc:
            raise EngineError(f"cannot fetch {self.base} from {self.remote}: {exc.line}"
                              ) from None

    def sync(self, *, fetched: bool = True) -> None:
        """Fetch (unless `fetched` is False: a remote that did not answer leaves the last
        fetch), and bring the checkout's base to the remote's: a fast-forward, or (when
        all it has on top are this engine's own unpushed merges) a reset; anything else
        is somebody's work and stops the attempt with a line saying so."""
        with self.lock:
            if fetched:
                self.fetch()
            head = self._run(["rev-parse", "HEAD"])
            remote = self._run(["rev-parse", self.tracking])
            if head == remote:
                return
            ahead = self._run(["log", "--format=%ae", f"{self.tracking}..HEAD"]).split()
            if not ahead:
                self._run(["merge", "--ff-only", "-q", self.tracking])
            elif all(email == ENGINE_EMAIL for email in ahead):
                self._run(["reset", "--hard", "-q", self.tracking])
            else:
                raise EngineError(f"the clone's {self.base} has {len(ahead)} commit(s) that "
                                  f"are not on {self.remote}/{self.base}; push or drop them "
                                  "before running as a cluster worker")

    def landed(self, landing: str) -> str | None:
        """The commit on the fetched remote base that carries this landing, if any."""
        literal = landing.replace(".", "\\.")  # a safe id: '.' is its only regex character
        pattern = f"^{TRAILER}: {literal}$"
        try:
            found = self._run(["log", "-1", "--format=%H", f"--grep={pattern}",
                               self.tracking])
        except GitFailed:
            return None
        return found.strip() or None

    def add_worktree(self, path: Path, branch: str, start: str | None = None) -> None:
        """Every attempt starts from the remote's newest base (or, when the remote does not
        answer, the last one fetched: the landing fetches again); a fix attempt from
        the local branch it fixes."""
        with contextlib.suppress(EngineError):
            self.fetch()
        self.sync(fetched=False)
        super().add_worktree(path, branch, start)

    def is_merged(self, branch: str) -> bool:
        landing = self.landing_id(branch)
        if landing is None:
            return False
        try:
            self.fetch()
        except EngineError:
            return False
        return self.landed(landing) is not None

    # -- landing ---------------------------------------------------------------------

    def merge(self, branch: str, message: str) -> MergeResult:
        landing = self.landing_id(branch)
        if landing is None:
            return MergeResult(False, f"{branch}: not an attempt branch; nothing landed")
        message = f"{message}\n\n{TRAILER}: {landing}"
        last = ""
        for attempt in range(PUSH_TRIES):
            with self.lock:
                try:
                    self.sync()
                except EngineError as exc:
                    return MergeResult(False, str(exc))
                already = self.landed(landing)
                if already is not None:
                    self.landed_at[branch] = already
                    return MergeResult(True, f"already on {self.remote}/{self.base} at "
                                             f"{already[:12]}; not merged again")
                before = self._run(["rev-parse", "HEAD"])
                merged = super().merge(branch, message)
                if not merged.ok:
                    return merged
                try:
                    self._net(["push", "-q", "--porcelain", "--no-recurse-submodules",
                               self.remote, f"HEAD:refs/heads/{self.base}"])
                except GitFailed as exc:
                    self._run(["reset", "--hard", "-q", before])  # undo the local merge
                    last = exc.line
                    refused = _refused_for_good(exc)
                    if refused is not None:
                        return MergeResult(False, f"push to {self.remote} failed: {refused}")
                else:
                    sha = self._run(["rev-parse", "HEAD"])
                    self._run(["update-ref", self.tracking, sha])
                    self.landed_at[branch] = sha
                    return MergeResult(True, f"merged {len(merged.files)} file(s) into "
                                             f"{self.remote}/{self.base} at {sha[:12]}"
                                             + (f" (after {attempt} push race(s))"
                                                if attempt else ""), files=merged.files)
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))  # another worker pushed
        return MergeResult(False, f"push to {self.remote}/{self.base} lost the race "
                                  f"{PUSH_TRIES} times: {last}")
