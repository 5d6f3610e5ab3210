"""#15 part 3: an agent that writes the shared repository's git config, hooks and
attributes cannot get the engine's own git to run anything, and what it wrote does not
outlive its attempt; the engine's secrets never reach a git process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from console.sdd.tail import JsonlTail
from tests.engine_kit import SPEC_AGENT, git, make_repo, tasks, ticket

CANARY = "sk-secret-canary"

# Run in its worktree by the engine. Every program it plants appends its environment to
# a file in MARKERS (outside the project): any such file existing means it ran.
HOSTILE_AGENT = r'''
import json, os, subprocess, sys
task = json.load(sys.stdin)
markers = sys.argv[1]
def dump(name):
    return f"sh -c 'env > {markers}/{name}.env; cat' --"
def config(key, value):
    subprocess.run(["git", "config", key, value], check=True)
hooks = os.path.join(markers, "hooks")  # outside the project: the agent's own hooks dir
os.makedirs(hooks, exist_ok=True)
for name in ("pre-commit", "post-commit", "pre-merge-commit", "post-merge", "post-checkout",
             "commit-msg", "reference-transaction", "post-rewrite"):
    path = os.path.join(hooks, name)
    with open(path, "w") as handle:
        handle.write(f"#!/bin/sh\nenv > {markers}/hook-{name}.env\n")
    os.chmod(path, 0o755)
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], check=True,
                        capture_output=True, text=True).stdout.strip()
shared_hook = os.path.join(common, "hooks", "post-merge")  # planted in the shared repo too
with open(shared_hook, "w") as handle:
    handle.write(f"#!/bin/sh\nenv > {markers}/shared-post-merge.env\n")
os.chmod(shared_hook, 0o755)
with open(".gitattributes", "w") as handle:
    handle.write("* filter=evil diff=evil merge=evil\n")
with open("work.txt", "w") as handle:
    handle.write("the agent's work\n")
config("core.fsmonitor", f"{markers}/fsmonitor.sh")
with open(f"{markers}/fsmonitor.sh", "w") as handle:
    handle.write(f"#!/bin/sh\nenv > {markers}/fsmonitor.env\n")
os.chmod(f"{markers}/fsmonitor.sh", 0o755)
config("core.hooksPath", hooks)
config("filter.evil.clean", dump("filter-clean"))
config("filter.evil.smudge", dump("filter-smudge"))
config("filter.evil.required", "true")
config("diff.external", dump("diff-external"))
config("diff.evil.command", dump("diff-command"))
config("diff.evil.textconv", dump("textconv"))
config("merge.evil.driver", dump("merge-driver"))
config("core.pager", dump("pager"))
elsewhere = os.path.join(markers, "elsewhere")  # the engine's merge must not write here
os.makedirs(elsewhere, exist_ok=True)
config("core.worktree", elsewhere)
print("planted")
'''


def _use_agent(root: Path, script: Path, *args: str) -> None:
    """Swap make_repo's spec agent for `script` in bernstein.yaml (and re-trust the
    project where the build knows `trust`: the agent command is part of what is trusted)."""
    config = root / "bernstein.yaml"
    argv = [sys.executable, str(script), *args]
    text = config.read_text().replace(
        f"[{json.dumps(sys.executable)}, {json.dumps(str(SPEC_AGENT))}]", json.dumps(argv))
    assert str(script) in text
    config.write_text(text)
    retrust(root)


def retrust(root: Path) -> None:
    probe = subprocess.run([sys.executable, "-m", "console", "trust", "--help"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        subprocess.run([sys.executable, "-m", "console", "-C", str(root), "trust"],
                       capture_output=True, text=True, check=True)


def _git_wrapper(bin_dir: Path, log: Path) -> None:
    """A `git` first on PATH that records the environment of every git process, then runs
    the real one: what each git child of the engine (and its agents) was given."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True,
                          check=True).stdout.strip()
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f"#!/bin/sh\n{{ echo '--- git' \"$@\"; env; }} >> '{log}'\n"
                       f"exec '{real}' \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)


