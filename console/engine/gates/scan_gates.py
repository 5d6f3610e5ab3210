"""Gates that read the changed files themselves: dlp_scan (secrets, detect-secrets),
pii_scan (personal data: phone numbers via phonenumbers, card numbers and IBANs
validated by python-stdnum, e-mail addresses), large_file, import_cycle."""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from console.engine.gates import digest as dg
from console.engine.gates.base import GateContext, Verdict
from console.engine.gates.imports import cycles, import_graph, module_names

DEFAULT_ALLOWLIST = ("FAKE", "TEST", "EXAMPLE", "DUMMY", "PLACEHOLDER", "LOCALHOST")
MAX_SCAN_BYTES = 2 * 1024 * 1024
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}\b")
_CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}[A-Z0-9]{11,30}\b")
_RESERVED_DOMAINS = ("example.com", "example.org", "example.net", "test", "invalid", "localhost",
                     "example")


def mask(value: str) -> str:
    """Never echo what a scan found: keep the shape, hide the content."""
    value = value.strip()
    if len(value) <= 6:
        return "*" * len(value)
    return f"{value[:2]}{'*' * (len(value) - 4)}{value[-2:]}"


def _allowlisted(value: str, allow: tuple[str, ...]) -> bool:
    """Bernstein's allowlist words, matched in the value found (not anywhere on its line:
    'latest' in a comment must not hide a key)."""
    upper = value.upper()
    return any(word.upper() in upper for word in allow)


def _read(ctx: GateContext, rel: str) -> tuple[str, bool] | None:
    """A changed file's text and whether it was valid UTF-8; None for binary or huge."""
    path = ctx.root / rel
    try:
        if path.stat().st_size > MAX_SCAN_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def _in_paths(rel: str, prefixes: list[str], ignored: list[str]) -> bool:
    if any(rel.startswith(p.rstrip("/") + "/") or rel == p for p in ignored):
        return False
    return not prefixes or any(rel.startswith(p.rstrip("/") + "/") or rel == p.rstrip("/")
                               or p in ("", ".", "./") for p in prefixes)


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.seconds = seconds

    def passed(self) -> bool:
        return time.monotonic() > self.end


def dlp_scan(ctx: GateContext) -> Verdict:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    allow = tuple(ctx.option("pii_allowlist_prefixes", DEFAULT_ALLOWLIST))
    deadline = _Deadline(ctx.timeout_s)
    entries = []
    scanned = 0
    with default_settings(), tempfile.TemporaryDirectory(prefix="bt-dlp-") as tmp:
        for rel in ctx.changed:
            if deadline.passed():
                return Verdict("timeout", f"secret scan stopped after {deadline.seconds:.0f} s "
                                          f"({scanned} file(s) scanned)")
            read = _read(ctx, rel)
            if read is None:
                continue
            text, utf8 = read
            scanned += 1
            target = ctx.root / rel
            if not utf8:  # detect-secrets skips what it cannot decode: give it the text
                target = Path(tmp) / f"{scanned}{Path(rel).suffix}"
                target.write_text(text, encoding="utf-8")
            collection = SecretsCollection()
            collection.scan_file(str(target))
            lines = text.splitlines()
            for secrets in collection.data.values():
                for secret in secrets:
                    value = str(secret.secret_value or "")
                    line = lines[secret.line_number - 1] if secret.line_number <= len(lines) else ""
                    if _allowlisted(value, allow) or "pragma: allowlist secret" in line:
                        continue
                    entries.append(dg.DigestEntry(f"{secret.type}: {mask(value)}", rel,
                                                  secret.line_number))
    if entries:
        digest = dg.build(entries)
        return Verdict("fail", f"{len(entries)} possible secret(s) in changed files",
                       digest.render(), {"files_scanned": scanned})
    return Verdict("pass", f"no secrets in {scanned} changed file(s)",
                   metadata={"files_scanned": scanned})


def pii_scan(ctx: GateContext) -> Verdict:
    import phonenumbers
    from stdnum import iban, luhn

    allow = tuple(ctx.option("pii_allowlist_prefixes", DEFAULT_ALLOWLIST))
    prefixes = list(ctx.option("pii_scan_paths", ["src/"]))
    ignored = list(ctx.option("pii_ignore_paths", []))
    deadline = _Deadline(ctx.timeout_s)
    entries = []
    scanned = 0
    for rel in ctx.changed:
        if not _in_paths(rel, prefixes, ignored):
            continue
        read = _read(ctx, rel)
        if read is None:
            continue
        scanned += 1
        for number, line in enumerate(read[0].splitlines(), 1):
            if deadline.passed():
                return Verdict("timeout", f"personal-data scan stopped after "
                                          f"{deadline.seconds:.0f} s")
            if "pragma: allowlist" in line or len(line) > 10_000:
                continue
            found: list[tuple[str, str]] = []
            for match in _EMAIL.finditer(line):
                domain = match.group().rsplit("@", 1)[1].lower()
                if not any(domain == d or domain.endswith("." + d) for d in _RESERVED_DOMAINS):
                    found.append(("e-mail address", match.group()))
            for phone in phonenumbers.PhoneNumberMatcher(line, "US"):
                found.append(("phone number", phone.raw_string))
            for match in _CARD.finditer(line):
                digits = re.sub(r"\D", "", match.group())
                if 13 <= len(digits) <= 19 and luhn.is_valid(digits) and len(set(digits)) > 2:
                    found.append(("payment card number", match.group()))
            for match in _IBAN.finditer(line):
                if iban.is_valid(match.group()):
                    found.append(("IBAN", match.group()))
            entries += [dg.DigestEntry(f"{kind}: {mask(value)}", rel, number)
                        for kind, value in found if not _allowlisted(value, allow)]
    meta = {"files_scanned": scanned, "paths": prefixes}
    if entries:
        return Verdict("fail", f"{len(entries)} possible personal data item(s)",
                       dg.build(entries).render(), meta)
    return Verdict("pass", f"no personal data in {scanned} changed file(s) under "
                           f"{', '.join(prefixes) or 'the project'}", metadata=meta)


def large_file(ctx: GateContext) -> Verdict:
    limit = int(ctx.option("large_file_threshold", 500))
    entries = []
    for rel in ctx.changed:
        path = ctx.root / rel
        try:
            size = path.stat().st_size
            with open(path, "rb") as handle:
                lines = sum(1 for _ in handle) if size <= 16 * 1024 * 1024 else limit + 1
        except OSError:
            continue
        if lines > limit:
            entries.append(dg.DigestEntry(f"{lines} lines (limit {limit})", rel))
    if entries:
        return Verdict("fail", f"{len(entries)} changed file(s) over {limit} lines",
                       dg.build(entries).render())
    return Verdict("pass", f"every changed file is within {limit} lines")


def import_cycle(ctx: GateContext) -> Verdict:
    changed = set()
    for rel in ctx.python_files():
        changed |= module_names(rel)
    if not changed:
        return Verdict("pass", "no Python files changed")
    loops = [c for c in cycles(import_graph(ctx.root)) if changed & set(c)]
    if loops:
        entries = [dg.DigestEntry("import cycle: " + " → ".join([*c, c[0]])) for c in loops]
        return Verdict("fail", f"{len(loops)} import cycle(s) through changed modules",
                       dg.build(entries).render())
    return Verdict("pass", "no import cycles through the changed modules")
