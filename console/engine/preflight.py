"""What must hold before the engine touches a project (DESIGN §7).

The operator trusts it (none of its code runs before that), and neither `.sdd/` nor
a directory the engine writes or removes things in is a symbolic link (a committed
`.sdd/worktrees -> ../..` must not turn a clean-up into deleting the operator's files).
"""

from __future__ import annotations

from pathlib import Path

from console.engine.errors import EngineError, Untrusted
from console.sdd.confine import UnsafePath, check_sdd_tree


def preflight(root: Path, *, trusted: bool) -> None:
    """Untrusted or EngineError (one line each) unless the engine may start on `root`;
    `trusted`: the caller vouches for the project (a demo it has just written)."""
    if not trusted:
        from console.sdd.trust import check

        status = check(root)
        if not status.trusted:
            raise Untrusted(status.reason)
    try:
        check_sdd_tree(root)
    except UnsafePath as exc:
        raise EngineError(f"{exc}; the engine does not start (the console still "
                          "watches)") from None
