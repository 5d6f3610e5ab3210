"""#32 point 2: git never runs a program a repository chose — not through an include
that only matches the engine's own branches, not through a driver whose name a `-c`
cannot carry, not through a remote's upload-pack or receive-pack, and not through
config an agent rewrites before the engine's landing steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from console.engine.gitops import GitRepo
from console.engine.safegit import driver_overrides, git_env
from console.engine.shared_remote import SharedRemoteRepo
from console.sdd.tail import JsonlTail
from tests.conftest import trusted
from tests.engine_kit import SPEC_AGENT, git, make_repo, tasks, ticket


def _marker_cmd(markers: Path, name: str) -> str:
    """A shell command that leaves `markers/<name>.ran` and passes its input through."""
    return f"sh -c 'touch {markers}/{name}.ran; cat' --"


def _ran(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.glob("*.ran"))


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                           "--until-idle"], capture_output=True, text=True, timeout=240)


def _events(root: Path) -> list[str]:
    path = root / ".sdd" / "runtime" / "engine_events.jsonl"
    return [r["message"] for _, r in JsonlTail(path).read().records] if path.exists() else []


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    root = make_repo(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    (root / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "project set up")
    return root, markers


def test_an_include_that_only_matches_the_engines_branches_is_refused(tmp_path: Path
                                                                      ) -> None:
    """`includeIf "onbranch:bernstein/*"` sets a filter only where the engine's attempt
    branches are checked out: what git applies depends on the branch and worktree it
    runs in (and on files an include may name that a merge rewrites). The engine does
    not reason about that: it refuses the repository, with one line, before any git."""
    root, markers = _setup(tmp_path)
    (root / ".git" / "evil.inc").write_text(
        f'[filter "evil"]\n\tsmudge = {_marker_cmd(markers, "smudge")}\n'
        f'\tclean = {_marker_cmd(markers, "clean")}\n\trequired = true\n'
        f"[core]\n\tfsmonitor = {markers}/fsmonitor-never.sh\n")
    git(root, "config", "includeIf.onbranch:bernstein/*.path", "evil.inc")
    trusted(root)  # the operator trusted it as it is: the engine still runs no git here
    ticket(root, "t1", id="T1", title="Work", description="write work.txt done")
    run = _run(root)
    assert _ran(markers) == [], run.stdout + run.stderr
    said = run.stdout + run.stderr
    assert ".git/config: includeif.onbranch:bernstein/*.path" in said, said
    assert "Traceback" not in said
    assert run.returncode != 0
    assert (root / ".sdd" / "backlog" / "open" / "t1.yaml").exists()  # nothing started
    assert not list((root / ".sdd" / "worktrees").glob("*"))


def test_a_plain_include_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    root, markers = _setup(tmp_path)
    (root / ".git" / "more.inc").write_text(
        f'[filter "evil"]\n\tclean = {_marker_cmd(markers, "clean")}\n')
    git(root, "config", "include.path", "more.inc")
    trusted(root)
    ticket(root, "t1", id="T1", title="Work", description="write work.txt done")
    run = _run(root)
    lines = [line for line in (run.stdout + run.stderr).splitlines()
             if ".git/config: include.path" in line]
    assert len(lines) == 1, run.stdout + run.stderr
    assert "remove the include" in lines[0]
    assert _ran(markers) == []


def test_a_driver_whose_name_a_c_option_cannot_carry_never_runs(tmp_path: Path) -> None:
    """`-c filter.x=y.clean=` is read by git as `filter.x` = `y.clean=`: a driver named
    `x=y` (committed in .gitattributes, defined in the config) would stay live."""
    root = make_repo(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    (root / ".gitattributes").write_text("*.txt filter=x=y\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attributes")
    for key in ("clean", "smudge"):
        git(root, "config", f"filter.x=y.{key}", _marker_cmd(markers, key))
    trusted(root)
    ticket(root, "t1", id="T1", title="Work", description="write work.txt done")
    run = _run(root)
    assert _ran(markers) == [], run.stdout + run.stderr
    said = run.stdout + run.stderr
    assert ".git/config: filter.x=y.clean" in said and "'='" in said, said
    assert "Traceback" not in said


def test_drivers_named_by_attribute_files_are_switched_off_too(tmp_path: Path) -> None:
    """A driver the config does not define (yet: an agent racing the engine's read)
    but `info/attributes` or the checkout's `.gitattributes` names is switched off —
    as git treats an undefined name (no filter, a text merge, a plain diff), so the
    project's merges and diffs work as before; git's built-in drivers are left alone."""
    root = make_repo(tmp_path)
    (root / ".git" / "info" / "attributes").write_text("[attr]sneaky filter=late\n* sneaky\n")
    (root / ".gitattributes").write_text("*.txt diff=later merge=latest\n"
                                         "*.md merge=union diff=python\n")
    pairs = dict(driver_overrides(root, git_env()))
    assert pairs["filter.late.clean"] == "" and pairs["filter.late.required"] == "false"
    assert pairs["merge.latest.driver"].startswith("git merge-file ")
    assert pairs["diff.later.command"].startswith("sh -c 'diff -u ")
    assert not [k for k in pairs if k.startswith(("merge.union.", "diff.python."))]
    # and a merge through the attribute-only driver is git's own text merge
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attributes")
    (root / "notes.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "notes")
    repo = GitRepo(root)
    worktree = root / ".sdd" / "worktrees" / "T1"
    repo.add_worktree(worktree, "bernstein/T1-1")
    (worktree / "notes.txt").write_text("ONE\ntwo\nthree\nfour\nfive\n")
    repo.commit_all(worktree, "first line")
    (root / "notes.txt").write_text("one\ntwo\nthree\nfour\nFIVE\n")
    git(root, "commit", "-qam", "last line")
    merged = repo.merge("bernstein/T1-1", "Merge bernstein/T1-1: notes")
    assert merged.ok, merged.message
    assert (root / "notes.txt").read_text() == "ONE\ntwo\nthree\nfour\nFIVE\n"
    repo.remove_worktree(worktree, "bernstein/T1-1")


def test_a_gitattributes_naming_too_many_drivers_is_refused_in_one_line(tmp_path: Path
                                                                        ) -> None:
    """40,000 distinct `filter=` names (under the 1 MiB read limit) would put 320,000
    items on every engine git's command line: "Argument list too long", the engine
    stuck. Past MAX_ATTRIBUTE_DRIVERS the engine refuses, one line naming the file."""
    root = make_repo(tmp_path)
    (root / ".gitattributes").write_text("".join(f"f{i} filter=d{i}\n" for i in range(40000)))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attributes")
    trusted(root)
    ticket(root, "t1", id="T1", title="Work", description="write work.txt done")
    run = _run(root)
    said = run.stdout + run.stderr
    lines = [line for line in said.splitlines() if ".gitattributes: names more than" in line]
    assert len(lines) == 1, said
    assert "Traceback" not in said and "Argument list too long" not in said, said
    assert run.returncode != 0
    assert (root / ".sdd" / "backlog" / "open" / "t1.yaml").exists()  # nothing started
    # at the limit it still runs: each name is switched off
    (root / ".gitattributes").write_text("".join(f"f{i} filter=d{i}\n" for i in range(256)))
    pairs = dict(driver_overrides(root, git_env()))
    assert pairs["filter.d255.clean"] == ""


# -- landing through a shared remote ---------------------------------------------------


def _origin(base: Path) -> Path:
    seed = base / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("# shared\n")
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "i")
    origin = base / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(origin)], check=True)
    return origin


def _land(repo: SharedRemoteRepo, agent: object = None) -> tuple[bool, str]:
    """An attempt as the engine runs it: worktree, the agent's work (and `agent`, which
    may write the repository's git metadata as an agent can), commit, merge and push."""
    branch = "bernstein/T1-1"
    worktree = repo.root / ".sdd" / "worktrees" / "T1"
    worktree.parent.mkdir(parents=True, exist_ok=True)
    repo.add_worktree(worktree, branch)
    (worktree / "work.txt").write_text("the agent's work\n")
    if callable(agent):
        agent(worktree)
    repo.commit_all(worktree, "work of T1")
    merged = repo.merge(branch, "Merge bernstein/T1-1: work")
    repo.remove_worktree(worktree, branch)
    return merged.ok, merged.message


def test_fetch_and_push_never_run_the_remotes_upload_or_receive_pack(tmp_path: Path
                                                                      ) -> None:
    origin = _origin(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    root = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(root)], check=True)
    # a local remote's programs run here, through the shell
    git(root, "config", "remote.origin.uploadpack", f"touch {markers}/upload.ran; git-upload-pack")
    git(root, "config", "remote.origin.receivepack",
        f"touch {markers}/receive.ran; git-receive-pack")
    repo = SharedRemoteRepo(root)
    ok, message = _land(repo)
    assert ok, message
    assert _ran(markers) == []
    assert "work.txt" in git(origin, "ls-tree", "--name-only", "main")  # it did land


