"""`bernstein-tui trust`, and the refusal of every command that would run an untrusted
project's code (DESIGN §7: `run`, `gates`, `approve`, `evolve`)."""

from __future__ import annotations

import time
from pathlib import Path

from console.cli.errors import EXIT_OK, UsageError, warn
from console.sdd.sanitize import display_text
from console.sdd.trust import TrustError, check, load_records, revoke, trust, what_runs


def _warn(warning: str | None) -> None:
    if warning:
        warn(warning)


def require_trust(root: Path, command: str) -> None:
    """One line and exit 2 unless `root` is trusted as it is now."""
    status = check(root)
    _warn(status.warning)
    if not status.trusted:
        raise UsageError(f"{command} refused: {status.reason}")


def record_trust(root: Path, why: str) -> None:
    """Trust a project this command just created; a trust file we cannot write is said."""
    try:
        record, warning = trust(root)
    except TrustError as exc:
        warn(f"{why} not recorded as trusted: {exc}")
        return
    _warn(warning)
    print(f"trusted {display_text(record.path)} ({why}; config hash {record.digest[:12]})")


def cmd_trust(root: Path, *, revoking: bool, listing: bool) -> int:
    if listing:
        records, warning = load_records()
        _warn(warning)
        if not records:
            print("no project is trusted")
        for record in sorted(records.values(), key=lambda r: r.path):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.trusted_at))
            print(f"{record.digest[:12]}  {when}  {display_text(record.path)}")
        return EXIT_OK
    try:
        if revoking:
            found, warning = revoke(root)
            _warn(warning)
            print(f"{'no longer trusted' if found else 'was not trusted'}: "
                  f"{display_text(str(root))}")
            return EXIT_OK
        lines = what_runs(root)
        record, warning = trust(root)
    except TrustError as exc:
        raise UsageError(str(exc)) from None
    _warn(warning)
    print(f"trusted {display_text(record.path)} (config hash {record.digest[:12]})")
    print("its engine may now run:")
    for line in lines:
        print(f"  - {line}")
    return EXIT_OK
