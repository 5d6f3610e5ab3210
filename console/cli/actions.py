"""The operator actions as commands: one `dispatch_action` for a local project and a
server alike, since both answer through the `Control` interface (DESIGN §1)."""

from __future__ import annotations

import argparse
import sys

from console.cli.errors import EXIT_FAILED, EXIT_OK, say
from console.control import Control

#: the commands that are operator actions (refused under --read-only)
ACTIONS = ("retry", "escalate", "cancel", "approve", "reject", "evolve", "pause", "resume")


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
    else:
        outcome = control.evolve()
    say(outcome.message, file=sys.stdout if outcome.ok else sys.stderr)
    return EXIT_OK if outcome.ok else EXIT_FAILED
