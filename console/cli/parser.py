"""The command line's grammar: `bernstein-tui [-C DIR] [--server URL …] [COMMAND]`."""

from __future__ import annotations

import argparse

from console import __version__
from console.cli.web import DEFAULT_MAX_TABS
from console.cli.web import HELP as WEB_HELP


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
                     help="exit when nothing is left to run: 0 when every task succeeded, "
                          "1 when any ended failed (for CI)")
    run.add_argument("--exit-zero", action="store_true",
                     help="with --until-idle: exit 0 even when tasks failed (the behaviour "
                          "before failed tasks made it exit 1)")
    from console.cli.cluster import add_run_options  # argparse-level imports only

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
    web = sub.add_parser("web", help="serve the console to a browser (textual-serve): one "
                                     "engine for the project, shared by every tab; open the "
                                     "URL it prints (it carries this run's token)",
                         description=WEB_HELP,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    web.add_argument("--host", default="127.0.0.1",
                     help="address to listen on (default 127.0.0.1: this machine only; "
                          "any other needs --allow-remote)")
    web.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    web.add_argument("--allow-remote", action="store_true",
                     help="allow a --host other than loopback: other machines can reach "
                          "the page (the token still applies; prefer an SSH tunnel)")
    web.add_argument("--max-tabs", type=int, default=DEFAULT_MAX_TABS, metavar="N",
                     help=f"consoles open at once, one per browser tab "
                          f"(default {DEFAULT_MAX_TABS})")
    gate = sub.add_parser("release-gate", help="release a mission's held or failed phase "
                                               "gate: its tasks run (recorded, with the reason)")
    gate.add_argument("mission_id", metavar="MISSION")
    gate.add_argument("gate_name", metavar="GATE")
    gate.add_argument("--reason", required=True)
    return parser
