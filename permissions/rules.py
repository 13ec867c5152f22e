"""Remembered approval rules (`allow_always` / `reject_always`) and what each one covers.

A rule matches a call in one of two ways, never by a string prefix of a command:
- `exact`: the call's canonical identity (`CallFacts.rule_key`, computed by the runtime from the tool and its
  canonical arguments) equals the rule's key. "Always allow `npm test`" therefore never covers `npm test; rm -rf x`.
- `under`: "edits under `src/`": every path the call touches is a write inside the workspace (not protected) whose
  resolved path lies below the rule's directory, compared by path components (`/ws/src` never covers `/ws/src-evil`).

Scopes: `session` rules live in memory in one `RuleStore`; `project` rules (keyed by the workspace root) and `global`
rules ("everywhere") are persisted by `permissions.store.RuleDatabase` in the state dir, so every session and every
process sharing that state dir sees them, and a revocation applies at the next decision. Deny beats allow.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from permissions.policy import CallFacts
    from permissions.store import RuleDatabase

log = logging.getLogger("gatewright.permissions")

Scope = Literal["session", "project", "global"]
RuleAction = Literal["allow", "deny"]
MatchKind = Literal["exact", "under"]
_ids = itertools.count(1)

SCOPE_WORDS: dict[str, str] = {"session": "in this session", "project": "in this project", "global": "everywhere"}


def is_within(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or below it, by path components (both absolute and resolved)."""
    if path == directory:
        return True
    base = directory if directory.endswith(os.sep) else directory + os.sep
    return path.startswith(base)


@dataclass(frozen=True, slots=True)
class Rule:
    """One remembered decision. `label` says what it covers ("`npm test`", "edits under `src/`")."""

    id: str
    action: RuleAction
    tool: str
    rule_key: str
    label: str
    scope: Scope = "session"
    match: MatchKind = "exact"
    project: str | None = None
    created_at: float = 0.0

    def describe(self) -> str:
        """e.g. "always allow `npm test` in this project" (with the project root for project rules)."""
        verb = "always allow" if self.action == "allow" else "always reject"
        where = SCOPE_WORDS[self.scope]
        return f"{verb} {self.label} {where}"

    def covers(self, facts: CallFacts) -> bool:
        if self.match == "under":
            return covered_by_directory(facts, self.rule_key)
        if self.tool != facts.tool:
            return False
        if self.scope == "global":
            return bool(facts.portable_key) and self.rule_key == facts.portable_key
        return self.rule_key == facts.rule_key


def covered_by_directory(facts: CallFacts, directory: str) -> bool:
    """An "edits under DIR" rule covers a call only if everything it touches is an ordinary write below DIR."""
    if facts.effect != "write" or not facts.paths or facts.dangerous:
        return False
    return all(p.writes and p.klass == "inside" and is_within(p.path, directory) for p in facts.paths)


def pick(rules: list[Rule], facts: CallFacts) -> Rule | None:
    """The rule that decides a call: any covering deny rule first, else the first covering allow rule."""
    found = [r for r in rules if r.covers(facts)]
    for r in found:
        if r.action == "deny":
            return r
    return found[0] if found else None


class RuleStore:
    """The rules one session sees: its own in-memory rules plus, when a database is attached, the persisted rules of
    its project and the global ones.

    `configured` are the rules of the config file's `[permissions]` table: they apply like the others and are never
    revoked here (the file is their source). `list()` and `revoke(rule_id)` are the API of the `/permissions`
    command and of `gatewright permissions`.
    """

    def __init__(self, database: RuleDatabase | None = None, project: str | None = None,
                 configured: tuple[Rule, ...] = ()) -> None:
        self._rules: dict[str, Rule] = {}
        self.database = database
        self.project = project
        self.configured = configured

    @property
    def persistent(self) -> bool:
        """Whether project and global scopes are available (a state dir and a workspace root are known)."""
        return self.database is not None and self.project is not None

    def add(self, action: RuleAction, facts: CallFacts, label: str, scope: Scope = "session",
            match: MatchKind = "exact", directory: str | None = None) -> Rule:
        """Remember a decision. A persisted scope that cannot be written falls back to this session (logged)."""
        if match == "under":
            if directory is None:
                raise ValueError("an `under` rule needs a directory")
            key, tool = directory, "*"
        else:
            key = facts.portable_key if scope == "global" else facts.rule_key
            tool = facts.tool
        rule = Rule(f"s{next(_ids)}", action, tool, key, label, scope, match,
                    self.project if scope == "project" else None, time.time())
        if scope != "session":
            if self.database is not None and (scope == "global" or self.project is not None) and \
                    (match == "under" or key):
                try:
                    return self.database.add(rule)
                except Exception:  # the choice still holds for this session
                    log.warning("could not persist a %s rule; keeping it for this session only", scope,
                                exc_info=True)
            rule = replace(rule, scope="session", project=None)
        self._rules[rule.id] = rule
        return rule

    def _persisted(self) -> list[Rule]:
        if self.database is None:
            return []
        try:
            return self.database.rules_for(self.project)
        except Exception:  # an unreadable database is no rule (the call asks)
            log.warning("could not read the remembered rules database", exc_info=True)
            return []

    def match(self, facts: CallFacts) -> Rule | None:
        return pick([*self._rules.values(), *self._persisted(), *self.configured], facts)

    def revoke(self, rule_id: str) -> bool:
        if self._rules.pop(rule_id, None) is not None:
            return True
        if self.database is not None and any(r.id == rule_id for r in self._persisted()):
            return self.database.revoke(rule_id)
        return False

    def list(self) -> list[Rule]:
        """This session's rules, then the project's and the global ones (newest last within each), then the config
        file's."""
        return [*self._rules.values(), *self._persisted(), *self.configured]
