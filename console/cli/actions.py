"""The operator actions as commands: one `dispatch_action` for a local project and a
server alike, since both answer through the `Control` interface (DESIGN §1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable

from console.cli.errors import EXIT_FAILED, EXIT_OK, UsageError, say
from console.control import Control

#: the commands that are operator actions (refused under --read-only)
ACTIONS = ("retry", "escalate", "cancel", "approve", "reject", "evolve", "pause", "resume",
           "release-gate")


def resolve_targets(args: argparse.Namespace,
                    known: Callable[[str], Iterable[str]]) -> None:
    """A unique prefix of a task or proposal id stands for the id (#19.8): `known(what)`
    gives the ids of "task" or "proposal", read only when an id was given; several
    matches are bad usage (exit 2), naming them."""
    from console.sdd.ids import AmbiguousId, resolve_id

    try:
        if getattr(args, "task_id", None):
            args.task_id = resolve_id(args.task_id, known("task"), "task")
        if getattr(args, "proposal_id", None):
            args.proposal_id = resolve_id(args.proposal_id, known("proposal"), "proposal")
    except AmbiguousId as exc:
        raise UsageError(str(exc)) from None


def dispatch_action(control: Control, args: argparse.Namespace) -> int:
    """Carry out `args.command` through `control`; its outcome's message is the one line
    printed (stdout when done, stderr when refused)."""
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
    elif args.command == "release-gate":
        outcome = control.release_gate(args.mission_id, args.gate_name, args.reason)
    else:
        outcome = control.evolve()
    say(outcome.message, file=sys.stdout if outcome.ok else sys.stderr)
    return EXIT_OK if outcome.ok else EXIT_FAILED
