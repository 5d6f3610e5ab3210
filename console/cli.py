"""Command line: `bernstein-tui [-C DIR] [command]` (DESIGN §2).

Exit codes: 0 ok, 1 the thing asked for failed, 2 bad usage or unreadable input;
every error is one line on stderr, never a traceback (BERNSTEIN_TUI_DEBUG=1
shows it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from console import __version__
from console.cli_owner import ACTIONS, before_local_write
from console.sdd.sanitize import display_text, json_display

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def say(text: object, file: TextIO | None = None) -> None:
    """One line made from data (an outcome, an error naming an id or a file): printed as
    display text, so nothing in it reaches the terminal as control."""
    print(display_text(text), file=file if file is not None else sys.stdout)


def print_json(value: object) -> None:
    """A JSON answer on stdout: data, so written with `json_display` (same value parsed)."""
    sys.stdout.write(json_display(json.dumps(value, indent=2, ensure_ascii=False)) + "\n")


class UsageError(Exception):
    """Bad usage or unreadable input: one line, exit 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bernstein-tui",
        description="Live operator console for AI coding-agent orchestration "
                    "(reads and writes Bernstein's .sdd/ formats).",
    )
    parser.add_argument("-C", dest="directory", metavar="DIR", default=None,
                        help="the project directory (default: .); with --server, only its "
                             "bernstein.yaml cascade ladder is read, for escalate")
    parser.add_argument("--read-only", action="store_true",
                        help="watch only: hide and refuse every operator action")
    parser.add_argument("--no-engine", action="store_true",
                        help="do not start the embedded engine; only watch .sdd/")
    parser.add_argument("--demo", action="store_true",
                        help="write the demo project to a temporary directory, run the engine "
                             "on it and open the console (no API keys needed)")
    remote = parser.add_argument_group("attach to a Bernstein task server")
    remote.add_argument("--server", metavar="URL",
                        help="a Bernstein task server, e.g. http://127.0.0.1:8052, instead of a "
                             "local .sdd/")
    remote.add_argument("--token-file", metavar="FILE",
                        help="file holding the server's bearer token (default: the "
                             "BERNSTEIN_AUTH_TOKEN environment variable)")
    remote.add_argument("--tenant", metavar="T", help="send X-Tenant-ID: T")
    remote.add_argument("--insecure", action="store_true",
                        help="do not verify the server's TLS certificate")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    status = sub.add_parser("status", help="one-shot summary of the project's .sdd/")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("init", help="create .sdd/ and a commented bernstein.yaml (never overwrites)")
    trust = sub.add_parser("trust", help="trust the project: let its agents, gates and "
                                         "commands run (recorded in your config dir)")
    trust.add_argument("--revoke", action="store_true", help="stop trusting the project")
    trust.add_argument("--list", action="store_true", help="every trusted project")
    demo = sub.add_parser("demo", help="write the demo project to DIR, nothing else")
    demo.add_argument("target", metavar="DIR")
    gates = sub.add_parser("gates", help="run the quality gate pipeline on the working-tree "
                                          "diff (exit 1 when a required gate blocks)")
    gates.add_argument("--json", action="store_true", help="print the gate report as JSON")
    run = sub.add_parser("run", help="run the engine without the console")
    run.add_argument("--workers", type=int, default=None, metavar="N",
                     help="agents running at once (default: bernstein.yaml workers, else 2)")
    run.add_argument("--until-idle", action="store_true",
                     help="exit when nothing is left to run")
    from console.cli_cluster import add_run_options  # lazily: it imports this module
    add_run_options(run)
    for name, text in (("retry", "reopen a failed task (retry_count + 1, same id)"),
                       ("escalate", "run the task's next attempt on a stronger model"),
                       ("cancel", "cancel a task and its subtasks, killing a running agent")):
        action = sub.add_parser(name, help=text)
        action.add_argument("task_id", metavar="TASK_ID")
        if name == "escalate":
            action.add_argument("--model", help="the model to use (default: the next tier)")
        if name == "cancel":
            action.add_argument("--reason", default="cancelled by the operator")
    sub.add_parser("pause", help="stop the running engine from starting new attempts "
                                 "(running ones finish)")
    sub.add_parser("resume", help="let a paused engine dispatch again")
    sub.add_parser("evolve", help="analyse .sdd/metrics and write evolution proposals "
                                  "(L0/L1 with high confidence are applied; L2+ deferred)")
    listing = sub.add_parser("proposals", help="evolution proposals, pending and decided")
    listing.add_argument("--json", action="store_true")
    for name, text in (("approve", "apply a pending proposal through the evolution gate and "
                                   "merge it if its tests pass"),
                       ("reject", "reject a pending proposal, with a reason")):
        decision = sub.add_parser(name, help=text)
        decision.add_argument("proposal_id", metavar="PROPOSAL_ID")
        decision.add_argument("--reason", default="", required=name == "reject")
    return parser


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
    if as_json:
        print_json(summary)
    else:
        from console.status_view import print_status

        print_status(summary, str(root))
    return EXIT_OK


def cmd_init(root: Path) -> int:
    from console.sdd.skeleton import init_project

    # a fresh project only: what is already here came from someone else (trust it once read)
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
        from console.cli_trust import record_trust

        record_trust(root, "init wrote its bernstein.yaml")
    return EXIT_OK


def cmd_run(root: Path, workers: int | None, until_idle: bool) -> int:
    from console.engine.errors import EngineError
    from console.run_view import run_headless
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
    return EXIT_INTERRUPTED if interrupted and until_idle else EXIT_OK  # idle never reached


