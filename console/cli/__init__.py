"""Command line: `bernstein-tui [-C DIR] [command]` (DESIGN §2).

`parser` holds the grammar, `local` the commands on a project directory, `remote`
the same against a Bernstein task server, `actions` the operator actions both share,
`views` what `status`, `gates`, `proposals` and `run` print, `errors` the exit codes.
Exit codes: 0 ok, 1 the thing asked for failed, 2 bad usage or unreadable input;
every error is one line on stderr, never a traceback (BERNSTEIN_TUI_DEBUG=1 shows it).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from console.cli.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    say,
)
from console.cli.parser import build_parser

__all__ = ["main", "run"]


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if os.environ.get("BERNSTEIN_TUI_SERVED_BY"):  # a browser tab's console
        from console.cli.web import served_child_setup

        served_child_setup()
    if args.command == "web":
        from console.cli.web import run_web

        return run_web(args)
    if args.command == "demo":
        from console.cli.local import cmd_demo

        return cmd_demo(Path(args.target).expanduser().resolve())
    if args.demo:
        from console.cli.local import cmd_demo_console

        return cmd_demo_console()
    if args.command == "run":  # with --server: a cluster worker
        from console.cli.cluster import cluster_run
        from console.cli.local import _project

        if (code := cluster_run(args, _project)) is not None:
            return code
    if args.server is not None:
        from console.cli.remote import run_remote

        return run_remote(args)
    from console.cli.local import run_local

    return run_local(args)


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
