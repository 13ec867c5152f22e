"""The policy: a pure function from (call facts, mode, remembered rules) to allow / ask / deny with a reason.

Deny beats ask beats allow, and anything the facts cannot vouch for asks (fails closed). The function performs no
I/O: the runtime gathers the facts (which paths a call touches and where they resolve, what a command does) and
this module only decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from permissions.modes import ApprovalMode
    from permissions.rules import Rule

Action = Literal["allow", "ask", "deny"]
Effect = Literal["read", "write", "execute", "other"]
PathClass = Literal["inside", "outside", "protected"]


@dataclass(frozen=True, slots=True)
class PathFact:
    """One path a call touches, already resolved by the runtime's workspace boundary."""

    path: str
    klass: PathClass
    writes: bool


@dataclass(frozen=True, slots=True)
class CallFacts:
    """A small structural view of a tool call: all the policy is allowed to know.

    `effect` is what the call does at most (`read` for reads and searches, `write` for file changes, `execute` for
    running or driving a process, `other` when unknown). `proven_read_only` is set only when an analysis (for
    example of a shell command) proved that an `execute` call cannot change anything. `rule_key` identifies the call
    for remembered rules: two calls with the same key are the same call. `portable_key` is the same identity with
    the workspace root written as a placeholder (what an "everywhere" rule binds to), and `root` is the workspace
    root the paths were resolved against (what "edits under `src/`" rules are relative to).
    """

    tool: str
    effect: Effect
    rule_key: str
    paths: tuple[PathFact, ...] = ()
    read_only_hint: bool = False
    proven_read_only: bool = False
    dangerous: tuple[str, ...] = ()
    portable_key: str = ""
    root: str = ""


class RuleSource(Protocol):
    """Anything that can say which remembered rule covers a call (deny rules first). See `permissions.rules`."""

    def match(self, facts: CallFacts) -> Rule | None: ...


@dataclass(frozen=True, slots=True)
class Decision:
    """`by` names what decided, for the audit log and the tool call's `_meta`: `mode:<mode>` or `rule:<id>`."""

    action: Action
    reason: str
    rule_id: str | None = None
    asked_because: tuple[str, ...] = field(default=())
    by: str = ""


def decide(facts: CallFacts, mode: ApprovalMode | None, rules: RuleSource | None = None) -> Decision:
    """Decide what to do with one call. An unknown or missing mode is treated as `manual` (it never fails open).

    A rule source that fails (a broken rules database) counts as "no rule": the call then asks or is denied by the
    mode, never allowed by accident.
    """
    if mode not in ("manual", "safe", "auto", "read-only"):
        mode = "manual"
    by = f"mode:{mode}"
    # A command proven read-only writes nothing, whatever its working directory (which is marked as written to).
    writes = [p for p in facts.paths if p.writes and not facts.proven_read_only]
    outside = [p for p in facts.paths if p.klass == "outside"]
    protected = [p for p in writes if p.klass == "protected"]
    harmless = facts.effect == "read" or facts.proven_read_only or (facts.read_only_hint and facts.effect != "write")

    # 1. deny
    if mode == "read-only":
        if outside:
            return Decision("deny", f"read-only mode: {outside[0].path} is outside the workspace", by=by)
        if not harmless or writes:
            return Decision("deny", f"read-only mode: {facts.tool} would write or run a process", by=by)
    remembered = None
    if rules is not None:
        try:
            remembered = rules.match(facts)
        except Exception:  # fail closed: an unreadable rule is no rule
            remembered = None
    if remembered is not None and remembered.action == "deny":
        return Decision("deny", f"rejected by a remembered rule: {remembered.describe()}", remembered.id,
                        by=f"rule:{remembered.id}")
    if remembered is not None and remembered.action == "allow":
        return Decision("allow", f"allowed by a remembered rule: {remembered.describe()}", remembered.id,
                        by=f"rule:{remembered.id}")

    # 2. ask
    reasons: list[str] = []
    if outside:
        reasons.append(f"{outside[0].path} is outside the workspace")
    if protected:
        reasons.append(f"{protected[0].path} is a protected path")
    if facts.dangerous:
        reasons.append(facts.dangerous[0])
    if mode == "manual":
        reasons.append("manual mode asks for every call")
    elif mode == "safe" and not harmless:
        reasons.append(f"safe mode asks before {facts.effect if facts.effect != 'other' else 'unknown'} actions")
    if reasons:
        return Decision("ask", reasons[0], asked_because=tuple(reasons), by=by)

    # 3. allow
    return Decision("allow", f"{mode} mode allows this {facts.effect} call", by=by)
