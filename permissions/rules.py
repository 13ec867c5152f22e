"""Remembered approval rules (`allow_always` / `reject_always`) and what each one covers.

A rule covers exactly one call identity, never a string prefix of a command: the call's canonical identity
(`CallFacts.rule_key`, computed by the runtime from the tool and everything that decides its effect) equals the
rule's key. "Always allow `npm test`" therefore never covers `npm test; rm -rf x`, and "always allow" for input sent
to a background process never covers other input.

Scopes: `session` rules live in memory in one `RuleStore`; `project` rules (keyed by the workspace root) and `global`
rules ("everywhere", bound to `CallFacts.everywhere_key`) are persisted by `permissions.store.RuleDatabase` in the
state dir, so every session and every process sharing that state dir sees them, and a revocation applies at the next
decision. Deny beats allow. A call tied to this agent process (`CallFacts.session_only`) is only ever remembered for
the session. Which scope an "always" answer uses is the session's setting (`RuleStore.remember`, see
`permissions.options`).
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from permissions.policy import RulesUnknown
from permissions.redaction import redact  # a label quotes the command: no secret in it reaches the rules file
from permissions.shared_sqlite import known_state_dir_problem

if TYPE_CHECKING:
    from permissions.policy import CallFacts
    from permissions.store import RuleDatabase

log = logging.getLogger("gatewright.permissions")

Scope = Literal["session", "project", "global"]
RuleAction = Literal["allow", "deny"]
MatchKind = Literal["exact"]  # the rules file's `match` column; "edits under DIR" rules are no longer offered
_ids = itertools.count(1)

SCOPE_WORDS: dict[str, str] = {"session": "in this session", "project": "in this project", "global": "everywhere"}


@dataclass(frozen=True, slots=True)
class Rule:
    """One remembered decision. `label` says what it covers ("`npm test`", "this edit to `a.py`")."""

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
        if self.match != "exact" or self.tool != facts.tool:
            return False
        if self.scope == "global":
            # An "everywhere" approval never covers a call that needs a closer look or belongs to this process.
            key = facts.portable_key if self.action == "deny" else facts.everywhere_key
            return bool(key) and self.rule_key == key
        return self.rule_key == facts.rule_key


def effective_scope(facts: CallFacts, wanted: Scope) -> Scope:
    """Where an "always" answer about this call may be remembered, given the wanted scope: a call tied to this agent
    process only in the session; "everywhere" only for a call with an everywhere key, else the project."""
    if facts.session_only:
        return "session"
    if wanted == "global" and not facts.everywhere_key:
        return "project"
    return wanted


def pick(rules: list[Rule], facts: CallFacts) -> Rule | None:
    """The rule that decides a call: any covering deny rule first, else the first covering allow rule."""
    found = [r for r in rules if r.covers(facts)]
    for r in found:
        if r.action == "deny":
            return r
    return found[0] if found else None


class RuleStore:
    """The rules one session sees: its own in-memory rules plus, when a database is attached, the persisted rules of
    its project and the global ones; and `remember`, the session's setting of where an "always" answer is kept.

    `match` fails closed: when the persisted rules cannot be read it answers `RulesUnknown` (so the call asks), unless
    one of this session's own rules decides: a session rejection always does, a session approval only if the user
    gave it while the persisted rules were unreadable (the question said so, and the answer is about this very call).

    `configured` are the rules of the config file's `[permissions]` table: they apply like the others and are never
    revoked here (the file is their source). `list()` and `revoke(rule_id)` are the API of the `/permissions`
    command and of `gatewright permissions`.
    """

    def __init__(
        self,
        database: RuleDatabase | None = None,
        project: str | None = None,
        remember: Scope = "session",
        configured: tuple[Rule, ...] = (),
        other_roots: tuple[str, ...] = (),
    ) -> None:
        self._rules: dict[str, Rule] = {}
        # The other roots of a multi-root workspace: each is "this project" as much as `project` (the first root):
        # a call in one is remembered for that root, and the rules of every root apply.
        self.other_roots = tuple(r for r in other_roots if r != project)
        self._given_blind: set[str] = set()  # ids of session approvals given while the persisted rules were unknown
        self._unknown = False
        self.database = database
        self.project = project
        self.remember: Scope = remember
        self.configured = configured

    @property
    def persistent(self) -> bool:
        """Whether project and global scopes are available now: a state dir and a workspace root are known, and the
        rules file can be read and written."""
        db = self.database
        return (
            db is not None
            and self.project is not None
            and db.can_save
            and not self._unknown
            and known_state_dir_problem(db.directory) is None
        )

    @property
    def unknown(self) -> bool:
        """Whether the persisted rules could not be read at the last attempt (calls then ask; see `match`)."""
        return self._unknown

    @property
    def problem(self) -> str | None:
        """Why the persisted rules cannot be used right now, in one line (for `/status`), or None."""
        db = self.database
        if db is None:
            return None
        return db.problem or known_state_dir_problem(db.directory)

    def add(self, action: RuleAction, facts: CallFacts, label: str, scope: Scope = "session") -> Rule:
        """Remember a decision. A call tied to this agent process is remembered for the session only, one that may not
        be remembered everywhere for the project; a persisted scope that cannot be written falls back to this session
        (said once, see `RuleDatabase`)."""
        scope = effective_scope(facts, scope)
        key = facts.everywhere_key if scope == "global" else facts.rule_key
        rule = Rule(
            f"s{next(_ids)}",
            action,
            facts.tool,
            key,
            redact(label),
            scope,
            "exact",
            (facts.root if facts.root in self.other_roots else self.project) if scope == "project" else None,
            time.time(),
        )
        if scope != "session":
            if self.database is not None and (scope == "global" or self.project is not None) and key:
                try:
                    return self.database.add(rule)
                except Exception:  # the choice still holds for this session; the database said why, once
                    log.debug("could not persist a %s rule; keeping it for this session only", scope)
            rule = replace(rule, scope="session", project=None)
        self._rules[rule.id] = rule
        if self._unknown and action == "allow":
            self._given_blind.add(rule.id)
        return rule

    def _persisted(self) -> list[Rule]:
        """The project's and the global rules. Raises `RulesUnreadable` when they cannot be read."""
        if self.database is None:
            return []
        try:
            found = self.database.rules_for(self.project)
            for root in self.other_roots:
                seen = {r.id for r in found}
                found += [r for r in self.database.rules_for(root) if r.scope == "project" and r.id not in seen]
        except Exception:
            self._unknown = True
            raise
        self._unknown = False
        return found

    def match(self, facts: CallFacts) -> Rule | RulesUnknown | None:
        own = list(self._rules.values())
        try:
            persisted = self._persisted()
        except Exception as exc:
            reason = getattr(exc, "reason", None) or str(exc)
            # Rejections known without the file still decide (the session's own and the config file's).
            denied = next((r for r in [*own, *self.configured] if r.action == "deny" and r.covers(facts)), None)
            if denied is not None:
                return denied
            blind = next((r for r in own if r.id in self._given_blind and r.covers(facts)), None)
            return blind if blind is not None else RulesUnknown(f"the remembered rules cannot be read ({reason})")
        return pick([*own, *persisted, *self.configured], facts)

    def revoke(self, rule_id: str) -> bool:
        """Forget a rule of this session, or a persisted one this session sees. Raises `RulesUnreadable` when the
        rule may be a persisted one and the rules file cannot be read."""
        if self._rules.pop(rule_id, None) is not None:
            self._given_blind.discard(rule_id)
            return True
        if self.database is not None and any(r.id == rule_id for r in self._persisted()):
            return self.database.revoke(rule_id)
        return False

    def list(self) -> list[Rule]:
        """This session's rules, then the project's and the global ones (newest last within each), then the config
        file's. When the persisted rules cannot be read, they are left out (`problem` says why)."""
        try:
            persisted = self._persisted()
        except Exception:
            persisted = []
        return [*self._rules.values(), *persisted, *self.configured]
