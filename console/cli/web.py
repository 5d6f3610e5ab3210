"""`bernstein-tui [-C DIR | --demo | --server URL] web [--host 127.0.0.1] [--port 8000]
[--allow-remote] [--max-tabs 8]`: the console in a browser, served by textual-serve
(issue #19.10), behind a local, authenticated door (issue #32.1, console.cli.web_door).

textual-serve runs one app process per browser tab. So that every tab shares one
project and never starts an engine of its own, `web` owns the engine: for a local
project (or the demo) it starts `bernstein-tui -C DIR run` once, and each tab's console
runs with `--no-engine`, watching the project and acting through that engine's inbox,
as a console does on a project another engine runs. With `--server`, each tab attaches
to the task server and no engine runs here.

The door: `web` listens on 127.0.0.1 unless `--allow-remote` (with a warning), and
prints one URL carrying this run's token; the page and its websocket need it in their
URL (never a cookie: cookies do not tell ports apart, so another local server would get
it), the websocket's Origin must be the page's and the Host header a loopback name (any
port, for a tunnel) or, with --allow-remote, the bound address, and at most --max-tabs
consoles run. Every process `web` starts (the engine,
each tab's console) runs `python -P -m console` from this user's state directory, never
from the project, so nothing in the project is imported. The engine log lives there too.
From another machine, reach it through an SSH tunnel to its loopback port, as HELP
(`web --help`) says: `ssh -N -L 8000:127.0.0.1:8000 you@this-host`, then open the
printed URL there.

No orphans: a tab's app process is exec'd by the shell textual-serve starts, so it is
a child of this process; it exits when its page goes away (textual-serve's quit) and,
through the kernel's parent-death signal, when this process dies however it dies. The
engine gets SIGTERM when `web` stops (a clean stop: agents killed, tasks reopened) and
the same parent-death signal.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.errors import EXIT_OK, UsageError, say, warn

if TYPE_CHECKING:
    from console.cli.web_door import Door

#: set in each tab's environment: the pid whose death ends it (it checks on start)
SERVED_BY = "BERNSTEIN_TUI_SERVED_BY"
ENGINE_STOP_S = 30.0
#: consoles (browser tabs) at once: a page cannot start hundreds
DEFAULT_MAX_TABS = 8
#: our own interpreter for our own modules: -P, so neither the working directory nor a
#: script's directory joins sys.path (a `console/` planted in a project is never
#: imported); not -I, which would drop PYTHONPATH and the user site, where an operator's
#: install may live. Every such process also starts outside the project.
OWN_PYTHON = (sys.executable, "-P")

HELP = """Serve the console to a browser. `web` prints one URL carrying this run's token
(http://127.0.0.1:8000/?token=...): open that one; without the token the page and its
websocket are refused.

It listens on 127.0.0.1 only. To use it from another machine, leave it there and
tunnel over SSH, from that machine:

    ssh -N -L 8000:127.0.0.1:8000 you@this-host

then open the printed URL (http://127.0.0.1:8000/?token=...) in its browser (a tunnel
from another local port, -L 9000:127.0.0.1:8000, or an editor's port forwarding works
too: open the URL with that port). The tunnel encrypts the traffic and the port stays
closed to the network. (Other users of either machine can reach a loopback port: the
token is what keeps them out, so keep the URL to yourself.)

--host with another address needs --allow-remote: then anyone who can reach the port
and learns the token (sent in clear over plain HTTP) drives the console, the engine,
its agents and git on the project.
"""


def console_command(args: argparse.Namespace, project: Path | None, home: Path) -> str:
    """The shell command textual-serve runs for each tab (exec'd: the shell goes), in
    `home`: never the project's directory."""
    argv = [*OWN_PYTHON, "-m", "console"]
    if args.server:
        argv += ["--server", args.server]
        for flag, value in (("--token-file", args.token_file), ("--tenant", args.tenant)):
            if value:
                argv += [flag, os.path.abspath(value) if flag == "--token-file" else value]
        if args.insecure:
            argv.append("--insecure")
        if args.directory:
            argv += ["-C", os.path.abspath(args.directory)]
    else:
        assert project is not None
        argv += ["-C", str(project), "--no-engine"]
    if args.read_only:
        argv.append("--read-only")
    return f"cd {shlex.quote(str(home))} && exec {shlex.join(argv)}"


def _start_engine(project: Path, home: Path, log: Path) -> subprocess.Popen[bytes]:
    """`run` on the project, in its own session, stopped by SIGTERM when we go; its
    output appended to `log` (opened without following links or blocking)."""
    from console.cli.web_door import open_log
    from console.engine.lifecycle import die_with_parent_signal

    try:
        out = open_log(log)
    except OSError as exc:
        raise UsageError(f"{log}: cannot write the engine log: {exc.strerror}") from None
    try:
        return subprocess.Popen(
            [*OWN_PYTHON, "-m", "console", "-C", str(project), "run"], cwd=home,
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=die_with_parent_signal(signal.SIGTERM))
    finally:
        os.close(out)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(ENGINE_STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def open_door(args: argparse.Namespace) -> tuple[Door, list[socket.socket]]:
    """Before anything else: textual-serve is there, the address is allowed, the port is
    free (bound now, so nothing can take it between the check and the serving)."""
    from console.cli.web_door import Door, is_loopback, listen

    try:
        import textual_serve  # noqa: F401
    except ImportError:
        raise UsageError("web needs textual-serve: pip install 'bernstein-tui[web]'") from None
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: not a port")
    if not 0 < args.max_tabs <= 256:
        raise UsageError(f"--max-tabs {args.max_tabs}: between 1 and 256")
    if not is_loopback(args.host) and not args.allow_remote:
        raise UsageError(f"--host {args.host} is not this machine only (127.0.0.1): add "
                         f"--allow-remote to mean it, or use an SSH tunnel (web --help)")
    sockets = listen(args.host, args.port)
    if not is_loopback(args.host):
        warn(f"--allow-remote: listening on {args.host}: anyone who can reach port "
             f"{args.port} and learns the token (it crosses the network in clear: plain "
             f"HTTP) drives this console, its engine, agents and git on the project; an "
             f"SSH tunnel to 127.0.0.1 is the safe way (web --help)")
    return Door(args.host, args.port, max_tabs=args.max_tabs), sockets


def cmd_web(args: argparse.Namespace, project: Path | None, door: Door,
            sockets: list[socket.socket], *, demo: bool = False) -> int:
    """Serve the console until SIGINT/SIGTERM; then every tab and the engine stop."""
    from textual_serve.server import Server

    from console.cli.web_door import build_app, engine_log_path, serve, web_home

    home = web_home()
    engine = None
    if project is not None and not args.read_only:
        from console.engine.lock import find_owner
        from console.sdd.paths import SddPaths

        owner = find_owner(SddPaths(project))
        if owner is None:
            log = engine_log_path(project)
            engine = _start_engine(project, home, log)
            say(f"engine: started (pid {engine.pid}), shared by every tab; its log: {log}",
                sys.stderr)
        else:
            say(f"engine: {owner} runs the project; every tab watches it", sys.stderr)
    os.environ[SERVED_BY] = str(os.getpid())
    what = "the demo" if demo else (args.server or str(project))
    server = Server(console_command(args, project, home), host=args.host, port=args.port)
    app = build_app(server, door, f"bernstein-tui — {what}")
    say(f"bernstein-tui web: serving {what}; open (this run's token is in it; at most "
        f"{door.max_tabs} tabs):", sys.stderr)
    say(door.url)
    sys.stdout.flush()
    try:
        serve(app, sockets)
    finally:
        if engine is not None:
            _stop(engine)
    return EXIT_OK


def served_child_setup() -> None:
    """In a tab's console (SERVED_BY set): end with the `web` process that serves it,
    however it ends (a console with no browser left must not linger)."""
    parent = os.environ.get(SERVED_BY)
    if not parent:
        return
    from console.engine.lifecycle import set_parent_death_signal

    set_parent_death_signal(signal.SIGHUP)
    if str(os.getppid()) != parent:  # it died before the line above
        os.kill(os.getpid(), signal.SIGHUP)


def run_web(args: argparse.Namespace) -> int:
    """`web` with `--demo` (written to a temporary directory first), `--server` or a
    local project; the door is opened (the port bound) before any of them."""
    door, sockets = open_door(args)
    try:
        return _run_web(args, door, sockets)
    finally:
        for sock in sockets:
            sock.close()


def _run_web(args: argparse.Namespace, door: Door, sockets: list[socket.socket]) -> int:
    if args.server:
        from console.cli.remote import require_token_accepted, server_client

        client = server_client(args)
        try:
            require_token_accepted(client)  # a wrong token: exit 2 now, not in every tab
        finally:
            client.close()
        return cmd_web(args, None, door, sockets)
    if args.demo:
        import tempfile

        from console.cli.trust import record_trust
        from console.demo.project import write_demo

        target = Path(tempfile.mkdtemp(prefix="bernstein-tui-demo-")) / "inventory"
        write_demo(target)
        record_trust(target, "the demo project")
        say(f"bernstein-tui demo: project in {target}", sys.stderr)
        return cmd_web(args, target, door, sockets, demo=True)
    from console.cli.local import _project

    root = _project(args.directory or ".")
    from console.sdd.trust import check

    status = check(root)
    if not status.trusted and not args.read_only:  # watched, but nothing of it runs
        say(f"bernstein-tui: {status.reason}; serving it watch-only, with no engine "
            f"(trust it with: bernstein-tui -C {root} trust)", sys.stderr)
        args.read_only = True
    return cmd_web(args, root, door, sockets)
