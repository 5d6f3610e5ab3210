"""Local writes on a project a live Bernstein runs are refused (exit 2) with the
`bernstein-tui --server …` command to use instead."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.cli import UsageError  # cli imports this module lazily


def refuse_if_served(root: Path, args: argparse.Namespace) -> None:
    """A project a live Bernstein runs (`bernstein serve` included) takes no local write:
    exit 2 naming the `--server` command to use instead."""
    from console.engine.lock import bernstein_owner, owned_message
    from console.sdd.paths import SddPaths

    if args.command == "gates" and not (root / ".sdd").is_dir():
        return  # nothing recorded: gates on any git repository
    owner = bernstein_owner(SddPaths(root.resolve()))
    if owner is not None:
        raise UsageError(f"{args.command} refused: " + owned_message(
            root.resolve(), owner, " ".join(action_words(args))))


def action_words(args: argparse.Namespace) -> list[str]:
    """The action as it would be typed after `--server URL` (the console for what the
    server has no route for)."""
    if args.command in ("run", "gates", "evolve"):
        return []
    target = getattr(args, "task_id", None) or getattr(args, "proposal_id", None)
    return [args.command, *([target] if target else [])]