def test_a_local_remotes_own_hooks_never_run_when_the_engine_pushes_to_it(tmp_path: Path
                                                                        ) -> None:
    """Git does not pass the engine's `-c` options to the receive-pack (upload-pack) it
    starts for a local remote: that repository's hooks would run here, as the operator.
    A bare `evil.git` with every receive-side hook, reached as `../evil.git`: the work
    lands and none of them runs."""
    evil = _origin(tmp_path).rename(tmp_path / "evil.git")
    markers = tmp_path / "markers"
    markers.mkdir()
    hooks = ("pre-receive", "update", "post-receive", "post-update",
             "reference-transaction", "proc-receive", "push-to-checkout", "pre-auto-gc")
    for name in hooks:
        hook = evil / "hooks" / name
        hook.write_text(f"#!/bin/sh\ntouch {markers}/{name}.ran\ncat >/dev/null\n")
        hook.chmod(0o755)
    git(evil, "config", "core.fsmonitor", str(markers / "fsmonitor"))
    root = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(evil), str(root)], check=True)
    git(root, "config", "remote.origin.url", "../evil.git")
    repo = SharedRemoteRepo(root)
    ok, message = _land(repo)
    assert ok, message
    assert "work.txt" in git(evil, "ls-tree", "--name-only", "main")  # it did land
    assert _ran(markers) == []
    # the same push as git runs it without the fix: the hooks do run (the test can see)
    (root / "more.txt").write_text("more\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "m")
    git(root, "-c", "core.hooksPath=/dev/null", "push", "-q",
        "--receive-pack=git-receive-pack", "origin", "HEAD:refs/heads/main")
    assert "pre-receive.ran" in _ran(markers)


def test_the_landing_puts_back_what_an_agent_wrote_into_the_git_config_first(
        tmp_path: Path) -> None:
    """The agent points `origin` at a repository of its own and plants an fsmonitor and
    hooks: the landing's fetch, merge and push happen with the config as it was before
    the agent ran — nothing runs, nothing goes to the agent's repository."""
    origin = _origin(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    exfil = tmp_path / "exfil.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(exfil)], check=True)
    root = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(root)], check=True)
    repo = SharedRemoteRepo(root)
    notes: list[str] = []
    repo.on_note = notes.append
    before = (root / ".git" / "config").read_bytes()
    exfil_refs = git(exfil, "for-each-ref")

    def agent(worktree: Path) -> None:
        hook = markers / "hook.sh"
        hook.write_text(f"#!/bin/sh\ntouch {markers}/hook.ran\n")
        hook.chmod(0o755)
        for key, value in (("remote.origin.url", str(exfil)),
                           ("core.fsmonitor", str(hook)),
                           ("core.hooksPath", str(markers)),
                           ("include.path", str(markers / "nothing.inc"))):
            subprocess.run(["git", "config", key, value], cwd=worktree, check=True)
        for name in ("pre-push", "post-merge", "reference-transaction"):
            (markers / name).write_text(f"#!/bin/sh\ntouch {markers}/{name}.ran\n")
            (markers / name).chmod(0o755)

    ok, message = _land(repo, agent)
    assert ok, message
    assert _ran(markers) == []
    assert "work.txt" in git(origin, "ls-tree", "--name-only", "main")  # landed on origin
    assert git(exfil, "for-each-ref") == exfil_refs  # and nothing went elsewhere
    assert (root / ".git" / "config").read_bytes() == before
    said = [n for n in notes if "changed the repository's git metadata" in n]
    assert said and "remote.origin.url" in said[0] and "\n" not in said[0], notes