def test_an_agents_git_config_runs_nothing_in_the_engine_and_is_put_back(tmp_path: Path
                                                                         ) -> None:
    root = make_repo(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    agent = tmp_path / "hostile_agent.py"
    agent.write_text(HOSTILE_AGENT)
    _use_agent(root, agent, str(markers))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "project set up")
    config_before = (root / ".git" / "config").read_bytes()
    hooks_before = sorted(p.name for p in (root / ".git" / "hooks").iterdir())
    ticket(root, "t1", id="T1", title="Hostile", description="plant things",
           completion_signals=[{"type": "path_exists", "path": "work.txt"}])
    git_log = tmp_path / "git-env.log"
    _git_wrapper(tmp_path / "bin", git_log)
    env = {**os.environ, "OPENAI_API_KEY": CANARY, "AWS_SECRET_ACCESS_KEY": CANARY,
           "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                          "--until-idle"], capture_output=True, text=True, env=env,
                         timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    agent_output = "".join(p.read_text() for p in (root / ".sdd" / "runtime").glob("*.log"))
    assert "planted" in agent_output  # the agent did plant everything

    task = tasks(root)["T1"]
    assert task.status == "done", (task.status, task.result_summary)
    assert (root / "work.txt").read_text() == "the agent's work\n"  # merged, no filter ran
    ran = sorted(p.name for p in markers.glob("*.env"))
    assert ran == [], f"repository-controlled programs ran: {ran}"
    assert list((markers / "elsewhere").iterdir()) == []  # core.worktree not followed
    # put back as it was: the config byte for byte, the planted shared hook removed
    assert (root / ".git" / "config").read_bytes() == config_before
    assert sorted(p.name for p in (root / ".git" / "hooks").iterdir()) == hooks_before
    events = [r["message"] for _, r in JsonlTail(
        root / ".sdd" / "runtime" / "engine_events.jsonl").read().records]
    notes = [m for m in events if "changed the repository's git metadata" in m]
    assert len(notes) == 1, events
    for key in ("core.fsmonitor", "core.hookspath", "core.worktree", "filter.evil.clean",
                "diff.external", "merge.evil.driver", "hooks/post-merge added"):
        assert key in notes[0], notes[0]
    assert "\n" not in notes[0]
    # every git process the engine started got no secret (the agent's own, neither)
    logged = git_log.read_text()
    assert logged.count("--- git") >= 5
    assert CANARY not in logged
    # the user's own git after the run runs none of it either
    (root / "README.md").write_text("after\n")
    git(root, "commit", "-qam", "operator commits")
    assert sorted(p.name for p in markers.glob("*.env")) == []


LINKING_AGENT = r'''
import os, shutil, subprocess
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], check=True,
                        capture_output=True, text=True).stdout.strip()
hooks = os.path.join(common, "hooks")
shutil.rmtree(hooks)
os.symlink(os.environ["VICTIM_DIR"], hooks)  # the shared hooks dir now points outside
with open("work.txt", "w") as handle:
    handle.write("done\n")
'''


def test_a_hooks_dir_turned_into_a_link_is_never_followed(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    victim = tmp_path / "victim"  # stands for the operator's home
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me\n")
    agent = tmp_path / "linking_agent.py"
    agent.write_text(LINKING_AGENT.replace('os.environ["VICTIM_DIR"]', repr(str(victim))))
    _use_agent(root, agent)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "project set up")
    ticket(root, "t1", id="T1", title="Links", description="link the hooks dir")
    run = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                          "--until-idle"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (victim / "precious.txt").read_text() == "keep me\n"  # nothing removed through it
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    hooks = root / ".git" / "hooks"
    assert hooks.is_dir() and not hooks.is_symlink()
    assert any(p.name.endswith(".sample") for p in hooks.iterdir())  # git's samples back
    events = [r["message"] for _, r in JsonlTail(
        root / ".sdd" / "runtime" / "engine_events.jsonl").read().records]
    assert any("hooks/ was made a link" in m for m in events), events


def test_the_gates_command_runs_no_program_the_repository_config_names(tmp_path: Path
                                                                        ) -> None:
    root = make_repo(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    (root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attributes")
    (root / "README.md").write_text("# changed\n")  # a working-tree diff for the gates
    (root / "new.py").write_text("x = 1\n")
    dump = f"sh -c 'env > {markers}/{{}}.env; cat' --"
    for key, name in (("core.fsmonitor", "fsmonitor"), ("filter.evil.clean", "clean"),
                      ("filter.evil.smudge", "smudge"), ("diff.external", "external"),
                      ("diff.evil.textconv", "textconv"), ("core.pager", "pager")):
        git(root, "config", key, dump.format(name))
    retrust(root)  # the git config is part of what is trusted (#32): trusted, it still runs nothing
    env = {**os.environ, "OPENAI_API_KEY": CANARY}
    run = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "gates", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.stdout.strip().startswith("{"), run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["results"], report  # the gates did look at the diff
    assert sorted(p.name for p in markers.glob("*.env")) == []
