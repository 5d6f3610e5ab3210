"""A claimed task's completion signals, screened before the worker runs it: a task
server's answers are data (DESIGN §7), so a signal that would run a command
(`test_passes`) or fetch a URL (`api_responds`) on this machine is kept only when the
worker's trusted bernstein.yaml allows it (`cluster.server_signals`, parsed and matched
by console.sdd.server_signals); every other one is dropped and said in one line.

Signals that only read the attempt's worktree (`path_exists`, `glob_exists`,
`file_contains`) or ask the configured LLM (`llm_review`, `llm_judge`) are kept; a type
this worker does not know is dropped (it might run something in a later version).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from console.model import CompletionSignal, Task
from console.sdd.server_signals import DEFAULT_PORTS, ServerSignalPolicy, host_key

#: signal types that run or fetch nothing here
INERT = frozenset({"path_exists", "glob_exists", "file_contains", "llm_review", "llm_judge"})
SHOWN_CHARS = 100  # of a dropped signal's value, in the line: its start and its end


def local_policy(root: Path, configured: ServerSignalPolicy, *, vouched: bool
                 ) -> ServerSignalPolicy:
    """bernstein.yaml's `cluster.server_signals`, honoured only in a trusted project (or
    one the caller vouches for); otherwise nothing is allowed."""
    if vouched:
        return configured
    from console.sdd.trust import check

    return configured if check(root).trusted else ServerSignalPolicy()


def policy_line(policy: ServerSignalPolicy) -> str:
    """What a task server's signals may run here, for the worker's first lines."""
    if not policy.allows_any:
        return ("a task server's test_passes and api_responds signals are not run here "
                "(cluster.server_signals allows none)")
    hosts = sorted(host if port is None else f"{host}:{port}"
                   for host, port in policy.url_hosts)
    return (f"a task server's signals may run {len(policy.commands)} command(s) of "
            f"cluster.server_signals and fetch from {', '.join(hosts) or 'no host'}")


def url_refusal(text: str, policy: ServerSignalPolicy) -> str | None:
    """Why the URL may not be fetched here, or None (see server_signals for the rule)."""
    import httpx

    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, ValueError, TypeError):
        return "not a URL"
    if url.scheme not in DEFAULT_PORTS:
        return f"scheme {url.scheme or 'none'} (http or https only)"
    if url.userinfo:
        return "it carries a user name or password"
    if not url.raw_host:
        return "no host"
    port = url.port or DEFAULT_PORTS[url.scheme]
    if not policy.allows_host(host_key(url.raw_host), port):
        return "host not in cluster.server_signals.url_hosts"
    return None


def _shown(value: str) -> str:
    """A value cut to its start and its end (what follows an allowed command matters)."""
    if len(value) <= SHOWN_CHARS:
        return value
    half = SHOWN_CHARS // 2
    return f"{value[:half]}…{value[-half:]}"


def screen(signals: tuple[CompletionSignal, ...], policy: ServerSignalPolicy
           ) -> tuple[tuple[CompletionSignal, ...], list[str]]:
    """(the signals that may run here, one phrase per dropped one). An allowed
    `test_passes` carries the operator's own command (as written in bernstein.yaml)."""
    kept: list[CompletionSignal] = []
    dropped: list[str] = []
    for signal in signals:
        shown = f"{signal.type} {_shown(signal.value)!r}"
        if signal.type in INERT:
            kept.append(signal)
        elif signal.type == "test_passes":
            own = policy.command(signal.value)
            if own is None:
                dropped.append(f"{shown} (command not in cluster.server_signals.commands)")
            else:
                kept.append(msgspec.structs.replace(signal, value=own))
        elif signal.type == "api_responds":
            why = url_refusal(signal.value, policy)
            if why is None:
                kept.append(signal)
            else:
                dropped.append(f"{shown} ({why})")
        else:
            dropped.append(f"{shown} (a signal type this worker does not run)")
    return tuple(kept), dropped


def screen_claim(task: Task, policy: ServerSignalPolicy) -> tuple[Task, str | None]:
    """The claimed task with only the signals that may run here, and the one line (said
    by the worker and reported to the server) naming those dropped, or None."""
    kept, dropped = screen(task.completion_signals, policy)
    if not dropped:
        return task, None
    return msgspec.structs.replace(task, completion_signals=kept), (
        f"{task.id}: {len(dropped)} server-supplied signal(s) not run on this worker (not "
        "allowed by its trusted bernstein.yaml, cluster.server_signals): "
        + "; ".join(dropped))