INCLUDING_AGENT = r'''
import os, subprocess, sys
markers = sys.argv[1]
with open(os.path.join(markers, "evil.inc"), "w") as handle:
    handle.write('[filter "evil"]\n\tclean = sh -c "touch %s/clean.ran; cat"\n' % markers)
for key, value in (("include.path", os.path.join(markers, "evil.inc")),
                   ("core.fsmonitor", os.path.join(markers, "nothing"))):
    subprocess.run(["git", "config", key, value], check=True)
with open(".gitattributes", "w") as handle:
    handle.write("* filter=evil\n")
with open("work.txt", "w") as handle:
    handle.write("the agent's work\n")
print("planted")
'''


def test_an_agents_include_is_put_back_before_the_engine_commits_its_work(tmp_path: Path
                                                                          ) -> None:
    """A real attempt: the agent adds an include (and an fsmonitor) to the shared config.
    The engine's next step (its commit of the work, then the merge) finds the config as
    it was: the work lands, nothing runs, and the operator is told."""
    root = make_repo(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    agent = tmp_path / "including_agent.py"
    agent.write_text(INCLUDING_AGENT)
    config = root / "bernstein.yaml"
    text = config.read_text().replace(
        f"[{json.dumps(sys.executable)}, {json.dumps(str(SPEC_AGENT))}]",
        json.dumps([sys.executable, str(agent), str(markers)]))
    config.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "project set up")
    trusted(root)
    before = (root / ".git" / "config").read_bytes()
    ticket(root, "t1", id="T1", title="Include", description="plant an include",
           completion_signals=[{"type": "path_exists", "path": "work.txt"}])
    run = _run(root)
    task = tasks(root)["T1"]
    assert task.status == "done", (task.status, task.result_summary, run.stderr)
    assert (root / "work.txt").read_text() == "the agent's work\n"
    assert _ran(markers) == []
    assert (root / ".git" / "config").read_bytes() == before
    notes = [m for m in _events(root) if "changed the repository's git metadata" in m]
    assert notes and "include.path" in notes[0], _events(root)


