"""Plain-text views of remembered rules and of the audit log, for `gatewright permissions` and `gatewright audit`
(and for the editor's `/permissions` command). Pure formatting: callers read the stores and print."""

from __future__ import annotations

import time
from collections.abc import Iterable

from permissions.audit import AuditEntry
from permissions.rules import SCOPE_WORDS, Rule


def rule_line(rule: Rule) -> str:
    """e.g. `p-3fa9c2  allow  `npm test`  in this project (/home/me/app)`."""
    where = SCOPE_WORDS[rule.scope] + (f" ({rule.project})" if rule.scope == "project" and rule.project else "")
    return f"{rule.id}  {rule.action:<5}  {rule.label}  {where}"


def format_rules(rules: Iterable[Rule]) -> str:
    lines = [rule_line(r) for r in rules]
    if not lines:
        return "No remembered rules."
    return "\n".join(["ID  ACTION  COVERS  SCOPE", *lines])


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
