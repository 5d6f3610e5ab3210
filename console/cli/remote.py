"""The command line against a Bernstein task server: `bernstein-tui --server URL …`.

`status`, the task actions and the console work as they do on a local project,
through `RemoteSource` and `RemoteControl`. The token comes from `--token-file`
or `BERNSTEIN_AUTH_TOKEN` and is never printed, not even in an error.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.actions import ACTIONS, dispatch_action, resolve_targets
from console.cli.errors import EXIT_OK, UsageError, print_json

if TYPE_CHECKING:
    from console.control import Control
    from console.remote.client import ServerClient
    from console.remote.source import RemoteSource

#: commands that only make sense on a local project
LOCAL_ONLY = ("init", "run", "gates", "demo", "proposals")
TOKEN_ENV = "BERNSTEIN_AUTH_TOKEN"


def read_token(token_file: str | None) -> str | None:
    """The bearer token: --token-file, else BERNSTEIN_AUTH_TOKEN, else None."""
    if token_file:
        path = Path(token_file).expanduser()
        try:
            token = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise UsageError(f"--token-file {token_file}: no such file") from None
        except IsADirectoryError:
            raise UsageError(f"--token-file {token_file}: is a directory") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not text"
            raise UsageError(f"--token-file {token_file}: unreadable ({reason})") from None
        if not token:
            raise UsageError(f"--token-file {token_file}: the file is empty")
        where = f"--token-file {token_file}"
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            return None
        where = TOKEN_ENV
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise UsageError(f"{where}: the token holds characters an HTTP header cannot carry "
                         "(spaces, line breaks, non-ASCII)")
    return token


def server_client(args: argparse.Namespace) -> ServerClient:
    from console.remote.client import ServerClient

    token = read_token(args.token_file)
    if args.insecure:
        print("bernstein-tui: --insecure: TLS certificates are NOT verified", file=sys.stderr)
    try:
        return ServerClient(args.server, token=token, tenant=args.tenant or None,
                            verify=not args.insecure)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def ladder_for(directory: str | None) -> tuple[str, ...] | None:
    """The escalation ladder of `-C DIR`'s bernstein.yaml, when -C is given."""
    if directory is None:
        return None
    from console.engine.cascade import parse_cascade
    from console.sdd.project_config import ConfigError, load_config

    root = Path(directory).expanduser()
    if not root.is_dir():
        raise UsageError(f"-C {directory}: no such directory")
    try:
        return parse_cascade(load_config(root).raw.get("cascade")).ladder
    except (ValueError, TypeError, ConfigError) as exc:
        raise UsageError(f"bernstein.yaml: {exc}") from None


def remote_control(client: ServerClient, source: RemoteSource | None,
                   directory: str | None) -> Control:
    from console.model import DEFAULT_LADDER
    from console.remote.control import RemoteControl

    return RemoteControl(client, ladder=ladder_for(directory) or DEFAULT_LADDER,
                         refresh=source.refresh_task if source is not None else None,
                         on_drain=source.set_draining if source is not None else None)


def cmd_remote_status(client: ServerClient, as_json: bool) -> int:
    from console.remote.client import ServerError
    from console.remote.source import RemoteSource
    from console.sdd.summary import summarise

    source = RemoteSource(client, events=False)
    try:
        source.sync()
        counts = client.counts()
    except ServerError as exc:
        raise UsageError(str(exc)) from None
    health = source.check_health()
    source.check_workers()
    summary = summarise(source.state)
    from console.sdd.quality_metrics import quality_metrics

    summary["missions"] = []  # a Bernstein task server keeps no missions
    summary["quality"] = quality_metrics(source.state)
    summary["server"] = {
        "url": client.url, "tenant": client.tenant, "health": health.status,
        "latency_ms": round(health.latency_ms, 1) if health.latency_ms is not None else None,
        "counts": counts,
        "approvals_pending": len(source.state.approvals),
        "workers": [dataclasses.asdict(node) for node in source.health.workers],
    }
    if as_json:
        print_json(summary)
    else:
        from console.cli.views import print_status

        print_status(summary, source.describe())
    return EXIT_OK


def require_token_accepted(client: ServerClient, *, reachable: bool = True) -> None:
    """A rejected (or missing) token is bad usage, exit 2, for every command: one cheap
    authenticated read (`GET /tasks/counts`) says so before anything is tried. With
    `reachable`, a server that does not answer is bad usage too."""
    from console.remote.client import ServerError

    try:
        client.counts()
    except ServerError as exc:
        if (reachable and exc.unreachable) or exc.status in (401, 403):
            raise UsageError(str(exc)) from None


def cmd_remote_action(client: ServerClient, args: argparse.Namespace) -> int:
    from console.remote.client import ServerError

    try:
        client.health()  # public: tells "unreachable" (exit 2) from "refused" (exit 1)
    except ServerError as exc:
        if exc.unreachable:
            raise UsageError(str(exc)) from None
    require_token_accepted(client)
    resolve_targets(args, lambda what: remote_ids(client, what))
    return dispatch_action(remote_control(client, None, args.directory), args)


def remote_ids(client: ServerClient, what: str) -> set[str]:
    """The server's task ids, or the tasks pending its approval (what approve/reject
    decide there); none when it cannot say (the action then names the error)."""
    from console.remote.client import ServerError
    from console.remote.source import RemoteSource

    try:
        if what == "proposal":
            return {str(a.get("task_id")) for a in client.approvals() if isinstance(a, dict)}
        source = RemoteSource(client, events=False)
        source.sync()
        return set(source.state.tasks)
    except ServerError:
        return set()


# -- the console on a server (for the lead's ConsoleApp integration) ---------------

def remote_console_parts(client: ServerClient, directory: str | None, read_only: bool
                         ) -> tuple[RemoteSource, Callable[[], Control] | None]:
    """What `ConsoleApp(..., source=, control=)` needs to run on a server: the
    `RemoteSource` (not started: the app starts it) and a control factory (None when
    read-only). The factory returns one shared RemoteControl (httpx is thread-safe)."""
    from console.remote.source import RemoteSource

    source = RemoteSource(client)
    if read_only:
        return source, None
    control = remote_control(client, source, directory)
    return source, lambda: control


def cmd_remote_console(client: ServerClient, args: argparse.Namespace) -> int:
    """THE CONSOLE ON A SERVER: ConsoleApp with the NEW keyword arguments `source=`
    (a RemoteSource) and `control=` (a zero-argument factory returning a Control)."""
    from console.tui.app import ConsoleApp

    require_token_accepted(client, reachable=False)  # one that is down may come back
    source, control = remote_console_parts(client, args.directory, args.read_only)
    root = Path(args.directory or ".").expanduser().resolve()
    app = ConsoleApp(root, read_only=args.read_only, engine=False,
                     source=source, control=control)
    app.run()
    return app.return_code or EXIT_OK


def run_remote(args: argparse.Namespace) -> int:
    if args.demo or args.command in LOCAL_ONLY:
        what = "--demo" if args.demo else args.command
        hint = (" (evolution proposals have no REST route; use `bernstein evolve review` on "
                "the server's host)" if what == "proposals" else "")
        raise UsageError(f"{what} works on a local project, not with --server{hint}")
    if args.no_engine:
        raise UsageError("--no-engine has no meaning with --server: the server runs the work")
    client = server_client(args)
    try:
        if args.command == "status":
            return cmd_remote_status(client, args.json)
        if args.command in ACTIONS:
            if args.read_only:
                raise UsageError("--read-only refuses every operator action")
            return cmd_remote_action(client, args)
        return cmd_remote_console(client, args)
    finally:
        client.close()
