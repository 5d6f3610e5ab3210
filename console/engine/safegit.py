"""Git as the engine runs it: a minimal environment and no repository-controlled execution.

`.git/config` is data: an agent in its worktree can write the shared config, and
git would then run what it names (fsmonitor, hooks, filter and merge drivers,
external diff, textconv, pager, credential helpers, signing programs) with the
environment of whoever runs git. So every git command the engine runs

- gets only PATH, HOME, the locale and the project marker (no API keys, tokens or
  cloud credentials; no inherited GIT_* either), with system and global config off;
- carries `-c` overrides that switch off every config key that runs a program, and
  neutralises every filter, merge and diff driver the config files git reads there
  define, and every one the repository's attribute files name (their names are free,
  so they are read first: a driver added between that read and the command is the
  one window left, and the config guard restores it before the engine's next step);
- is refused, with one line naming the file and key, in a repository whose config
  includes another file (`include.path`, `includeIf.<condition>.path`): what an
  include sets can depend on the branch or worktree git runs in, so it is never
  followed, and a driver whose name a `-c` cannot carry (it holds `=`) is refused too,
  as is an attribute file naming more than MAX_ATTRIBUTE_DRIVERS drivers (each takes
  `-c` options: tens of thousands would make every git's command line too long) or
  that is over ATTRIBUTES_MAX or no regular file.

GitPython cannot do this (`Git.execute` merges os.environ into every command), so
git runs here through subprocess with an explicit environment.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from console.engine.orphans import PROJECT_MARKER
from console.sdd.fileio import read_regular_file
from console.sdd.repo_config import is_include

ENV_KEEP = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME")

# config keys that make git run a program, each set to something that runs nothing
SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),  # no hook can exist under /dev/null
    ("core.sshCommand", "false"),
    ("core.gitProxy", "false"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("protocol.ext.allow", "never"),
    ("submodule.recurse", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
    ("core.alternateRefsCommand", "true"),  # prints no refs
    ("core.attributesFile", os.devnull),  # attributes only from the repository itself
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("merge.stat", "false"),
    ("maintenance.auto", "false"),
    ("gc.auto", "0"),
)
# content diffs: no external diff program (diff.external, diff.<driver>.command) or textconv
NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")

_DRIVER = re.compile(r"^(filter|merge|diff)\.(.+)\.(clean|smudge|process|driver|textconv|command)$",
                     re.IGNORECASE | re.DOTALL)


class GitFailed(Exception):
    """A git command exited non-zero; `line` is its last line of output."""

    def __init__(self, args: Sequence[str], code: int, stderr: str, stdout: str = "") -> None:
        self.code = code
        self.stderr = stderr
        self.stdout = stdout
        text = (stderr or stdout).strip()
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        self.line = lines[-1] if lines else f"git {args[0] if args else ''} exited {code}"
        super().__init__(self.line)


def git_env(marker: Path | str | None = None, source: Mapping[str, str] | None = None
            ) -> dict[str, str]:
    """The whole environment of an engine git: nothing else from ours reaches it."""
    src = os.environ if source is None else source
    env = {k: v for k, v in src.items() if k in ENV_KEEP}
    env.setdefault("PATH", os.defpath)
    env.update({"LC_ALL": "C", "LANGUAGE": "C", "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
                "GIT_PAGER": "cat", "PAGER": "cat", "GIT_EDITOR": "true"})
    if marker is not None:
        env[PROJECT_MARKER] = str(marker)
    return env


def options(pairs: Sequence[tuple[str, str]]) -> list[str]:
    out = []
    for key, value in pairs:
        out += ["-c", f"{key}={value}"]
    return out


class GitRefused(GitFailed):
    """The repository's config is one the engine runs no git in; `line` names the file
    and the key."""

    def __init__(self, line: str) -> None:
        super().__init__(["config"], -1, line)


#: attribute files are data: read this much of each, no more
ATTRIBUTES_MAX = 1024 * 1024
#: distinct drivers named only in attribute files, and defined in the config, that the
#: engine switches off: past these it runs no git in the repository
MAX_ATTRIBUTE_DRIVERS = 256
MAX_CONFIG_DRIVERS = 1024
_ATTR_DRIVER = re.compile(rb"(?:^|\s)(filter|merge|diff)=(\S+)")


#: drivers git has built in: an attribute naming one is ordinary (`merge=union`,
#: `diff=python`); they are switched off only when the config redefines them
BUILT_IN = {"merge": frozenset({"text", "binary", "union"}),
            "diff": frozenset({"ada", "bash", "bibtex", "cpp", "csharp", "css", "dts",
                               "elixir", "fortran", "fountain", "golang", "html", "java",
                               "kotlin", "markdown", "matlab", "objc", "pascal", "perl",
                               "php", "python", "ruby", "rust", "scheme", "tex"}),
            "filter": frozenset()}
#: the 3-way text merge git does for a driver name no config defines, by git itself
TEXT_MERGE = "git merge-file --marker-size=%L %A %O %B"
#: a child's git cannot be given --no-ext-diff, so its external diff is plain diff(1):
#: the unified diff of the two versions git hands it (path, old file, …, new file, …)
PLAIN_DIFF = "sh -c 'diff -u --label \"a/$1\" --label \"b/$1\" -- \"$2\" \"$5\" || true' --"


def _neutralise(kind: str, name: str, defined: bool) -> list[tuple[str, str]]:
    """Pairs that leave driver `name` running no program. A name only attribute files
    give (`defined` False) behaves as git treats an undefined one: no filter, a text
    merge, a plain diff; one the config defines runs none of what it says."""
    if kind == "filter":  # an empty command is no filter; not required, so no error
        return [*((f"filter.{name}.{k}", "") for k in ("clean", "smudge", "process")),
                (f"filter.{name}.required", "false")]
    if kind == "merge":  # a defined one merges as a conflict instead of running a program
        return [(f"merge.{name}.driver", "false"), (f"merge.{name}.recursive", "binary")] \
            if defined else [(f"merge.{name}.driver", TEXT_MERGE)]
    # content diffs also pass NO_DIFF_PROGRAMS; an identity textconv runs nothing
    return [*([(f"diff.{name}.textconv", "cat")] if defined else []),
            (f"diff.{name}.command", PLAIN_DIFF)]


def _shown(path: Path, cwd: Path) -> str:
    return os.path.relpath(path, cwd) if path.is_relative_to(cwd) else str(path)


def _attribute_names(files: Sequence[Path], cwd: Path, defined: set[tuple[str, str]]
                     ) -> set[tuple[str, str]]:
    """The driver names these attribute files (and their macros) refer to that neither
    git builds in nor the config defines. GitRefused, naming the file, when one cannot be
    read as a whole or they name more than MAX_ATTRIBUTE_DRIVERS: each is switched off
    on git's command line, and that many would make it too long for any git to start."""
    found: set[tuple[str, str]] = set()
    for path in files:
        tracked = path.name == ".gitattributes"  # git reads a link there as no file
        if tracked and path.is_symlink():
            continue
        shown = _shown(path, cwd)
        data, problem = read_regular_file(path, shown, ATTRIBUTES_MAX, follow=not tracked)
        if problem is not None:
            raise GitRefused(f"{problem} — the engine runs no git in this repository "
                             "until it is a regular file it can read")
        for match in _ATTR_DRIVER.finditer(data or b""):
            kind, name = match[1].decode(), match[2].decode("utf-8", "surrogateescape")
            # a name holding '=' no config can define for a -c to be needed
            if "=" in name or name in BUILT_IN[kind] or (kind, name) in defined:
                continue
            found.add((kind, name))
            if len(found) > MAX_ATTRIBUTE_DRIVERS:
                raise GitRefused(
                    f"{shown}: names more than {MAX_ATTRIBUTE_DRIVERS} filter, merge and "
                    "diff drivers — the engine switches each off on git's command line "
                    "and runs no git in this repository while there are that many; "
                    "remove the extra attributes")
    return found


