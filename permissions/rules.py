"""Remembered approval rules (`allow_always` / `reject_always`).

A rule matches a call by its `rule_key`, a canonical identity computed by the runtime from the tool name and its
arguments, never by a string prefix of a command. Rules here live for one session; persisted project and global
scopes build on the same `Rule` record.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from permissions.policy import CallFacts

Scope = Literal["session", "project", "global"]
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    action: Literal["allow", "deny"]
    tool: str
    rule_key: str
    label: str
    scope: Scope = "session"


class RuleStore:
    """An in-memory set of rules for one session. Deny rules win over allow rules for the same key."""

    def __init__(self) -> None:
        self._rules: dict[str, Rule] = {}

    def add(self, action: Literal["allow", "deny"], facts: CallFacts, label: str) -> Rule:
        rule = Rule(f"rule-{next(_ids)}", action, facts.tool, facts.rule_key, label)
        self._rules[rule.id] = rule
        return rule

    def match(self, facts: CallFacts) -> Rule | None:
        found = [r for r in self._rules.values() if r.rule_key == facts.rule_key and r.tool == facts.tool]
        for r in found:
            if r.action == "deny":
                return r
        return found[0] if found else None

    def revoke(self, rule_id: str) -> bool:
        return self._rules.pop(rule_id, None) is not None

    def list(self) -> list[Rule]:
        return list(self._rules.values())