def cmd_gates(root: Path, as_json: bool) -> int:
    from console.engine.gates.base import ToolMissing
    from console.engine.gates.cache import GateCache
    from console.engine.gates.pipeline import GatePipeline, load_gate_setup
    from console.engine.gates.plugins import PluginError
    from console.engine.llm import LlmClient
    from console.engine.safegit import GitFailed, run_git
    from console.sdd.gate_config import GateConfigError
    from console.sdd.gate_records import write_gate_run
    from console.sdd.metric_codec import encode_gate_report
    from console.sdd.paths import SddPaths
    from console.sdd.project_config import ConfigError, load_config

    try:  # the engine's safe git: minimal environment, no repository-run programs
        run_git(["rev-parse", "--absolute-git-dir"], root, work_tree=False)
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
    pipeline = GatePipeline(setup, LlmClient(config.llm),
                            cache=GateCache(state / "gates", setup.config.cache_max_entries),
                            state_dir=state, log_dir=paths.sdd / "runtime" / "gate-logs")
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
            f"{exc.strerror or exc}", sys.stderr)
    if as_json:
        print_json(encode_gate_report(run.report))
    else:
        from console.gates_view import print_report

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
    from rich.console import Console
    from rich.table import Table

    from console.sdd.sanitize import CELL_LIMIT, data_text

    table = Table(title_justify="left")
    for column in ("id", "state", "risk", "conf.", "title", "last decision"):
        table.add_column(column)
    for row in rows:
        table.add_row(data_text(row["proposal_id"], limit=CELL_LIMIT),
                      "! pending" if row["pending"] else "✓ decided",
                      data_text(row["risk_level"] or "", limit=CELL_LIMIT),
                      f"{row['confidence'] or 0:.2f}", data_text(row["title"], limit=CELL_LIMIT),
                      data_text(f"{row['outcome']} {row['reviewer'] or ''}", limit=CELL_LIMIT))
    Console().print(table)
    return EXIT_OK


def cmd_action(root: Path, args: argparse.Namespace) -> int:
    from console.engine.control import local_control
    from console.engine.errors import OwnedElsewhere

    try:
        control = local_control(root)
    except OwnedElsewhere as exc:
        raise UsageError(str(exc)) from None
    if args.command == "retry":
        outcome = control.retry(args.task_id)
    elif args.command == "escalate":
        outcome = control.escalate(args.task_id, args.model)
    elif args.command == "cancel":
        outcome = control.cancel(args.task_id, args.reason)
    elif args.command == "approve":
        outcome = control.approve(args.proposal_id, args.reason)
    elif args.command == "reject":
        outcome = control.reject(args.proposal_id, args.reason)
    elif args.command == "pause":
        outcome = control.pause()
    elif args.command == "resume":
        outcome = control.resume()
    else:
        outcome = control.evolve()
    say(outcome.message, file=sys.stdout if outcome.ok else sys.stderr)
    return EXIT_OK if outcome.ok else EXIT_FAILED


def cmd_console(root: Path, read_only: bool, engine: bool) -> int:
    from console.tui.app import ConsoleApp

    app = ConsoleApp(root, read_only=read_only, engine=engine and not read_only)
    app.run()
    return app.return_code or EXIT_OK


def cmd_demo(target: Path) -> int:
    from console.demo.project import write_demo

    try:
        tickets = write_demo(target)
    except (FileExistsError, OSError) as exc:
        raise UsageError(str(exc)) from None
    print(f"demo project written to {target} ({len(tickets)} tickets in .sdd/backlog/open/)")
    from console.cli_trust import record_trust

    record_trust(target, "the demo project")
    print(f"  watch it run:  bernstein-tui -C {target}")
    print(f"  or headless:   bernstein-tui -C {target} run --until-idle")
    return EXIT_OK


def run(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return cmd_demo(Path(args.target).expanduser().resolve())
    if args.demo:
        import tempfile

        from console.demo.project import write_demo

        target = Path(tempfile.mkdtemp(prefix="bernstein-tui-demo-")) / "inventory"
        write_demo(target)
        print(f"bernstein-tui demo: project in {target}", file=sys.stderr)
        from console.cli_trust import record_trust

        record_trust(target, "the demo project")
        from console.tui.app import ConsoleApp

        app = ConsoleApp(target, engine=True, demo=True)
        app.run()
        print(f"the demo project stays in {target}", file=sys.stderr)
        return EXIT_OK
    if args.command == "run":  # with --server: a cluster worker
        from console.cli_cluster import cluster_run
        if (code := cluster_run(args, _project)) is not None:
            return code
    if args.server is not None:
        from console.cli_remote import run_remote

        return run_remote(args)
    if args.token_file or args.tenant or args.insecure:
        raise UsageError("--token-file, --tenant and --insecure need --server URL")
    root = _project(args.directory or ".")
    if args.command == "trust":
        from console.cli_trust import cmd_trust

        return cmd_trust(root, revoking=args.revoke, listing=args.list)
    before_local_write(root, args)  # served elsewhere, or untrusted: exit 2
    if args.command == "status":
        return cmd_status(root, args.json)
    if args.command == "init":
        return cmd_init(root)
    if args.command == "run":
        return cmd_run(root, args.workers, args.until_idle)
    if args.command == "gates":
        return cmd_gates(root, args.json)
    if args.command == "proposals":
        return cmd_proposals(root, args.json)
    if args.command in ACTIONS:
        if args.read_only:
            raise UsageError("--read-only refuses every operator action")
        return cmd_action(root, args)
    return cmd_console(root, args.read_only, not args.no_engine)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except UsageError as exc:
        say(f"bernstein-tui: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if os.environ.get("BERNSTEIN_TUI_DEBUG"):
            traceback.print_exc()
        say(f"bernstein-tui: internal error: {type(exc).__name__}: {exc} "
            "(set BERNSTEIN_TUI_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_FAILED