def test_what_an_agent_adds_to_its_worktrees_own_admin_dir_is_removed_first(
        tmp_path: Path) -> None:
    """`git config --worktree` writes `.git/worktrees/<name>/config.worktree`, which only
    that worktree's git reads: removed before the engine commits the agent's work (its
    drivers are switched off in any case)."""
    root = make_repo(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    repo = GitRepo(root)
    notes: list[str] = []
    repo.on_note = notes.append
    worktree = root / ".sdd" / "worktrees" / "T1"
    repo.add_worktree(worktree, "bernstein/T1-1")
    for args in (("extensions.worktreeConfig", "true"),
                 ("--worktree", "filter.wt.clean", _marker_cmd(markers, "clean"))):
        subprocess.run(["git", "config", *args], cwd=worktree, check=True)
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    assert (admin / "config.worktree").is_file()
    (worktree / ".gitattributes").write_text("* filter=wt\n")
    (worktree / "work.txt").write_text("work\n")
    files = repo.commit_all(worktree, "work")
    assert set(files) == {".gitattributes", "work.txt"}
    assert _ran(markers) == []
    assert not (admin / "config.worktree").exists()
    assert any("worktrees/T1/config.worktree added" in n for n in notes), notes
    assert any("extensions.worktreeconfig" in n for n in notes), notes
    repo.remove_worktree(worktree, "bernstein/T1-1")


def test_a_non_bare_local_remote_never_checks_out_the_push_through_its_filters(
        tmp_path: Path) -> None:
    """`receive.denyCurrentBranch=updateInstead` in a non-bare local remote makes its
    receive-pack check the pushed branch out there, through that repository's own
    smudge and clean filters: the engine's push is refused instead, in one line."""
    markers = tmp_path / "markers"
    markers.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / ".gitattributes").write_text("* filter=ev\n")
    (work / "README.md").write_text("# shared\n")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "i")
    git(work, "config", "receive.denyCurrentBranch", "updateInstead")
    for key in ("smudge", "clean"):
        git(work, "config", f"filter.ev.{key}", _marker_cmd(markers, key))
    root = tmp_path / "clone"
    subprocess.run(["git", "-c", "filter.ev.smudge=cat", "clone", "-q", str(work), str(root)],
                   check=True)
    repo = SharedRemoteRepo(root)
    ok, message = _land(repo)
    assert _ran(markers) == [], message
    assert not ok and message.startswith("push to origin failed:"), message
    assert "\n" not in message


