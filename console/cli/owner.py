"""What a local write checks first: a project a live Bernstein runs is refused (exit 2)
with the `bernstein-tui --server …` command to use instead; one that is not trusted
runs none of its own code."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.cli.actions import ACTIONS
from console.cli.errors import UsageError

#: commands that write to a local project (gates: its run record in .sdd/)
LOCAL_WRITES = ("run", "gates", *ACTIONS)


def served_refusal(root: Path, args: argparse.Namespace) -> str | None:
    """A project a live Bernstein runs (`bernstein serve` included) takes no local write:
    the one line to exit 2 with, naming the `--server` command to use instead."""
    if args.command not in LOCAL_WRITES or args.read_only:
        return None
    if args.command == "gates" and not (root / ".sdd").is_dir():
        return None  # nothing recorded: gates on any git repository
    from console.engine.lock import bernstein_owner, owned_message
    from console.sdd.paths import SddPaths

    owner = bernstein_owner(SddPaths(root.resolve()))
    if owner is None:
        return None
    return f"{args.command} refused: " + owned_message(root.resolve(), owner,
                                                       " ".join(action_words(args)))


def refuse_if_served(root: Path, args: argparse.Namespace) -> None:
    """UsageError (exit 2) with `served_refusal`'s line, when there is one."""
    refusal = served_refusal(root, args)
    if refusal is not None:
        raise UsageError(refusal)


def action_words(args: argparse.Namespace) -> list[str]:
    """The action as it would be typed after `--server URL` (the console for what the
    server has no route for)."""
    if args.command in ("run", "gates", "evolve"):
        return []
    target = getattr(args, "task_id", None) or getattr(args, "proposal_id", None)
    return [args.command, *([target] if target else [])]


def before_local_write(root: Path, args: argparse.Namespace) -> None:
    """UsageError (exit 2) when the command may not write here: Bernstein serves the
    project, or the command would run the project's code and it is not trusted."""
    refuse_if_served(root, args)
    if args.command in ("run", "gates", "approve", "evolve"):  # they run the project's code
        from console.cli.trust import require_trust

        require_trust(root, args.command)
