"""Gates that read the changed files themselves: dlp_scan (secrets, detect-secrets),
pii_scan (personal data: phone numbers via phonenumbers, card numbers and IBANs
validated by python-stdnum, e-mail addresses), large_file, import_cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from console.engine.gates import digest as dg
from console.engine.gates.base import GateContext, Verdict
from console.engine.gates.python_gates import module_names, project_files

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


def _allowlisted(text: str, allow: tuple[str, ...]) -> bool:
    upper = text.upper()
    return any(word.upper() in upper for word in allow)


def _read(ctx: GateContext, rel: str) -> str | None:
    path = ctx.root / rel
    try:
        if path.stat().st_size > MAX_SCAN_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def _in_paths(rel: str, prefixes: list[str], ignored: list[str]) -> bool:
    if any(rel.startswith(p.rstrip("/") + "/") or rel == p for p in ignored):
        return False
    return not prefixes or any(rel.startswith(p.rstrip("/") + "/") or rel == p.rstrip("/")
                               or p in ("", ".", "./") for p in prefixes)


def dlp_scan(ctx: GateContext) -> Verdict:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    allow = tuple(ctx.option("pii_allowlist_prefixes", DEFAULT_ALLOWLIST))
    entries = []
    scanned = 0
    with default_settings():
        for rel in ctx.changed:
            text = _read(ctx, rel)
            if text is None:
                continue
            scanned += 1
            collection = SecretsCollection()
            collection.scan_file(str(ctx.root / rel))
            lines = text.splitlines()
            for secrets in collection.data.values():
                for secret in secrets:
                    line = lines[secret.line_number - 1] if secret.line_number <= len(lines) else ""
                    if _allowlisted(line, allow) or "pragma: allowlist secret" in line:
                        continue
                    entries.append(dg.DigestEntry(
                        f"{secret.type}: {mask(str(secret.secret_value or ''))}", rel,
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
    entries = []
    scanned = 0
    for rel in ctx.changed:
        if not _in_paths(rel, prefixes, ignored):
            continue
        text = _read(ctx, rel)
        if text is None:
            continue
        scanned += 1
        for number, line in enumerate(text.splitlines(), 1):
            if _allowlisted(line, allow) or "pragma: allowlist" in line:
                continue
            found: list[tuple[str, str]] = []
            for match in _EMAIL.finditer(line):
                domain = match.group().rsplit("@", 1)[1].lower()
                if not any(domain == d or domain.endswith("." + d) for d in _RESERVED_DOMAINS):
                    found.append(("e-mail address", match.group()))
            for match in phonenumbers.PhoneNumberMatcher(line, "US"):
                found.append(("phone number", match.raw_string))
            for match in _CARD.finditer(line):
                digits = re.sub(r"\D", "", match.group())
                if 13 <= len(digits) <= 19 and luhn.is_valid(digits) and len(set(digits)) > 2:
                    found.append(("payment card number", match.group()))
            for match in _IBAN.finditer(line):
                if iban.is_valid(match.group()):
                    found.append(("IBAN", match.group()))
            entries += [dg.DigestEntry(f"{kind}: {mask(value)}", rel, number)
                        for kind, value in found]
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


def _module_of(root: Path, path: Path) -> str | None:
    names = module_names(str(path.relative_to(root)))
    return min(names, key=len) if names else None


def import_graph(root: Path) -> dict[str, set[str]]:
    """Project module → the project modules it imports at module level (relative ones too)."""
    files = project_files(root)
    modules = {m: p for p in files if (m := _module_of(root, p))}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in tree.body:  # module level only: imports inside functions break cycles
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join([*parts, base] if base else parts)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


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