def test_only_ssh_remotes_get_the_plain_pack_program_a_forge_accepts() -> None:
    from console.engine.shared_remote import over_ssh
    for url in ("git@github.com:o/r.git", "host:r", "ssh://git@h/r", "git+ssh://h/r",
                "[git@h:22]:r"):
        assert over_ssh(url), url
    for url in ("../evil.git", "/srv/r.git", "file:///srv/r.git", "./a:b", "r.git",
                "https://h/r.git"):
        assert not over_ssh(url), url


def test_clearing_a_worktrees_admin_dir_never_removes_through_a_link(tmp_path: Path
                                                                      ) -> None:
    """`.git/worktrees` (or `.git/worktrees/<name>`) turned into a link to another
    repository's admin dirs: the engine's clean-up of the agent's `config.worktree`
    must not remove that repository's file through it."""
    root = make_repo(tmp_path)
    repo = GitRepo(root)
    notes: list[str] = []
    repo.on_note = notes.append
    worktree = root / ".sdd" / "worktrees" / "T1"
    repo.add_worktree(worktree, "bernstein/T1-1")
    admin = root / ".git" / "worktrees" / "T1"
    elsewhere = tmp_path / "other-repo-admin"
    (elsewhere / "T1" / "info").mkdir(parents=True)
    victims = [elsewhere / "T1" / "config.worktree", elsewhere / "T1" / "info" / "attributes"]
    for victim in victims:
        victim.write_text("someone else's\n")
    real = root / ".git" / "worktrees-real"
    (root / ".git" / "worktrees").rename(real)
    (root / ".git" / "worktrees").symlink_to(elsewhere)
    repo.check_meta(worktree)
    assert all(victim.read_text() == "someone else's\n" for victim in victims)
    assert any("worktrees/T1 is not a plain directory" in n for n in notes), notes
    # and the admin dir itself made a link
    (root / ".git" / "worktrees").unlink()
    real.rename(root / ".git" / "worktrees")
    admin.rename(tmp_path / "T1-admin")
    admin.symlink_to(elsewhere / "T1")
    repo.check_meta(worktree)
    assert all(victim.read_text() == "someone else's\n" for victim in victims)
    admin.unlink()
    (tmp_path / "T1-admin").rename(admin)
    (admin / "config.worktree").write_text("[core]\n\tbare = false\n")
    repo.check_meta(worktree)  # the real one, reached safely, is still removed
    assert not (admin / "config.worktree").exists()
    repo.remove_worktree(worktree, "bernstein/T1-1")
