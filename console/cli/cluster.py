"""`bernstein-tui [-C CLONE] run --server URL [--workers N] [--roles a,b] [--until-idle]`:
the engine as a worker of a Bernstein task server (console.engine.cluster_worker), wired
here to the server client (console.remote.cluster), the one place both layers meet.

Ctrl-C, SIGTERM or SIGHUP stops claiming and releases what is claimed but not started;
running attempts finish (`--on-stop finish`, the default) or are killed and released
(`--on-stop release`, or a second signal).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from console.cli.errors import EXIT_FAILED, EXIT_OK, UsageError, say
from console.sdd.confine import is_safe_id

if TYPE_CHECKING:
    from console.remote.cluster import ClusterClient

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def add_run_options(run: argparse.ArgumentParser) -> None:
    """`run`'s cluster options (with the server's --token-file/--tenant/--insecure)."""
    run.add_argument("--server", dest="run_server", metavar="URL", default=None,
                     help="work for this Bernstein task server as a cluster worker node, "
                          "landing work through the clone's git remote")
    run.add_argument("--roles", default=None, metavar="A,B",
                     help="with --server: the roles to claim (default: every role that "
                          "has open tasks)")
    run.add_argument("--name", default=None, help="with --server: the node name "
                                                  "(default: HOST-CLONEHASH)")
    run.add_argument("--on-stop", choices=("finish", "release"), default="finish",
                     help="with --server, on SIGTERM/Ctrl-C: let running attempts finish "
                          "(default) or kill and release them")
    run.add_argument("--remote", default="origin",
                     help="with --server: the git remote work lands on (default: origin)")


def cluster_run(args: argparse.Namespace, project: Callable[[str], Path]) -> int | None:
    """`run --server URL` (or `--server URL run`): the worker's exit code; None for a
    local run, after refusing a worker's options given to it."""
    if args.run_server or args.server:
        return cmd_cluster_run(project(args.directory or "."), args)
    refuse_without_server(args)
    return None


def refuse_without_server(args: argparse.Namespace) -> None:
    """A local `run` given a worker's options: bad usage, not silently ignored."""
    given = [flag for flag, value in (("--roles", args.roles), ("--name", args.name),
                                      ("--on-stop", args.on_stop != "finish" or None),
                                      ("--remote", args.remote != "origin" or None))
             if value is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: only with run --server URL")


class _Link:
    """ClusterClient with each ServerError as the engine's ServerAway (a 5xx or no
    answer: away; a 4xx: this one request refused)."""

    def __init__(self, client: ClusterClient) -> None:
        self._client = client

    @property
    def url(self) -> str:
        return self._client.url

    @property
    def node_id(self) -> str | None:
        return self._client.node_id

    def __getattr__(self, name: str) -> Callable[..., Any]:
        from console.engine.cluster_report import ServerAway
        from console.remote.client import ServerError

        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except ServerError as exc:
                away = exc.unreachable or (exc.status or 0) >= 500
                raise ServerAway(str(exc), unreachable=away) from None
        return call


def _roles(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    roles = tuple(r.strip() for r in text.split(",") if r.strip())
    bad = [r for r in roles if not is_safe_id(r)]
    if not roles or bad:
        raise UsageError(f"--roles {text}: expected names like backend,qa (letters, digits, "
                         "'.', '_', '-')")
    return roles


def _name(root: Path, given: str | None) -> str:
    import hashlib
    import socket

    if given is not None:
        if not is_safe_id(given):
            raise UsageError(f"--name {given}: letters, digits, '.', '_', '-' only")
        return given
    host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())
    return f"{host[:40] or 'host'}-{hashlib.sha256(str(root).encode()).hexdigest()[:6]}"


def _stop_on_signals(stop: Callable[[bool], None]) -> contextlib.AbstractContextManager[None]:
    """The first stop signal stops claiming; a second one also releases running work."""
    from console.engine.lifecycle import signals_handled

    seen = []

    def handler(signum: int, frame: object) -> None:
        seen.append(signum)
        stop(len(seen) > 1)

    return signals_handled(handler, STOP_SIGNALS)


def cmd_cluster_run(root: Path, args: argparse.Namespace) -> int:
    import hashlib

    from console.cli.remote import require_token_accepted, server_client
    from console.engine.cluster_report import Coordinator
    from console.engine.cluster_worker import ClusterWorker
    from console.engine.errors import EngineError
    from console.remote.cluster import ClusterClient

    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    args.server = args.run_server or args.server
    roles = _roles(args.roles)
    name = _name(root, args.name)
    client = server_client(args)
    try:
        require_token_accepted(client)  # a wrong token or no server: exit 2, one line
        identity = f"bernstein-tui://{name}/{hashlib.sha256(str(root).encode()).hexdigest()}"
        link = cast(Coordinator, _Link(ClusterClient(client, name=name, identity=identity)))

        def out(line: str) -> None:
            with contextlib.suppress(OSError):
                say(f"{time.strftime('%H:%M:%S')} {line}")

        try:
            worker = ClusterWorker(root, link, name=name, workers=args.workers,
                                   roles=roles, until_idle=args.until_idle,
                                   on_stop=args.on_stop, say=out, remote=args.remote,
                                   engine_echo=lambda e: out(f"· {e.message}"))
            with _stop_on_signals(lambda hard: worker.stop(release_running=hard)):
                failed = worker.run()
        except EngineError as exc:
            say(f"bernstein-tui: {exc}", file=sys.stderr)
            return EXIT_FAILED
        for line in worker.reports.dropped:
            say(f"bernstein-tui: the server refused a report: {line}", file=sys.stderr)
        if failed and args.until_idle and not args.exit_zero:
            say(f"bernstein-tui: {failed} task{'s' if failed != 1 else ''} failed on this "
                "worker (exit 1; --exit-zero exits 0)", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK
    finally:
        client.close()