def _config_entries(cwd: Path, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(file, key) of every setting in the config files git reads in `cwd`, includes
    not followed (the command line's own left out)."""
    try:
        listed = subprocess.run(["git", *options(SAFE_CONFIG), "config", "--list", "-z",
                                 "--no-includes", "--show-origin"], cwd=cwd, env=dict(env),
                                capture_output=True, stdin=subprocess.DEVNULL, timeout=30,
                                check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    fields = listed.stdout.decode("utf-8", "surrogateescape").split("\0")
    out = []
    for origin, entry in zip(fields[0::2], fields[1::2], strict=False):
        if origin.startswith("file:"):
            out.append((origin.removeprefix("file:"), entry.split("\n", 1)[0]))
    return out


def driver_overrides(cwd: Path, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """`-c` pairs that switch off every filter, merge and diff driver the config git reads
    in `cwd` defines, and every one the repository's attributes name (`info/attributes`,
    the checkout's top `.gitattributes`). GitRefused when that config includes another
    file, or defines a driver no `-c` can name."""
    names: set[tuple[str, str]] = set()
    common: Path | None = None
    for where, key in _config_entries(cwd, env):
        if is_include(key):
            raise GitRefused(f"{where}: {key} — the engine runs no git in a repository "
                             "whose config includes another file (what it sets can "
                             "depend on the branch); remove the include")
        if Path(where).name == "config" and common is None:
            common = (cwd / where).parent
        match = _DRIVER.match(key)
        if match is None:
            continue
        if "=" in match[2]:
            raise GitRefused(f"{where}: {key} — a driver name holding '=' cannot be "
                             "switched off; the engine runs no git in this repository")
        names.add((match[1].lower(), match[2]))
        if len(names) > MAX_CONFIG_DRIVERS:
            raise GitRefused(f"{where}: defines more than {MAX_CONFIG_DRIVERS} filter, "
                             "merge and diff drivers — the engine runs no git in this "
                             "repository while there are that many")
    attributes = [cwd / ".gitattributes"]
    if common is not None:
        attributes.append(common / "info" / "attributes")
    named = _attribute_names(attributes, cwd, names)
    pairs: list[tuple[str, str]] = []
    for kind, name in sorted(names):
        pairs += _neutralise(kind, name, True)
    for kind, name in sorted(named):
        pairs += _neutralise(kind, name, False)
    return pairs


#: what a child program's own git keeps: it may fetch (a project's tests, an agent)
CHILD_KEEPS = frozenset({"protocol.allow"})


def child_env(env: Mapping[str, str], cwd: Path) -> dict[str, str]:
    """`env` for a program that may run git itself (a gate tool, the project's tests in
    a sandbox, an agent): the same overrides, through git's `GIT_CONFIG_COUNT` variables
    (git >= 2.31), which every git it starts applies at command-line precedence; the
    system config off. Inherited `GIT_CONFIG_*` are dropped, never merged."""
    pairs = [(k, v) for k, v in SAFE_CONFIG if k not in CHILD_KEEPS]
    pairs += [("diff.external", PLAIN_DIFF), *driver_overrides(cwd, git_env())]
    out = {k: v for k, v in env.items() if not k.startswith("GIT_CONFIG_")}
    out.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": str(len(pairs))})
    for index, (key, value) in enumerate(pairs):
        out[f"GIT_CONFIG_KEY_{index}"] = key
        out[f"GIT_CONFIG_VALUE_{index}"] = value
    return out


def git_argv(cwd: Path, args: Sequence[str], env: Mapping[str, str] | None = None, *,
             work_tree: bool = True) -> list[str]:
    """`git` with every override for a command run in the checkout `cwd`. The work tree
    is named, so a `core.worktree` planted in the config cannot point git's checkout,
    merge or reset at a directory outside the project (work_tree=False only to find out
    whether `cwd` is a checkout at all)."""
    overrides = driver_overrides(cwd, env if env is not None else git_env())
    where = [f"--work-tree={cwd}"] if work_tree else []
    return ["git", "--no-pager", *where, *options([*SAFE_CONFIG, *overrides]), *args]


def run_git(args: Sequence[str], cwd: Path, *, marker: Path | str | None = None,
            timeout_s: float | None = None, work_tree: bool = True,
            pass_env: Sequence[str] = ()) -> str:
    """Run one git command safely; its stdout, or GitFailed with its last line.
    `pass_env`: more of our environment's names it gets (SSH_AUTH_SOCK for a push)."""
    env = git_env(marker)
    env.update({k: os.environ[k] for k in pass_env if k in os.environ})
    try:
        done = subprocess.run(git_argv(cwd, args, env, work_tree=work_tree), cwd=cwd, env=env,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        raise GitFailed(args, -1, f"git {args[0]} timed out after {timeout_s:.0f} s") from None
    except OSError as exc:
        raise GitFailed(args, -1, f"cannot run git: {exc.strerror or exc}") from None
    stdout = done.stdout.decode("utf-8", "surrogateescape").removesuffix("\n")
    if done.returncode != 0:
        raise GitFailed(args, done.returncode, done.stderr.decode("utf-8", "replace"), stdout)
    return stdout
