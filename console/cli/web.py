"""`bernstein-tui [-C DIR | --demo | --server URL] web [--host 127.0.0.1] [--port 8000]`:
the console in a browser, served by textual-serve (issue #19.10).

textual-serve runs one app process per browser tab. So that every tab shares one
project and never starts an engine of its own, `web` owns the engine: for a local
project (or the demo) it starts `bernstein-tui -C DIR run` once, and each tab's console
runs with `--no-engine`, watching the project and acting through that engine's inbox,
as a console does on a project another engine runs. With `--server`, each tab attaches
to the task server and no engine runs here.

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
import subprocess
import sys
from pathlib import Path

from console.cli.errors import EXIT_OK, UsageError, say

#: set in each tab's environment: the pid whose death ends it (it checks on start)
SERVED_BY = "BERNSTEIN_TUI_SERVED_BY"
ENGINE_STOP_S = 30.0


def console_command(args: argparse.Namespace, project: Path | None) -> str:
    """The shell command textual-serve runs for each tab (exec'd: the shell goes)."""
    argv = [sys.executable, "-m", "console"]
    if args.server:
        argv += ["--server", args.server]
        for flag, value in (("--token-file", args.token_file), ("--tenant", args.tenant)):
            if value:
                argv += [flag, value]
        if args.insecure:
            argv.append("--insecure")
        if args.directory:
            argv += ["-C", args.directory]
    else:
        assert project is not None
        argv += ["-C", str(project), "--no-engine"]
    if args.read_only:
        argv.append("--read-only")
    return "exec " + shlex.join(argv)


def _start_engine(project: Path) -> subprocess.Popen[bytes]:
    """`run` on the project, in its own session, stopped by SIGTERM when we go."""
    from console.engine.lifecycle import die_with_parent_signal

    log = project / ".sdd" / "runtime" / "web-engine.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "console", "-C", str(project), "run"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=die_with_parent_signal(signal.SIGTERM))


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(ENGINE_STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def cmd_web(args: argparse.Namespace, project: Path | None, *, demo: bool = False) -> int:
    """Serve the console until SIGINT/SIGTERM; then every tab and the engine stop."""
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UsageError("web needs textual-serve: pip install 'bernstein-tui[web]'") from None
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: not a port")
    engine = None
    if project is not None and not args.read_only:
        from console.engine.lock import find_owner
        from console.sdd.paths import SddPaths

        owner = find_owner(SddPaths(project))
        if owner is None:
            engine = _start_engine(project)
            say(f"engine: started (pid {engine.pid}), shared by every tab; its log: "
                f"{project / '.sdd' / 'runtime' / 'web-engine.log'}", sys.stderr)
        else:
            say(f"engine: {owner} runs the project; every tab watches it", sys.stderr)
    os.environ[SERVED_BY] = str(os.getpid())
    what = "the demo" if demo else (args.server or str(project))
    server = Server(console_command(args, project), host=args.host, port=args.port,
                    title=f"bernstein-tui — {what}")
    try:
        server.serve()
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
    local project."""
    if args.server:
        from console.cli.remote import require_token_accepted, server_client

        client = server_client(args)
        try:
            require_token_accepted(client)  # a wrong token: exit 2 now, not in every tab
        finally:
            client.close()
        return cmd_web(args, None)
    if args.demo:
        import tempfile

        from console.cli.trust import record_trust
        from console.demo.project import write_demo

        target = Path(tempfile.mkdtemp(prefix="bernstein-tui-demo-")) / "inventory"
        write_demo(target)
        record_trust(target, "the demo project")
        say(f"bernstein-tui demo: project in {target}", sys.stderr)
        return cmd_web(args, target, demo=True)
    from console.cli.local import _project

    root = _project(args.directory or ".")
    from console.sdd.trust import check

    status = check(root)
    if not status.trusted and not args.read_only:  # watched, but nothing of it runs
        say(f"bernstein-tui: {status.reason}; serving it watch-only, with no engine "
            f"(trust it with: bernstein-tui -C {root} trust)", sys.stderr)
        args.read_only = True
    return cmd_web(args, root)
