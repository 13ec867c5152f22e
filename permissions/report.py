"""Plain-text views of remembered rules and of the audit log, for `gatewright permissions` and `gatewright audit`
(and for the editor's `/permissions` command). Pure formatting: callers read the stores and print."""

from __future__ import annotations

import time
from collections.abc import Iterable

from permissions.audit import AuditEntry
from permissions.rules import SCOPE_WORDS, Rule


def rule_scope(rule: Rule, here: str | None = None) -> str:
    """Where a rule applies, said from `here` (the project the reader is in, if any): "in this project" only there,
    else the project's path."""
    if rule.scope != "project":
        return SCOPE_WORDS[rule.scope]
    if here is not None and rule.project == here:
        return f"in this project ({rule.project})"
    return f"in the project {rule.project}" if rule.project else "in a project"


def format_rules(rules: Iterable[Rule], here: str | None = None) -> str:
    """A table of rules, its columns aligned, e.g.

    ID        ACTION  COVERS        SCOPE
    p-3fa9c2  allow   `npm test`    in the project /home/me/app
    """
    rows = [("ID", "ACTION", "COVERS", "SCOPE")] + [(r.id, r.action, r.label, rule_scope(r, here)) for r in rules]
    if len(rows) == 1:
        return "No remembered rules."
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(row[:3], widths, strict=True)) + "  " + row[3] for row in rows
    )


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def audit_line(e: AuditEntry) -> str:
    timing = []
    if e.ask_ms is not None:
        timing.append(f"asked {e.ask_ms} ms")
    if e.run_ms is not None:
        timing.append(f"ran {e.run_ms} ms")
    chosen = f" option={e.option}" if e.option else ""
    return (
        f"{_when(e.ts)}  {e.session_id[:13]:<13}  {e.call_id:<16}  {e.tool:<12}  {e.decision:<5} by {e.decided_by}"
        f"{chosen} -> {e.outcome}"
        + (f" ({', '.join(timing)})" if timing else "")
        + f"\n    {e.summary}\n    why: {e.reason}"
    )


def format_audit(entries: Iterable[AuditEntry]) -> str:
    lines = [audit_line(e) for e in entries]
    return "\n".join(lines) if lines else "The audit log is empty."
