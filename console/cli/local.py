"""The commands on a local project: `bernstein-tui [-C DIR] COMMAND` (DESIGN §2)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.actions import ACTIONS, dispatch_action, resolve_targets
from console.cli.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    print_json,
    say,
)
from console.cli.owner import before_local_write

if TYPE_CHECKING:
    from console.cli.detach import Detacher
    from console.sdd.state import State


def _project(directory: str) -> Path:
    root = Path(directory).expanduser()
    if not root.exists():
        raise UsageError(f"-C {directory}: no such directory")
    if not root.is_dir():
        raise UsageError(f"-C {directory}: not a directory")
    return root.resolve()


def cmd_status(root: Path, as_json: bool) -> int:
    from console.sdd.source import LocalSource
    from console.sdd.summary import summarise

    source = LocalSource(root)
    if not source.exists:
        raise UsageError(f"{root}: no .sdd/ directory here "
                         f"(create one with: bernstein-tui -C {root} init)")
    source.load()
    summary = summarise(source.state)
    add_missions(summary, root, source.state)
    if as_json:
        print_json(summary)
    else:
        from console.cli.views import print_status

        print_status(summary, str(root))
    sys.stdout.flush()
    source.save_checkpoint()  # after the answer: the next status starts warm
    return EXIT_OK


def add_missions(summary: dict[str, object], root: Path, state: State) -> None:
    """`missions` (each with its gates, halted or not) and Polpo's `quality` metrics per
    task, agent and mission; a bernstein.yaml that cannot be read gives no missions and
    says why in `missions_problems`."""
    from console.sdd.mission_view import mission_task_ids, missions_view
    from console.sdd.missions import load_missions
    from console.sdd.paths import SddPaths
    from console.sdd.project_config import ConfigError, load_config
    from console.sdd.quality_metrics import quality_metrics

    problems: list[str] = []
    try:
        missions, problems = load_missions(SddPaths(root),
                                           load_config(root).raw.get("missions"))
    except ConfigError as exc:
        missions, problems = [], [str(exc)]
    summary["missions"] = missions_view(missions, state)
    summary["missions_problems"] = problems
    summary["quality"] = quality_metrics(state, mission_task_ids(missions, state))


def cmd_init(root: Path) -> int:
    from console.sdd.skeleton import init_project

    # a fresh project only: a bernstein.yaml, .bernstein/ or .sdd/ (tickets) already here
    # came from someone else, and is trusted with `trust` once read
    fresh = not any(os.path.lexists(root / name) for name in ("bernstein.yaml", ".bernstein",
                                                              ".sdd"))
    created = init_project(root)
    if created:
        print(f"created in {root}:")
        for path in created:
            print(f"  {path}")
    else:
        print(f"{root}: .sdd/ and bernstein.yaml already exist; nothing changed")
    if fresh:  # its only configuration is the one just written
        from console.cli.trust import record_trust

        record_trust(root, "init wrote its bernstein.yaml")
    return EXIT_OK


def cmd_run(root: Path, workers: int | None, until_idle: bool, exit_zero: bool = False
            ) -> int:
    from console.cli.views import run_headless
    from console.engine.errors import EngineError
    from console.sdd.project_config import ConfigError

    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    try:
        engine, interrupted = run_headless(root, workers=workers, until_idle=until_idle)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    except EngineError as exc:
        say(f"bernstein-tui: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:  # the engine could not even start writing (a full disk)
        say(f"bernstein-tui: cannot write .sdd/: {exc.strerror or exc} "
            f"({exc.filename or root})", sys.stderr)
        return EXIT_FAILED
    if engine.writes.problem is not None:  # a full disk: stopped, not idle
        say(f"bernstein-tui: {engine.writes.problem}", sys.stderr)
        return EXIT_FAILED
    if interrupted and until_idle:
        return EXIT_INTERRUPTED  # idle never reached
    if until_idle and not exit_zero:
        from console.model import TaskState

        return failed_exit([t.id for t in engine.store.snapshot()
                            if t.state is TaskState.FAILED])
    return EXIT_OK


def failed_exit(failed: list[str]) -> int:
    """`run --until-idle`'s code: 1, saying which, when tasks ended failed (CI reads it;
    --exit-zero keeps 0)."""
    if not failed:
        return EXIT_OK
    shown = ", ".join(sorted(failed)[:10]) + (f" and {len(failed) - 10} more"
                                              if len(failed) > 10 else "")
    say(f"bernstein-tui: {len(failed)} task{'s' if len(failed) != 1 else ''} failed: "
        f"{shown} (exit 1; --exit-zero exits 0)", sys.stderr)
    return EXIT_FAILED


def cmd_gates(root: Path, as_json: bool) -> int:
    from console.engine.gates.base import ToolMissing, tool_environ
    from console.engine.gates.cache import GateCache
    from console.engine.gates.pipeline import GatePipeline, load_gate_setup
    from console.engine.gates.plugins import PluginError
    from console.engine.llm import LlmClient
    from console.engine.safegit import GitFailed, GitRefused, run_git
    from console.sdd.gate_config import GateConfigError
    from console.sdd.gate_records import write_gate_run
    from console.sdd.metric_codec import encode_gate_report
    from console.sdd.paths import SddPaths
    from console.sdd.project_config import ConfigError, load_config

    try:  # the engine's safe git: minimal environment, no repository-run programs
        run_git(["rev-parse", "--absolute-git-dir"], root, work_tree=False)
    except GitRefused as exc:
        raise UsageError(f"gates refused: {exc.line}") from None
    except (GitFailed, OSError):
        raise UsageError(f"{root} is not a git repository; gates run on its working-tree "
                         "diff") from None
    try:
        config = load_config(root)
        setup = load_gate_setup(root, config.raw.get("quality_gates"))
    except (ConfigError, GateConfigError, PluginError) as exc:
        raise UsageError(str(exc)) from None
    paths = SddPaths(root)
    state = paths.sdd / "caching"  # the run is recorded in .sdd/ too, as the engine's are
    # project code (its tests): the engine's gates' environment, no key or token of ours
    pipeline = GatePipeline(setup, LlmClient(config.llm),
                            cache=GateCache(state / "gates", setup.config.cache_max_entries),
                            state_dir=state, env=tool_environ(),
                            log_dir=paths.sdd / "runtime" / "gate-logs")
    base_ref = setup.config.base_ref or "HEAD"
    try:
        run = pipeline.run(root, task_id="working-tree", title="working tree changes",
                           base_ref=base_ref)
    except ToolMissing as exc:
        raise UsageError(f"cannot diff against base_ref '{base_ref}': {exc}") from None
    try:  # recorded like the engine's runs, so the console and `status` see it
        write_gate_run(paths, run.report)
    except OSError as exc:
        say(f"bernstein-tui: gate run not recorded in {paths.sdd}/metrics: "
            f"{exc.strerror or exc}", file=sys.stderr)
    if as_json:
        print_json(encode_gate_report(run.report))
    else:
        from console.cli.views import print_report

        print_report(run.report)
    return EXIT_OK if run.report.overall_pass else EXIT_FAILED


def cmd_proposals(root: Path, as_json: bool) -> int:
    from console.sdd.source import LocalSource

    source = LocalSource(root)
    if not source.exists:
        raise UsageError(f"{root}: no .sdd/ directory here")
    source.load()
    state = source.state
    pending = set(state.pending_proposals())
    rows = []
    for pid in sorted(set(state.proposals) | set(state.decisions)):
        proposal = state.proposals.get(pid)
        last = state.decisions[pid][-1] if state.decisions.get(pid) else None
        rows.append({
            "proposal_id": pid, "pending": pid in pending,
            "title": proposal.title if proposal else "",
            "risk_level": (proposal.risk_level if proposal and proposal.risk_level
                           else last.risk_level if last else None),
            "confidence": proposal.confidence if proposal else (last.confidence if last else None),
            "outcome": last.shown_outcome if last else None,
            "reviewer": last.reviewer if last else None,
            "reason": last.reason if last else (proposal.reason if proposal else ""),
            "target_files": list(proposal.target_files) if proposal else [],
            "has_diff": bool(proposal and proposal.diff),
        })
    if as_json:
        print_json(rows)
        return EXIT_OK
    from console.cli.views import print_proposals

    print_proposals(rows)
    return EXIT_OK


def cmd_action(root: Path, args: argparse.Namespace) -> int:
    from console.engine.control import local_control
    from console.engine.errors import OwnedElsewhere

    resolve_targets(args, lambda what: local_ids(root, what))
    try:
        control = local_control(root)
    except OwnedElsewhere as exc:
        raise UsageError(str(exc)) from None
    return dispatch_action(control, args)


def local_ids(root: Path, what: str) -> set[str]:
    """The task ids in the task log, or the proposal ids (deferred and decided)."""
    from console.sdd.paths import Kind
    from console.sdd.source import LocalSource

    source = LocalSource(root)
    if what == "task":
        source.load_kinds([Kind.TASKS])
        return set(source.state.tasks)
    source.load_kinds([Kind.DEFERRED, Kind.DECISIONS])
    return set(source.state.proposals) | set(source.state.decisions)


def cmd_console(root: Path, read_only: bool, engine: bool) -> int:
    if not engine or read_only:  # no engine of its own: nothing to keep running
        return _console(root, None, read_only=read_only, engine=False)
    from console.cli.detach import run_detachable

    return run_detachable(lambda detacher: _console(root, detacher, engine=True))


def _console(root: Path, detacher: Detacher | None, *, read_only: bool = False,
             engine: bool, demo: bool = False) -> int:
    """The console; when the operator detaches, its engine runs on headless here."""
    from console.tui.app import ConsoleApp

    app = ConsoleApp(root, read_only=read_only, engine=engine, demo=demo,
                     can_detach=detacher is not None)
    app.run()
    if detacher is not None and app.detaching and app.engine is not None:
        pid = os.getpid()
        return detacher.carry_on(app.engine, (
            f"detached: the engine keeps running in the background (pid {pid}); "
            f"`bernstein-tui -C {root}` re-attaches; `kill {pid}` stops it"))
    return app.return_code or EXIT_OK


def cmd_demo(target: Path) -> int:
    from console.demo.project import write_demo

    try:
        tickets = write_demo(target)
    except (FileExistsError, OSError) as exc:
        raise UsageError(str(exc)) from None
    print(f"demo project written to {target} ({len(tickets)} tickets in .sdd/backlog/open/)")
    from console.cli.trust import record_trust

    record_trust(target, "the demo project")
    print(f"  watch it run:  bernstein-tui -C {target}")
    print(f"  or headless:   bernstein-tui -C {target} run --until-idle")
    return EXIT_OK


def cmd_demo_console() -> int:
    """`--demo`: the demo project in a temporary directory, run in the console."""
    import tempfile

    from console.cli.trust import record_trust
    from console.demo.project import write_demo

    target = Path(tempfile.mkdtemp(prefix="bernstein-tui-demo-")) / "inventory"
    write_demo(target)
    print(f"bernstein-tui demo: project in {target}", file=sys.stderr)
    record_trust(target, "the demo project")
    from console.cli.detach import run_detachable

    code = run_detachable(lambda detacher: _console(target, detacher, engine=True,
                                                    demo=True))
    print(f"the demo project stays in {target}", file=sys.stderr)
    return code


def run_local(args: argparse.Namespace) -> int:
    """Every command on the project `-C DIR` (default: .)."""
    if args.token_file or args.tenant or args.insecure:
        raise UsageError("--token-file, --tenant and --insecure need --server URL")
    root = _project(args.directory or ".")
    if args.command == "trust":
        from console.cli.trust import cmd_trust

        return cmd_trust(root, revoking=args.revoke, listing=args.list)
    before_local_write(root, args)  # served elsewhere, or untrusted: exit 2
    if args.command == "status":
        return cmd_status(root, args.json)
    if args.command == "init":
        return cmd_init(root)
    if args.command == "run":
        return cmd_run(root, args.workers, args.until_idle, args.exit_zero)
    if args.command == "gates":
        return cmd_gates(root, args.json)
    if args.command == "proposals":
        return cmd_proposals(root, args.json)
    if args.command in ACTIONS:
        if args.read_only:
            raise UsageError("--read-only refuses every operator action")
        return cmd_action(root, args)
    return cmd_console(root, args.read_only, not args.no_engine)
