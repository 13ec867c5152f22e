"""The policy: a pure function from (call facts, mode, remembered rules) to allow / ask / deny with a reason.

Deny beats ask beats allow, and anything the facts cannot vouch for asks (fails closed). The function performs no
I/O: the runtime gathers the facts (which paths a call touches and where they resolve, what a command does) and
this module only decides. Remembered rules that cannot be read are not "no rule": the rule source says so with
`RulesUnknown`, and every call a remembered rejection might cover then asks, in every mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from permissions.modes import ApprovalMode
    from permissions.rules import Rule

Action = Literal["allow", "ask", "deny"]
# A rule key starting with this marker names something that exists only in this agent process (a background process
# id such as `proc_1`, which restarts in every process): such a call is never remembered beyond the session.
SESSION_ONLY_KEY = "session-only:"
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

    `secrets` says, one reason each, which files the call reads or changes may hold secrets (a well-known secret
    file such as `.env`, or a file holding the value of a configured key): such a call asks in every mode and is
    refused in `read-only`, because no redaction can follow a value the model has read through a transform.

    `effect` is what the call does at most (`read` for reads and searches, `write` for file changes, `execute` for
    running or driving a process, `other` when unknown). `proven_read_only` is set only when an analysis (for
    example of a shell command) proved that an `execute` call cannot change anything. `rule_key` identifies the call
    for remembered rules: two calls with the same key are the same call. `portable_key` is the same identity with
    the workspace root written as a placeholder (what an "everywhere" rule binds to), and `root` is the workspace
    root the paths were resolved against. A key carries everything that decides the call's effect (a command and its
    working directory, a file's resolved path and a digest of the new content, the input sent to a process).
    `network_hosts` is the user's `[sandbox] network` (None: not limited); `network_unheld`, for a call that starts
    a process, why the sandbox cannot hold that limit here ("" when it can, or when it does not apply).
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
    secrets: tuple[str, ...] = ()
    network_hosts: tuple[str, ...] | None = None
    network_unheld: str = ""

    @property
    def session_only(self) -> bool:
        """Whether the call is tied to this agent process (see `SESSION_ONLY_KEY`): remembered for the session only."""
        return self.rule_key.startswith(SESSION_ONLY_KEY)

    @property
    def everywhere_key(self) -> str:
        """The key an "everywhere" rule would bind to, or "" when the call may not be remembered everywhere: only a
        command with a portable key, no reason for a closer look, and nothing tied to this agent process."""
        if self.effect != "execute" or self.dangerous or self.secrets or self.session_only:
            return ""
        return self.portable_key


@dataclass(frozen=True, slots=True)
class RulesUnknown:
    """The remembered rules could not be read (a corrupt or unreadable rules database): any of them, a rejection
    included, might cover the call. `reason` says what failed, in one line."""

    reason: str


if TYPE_CHECKING:
    from typing import TypeAlias

    RuleMatch: TypeAlias = Rule | RulesUnknown | None


class RuleSource(Protocol):
    """Anything that can say which remembered rule covers a call (deny rules first), or that it cannot know (a rule
    it cannot read might). See `permissions.rules`."""

    def match(self, facts: CallFacts) -> RuleMatch: ...


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

    A rule source that cannot say (it answers `RulesUnknown`, or fails) is not "no rule": a remembered rejection
    might cover the call, so it asks in every mode (or is denied by `read-only`), and is never allowed by accident.
    Deny beats ask beats allow: `read-only`'s refusals, then a remembered rule, then every reason to ask.
    """
    if mode not in ("manual", "safe", "auto", "read-only"):
        mode = "manual"
    by = f"mode:{mode}"
    view = _View.of(facts)
    if mode == "read-only" and (refused := _read_only_refusal(facts, view)):
        return Decision("deny", f"read-only mode: {refused}", by=by)
    found = _remembered(facts, rules)
    unknown = found if isinstance(found, RulesUnknown) else None
    rule = None if isinstance(found, RulesUnknown) else found
    if rule is not None and rule.action in ("deny", "allow"):
        verb = "rejected" if rule.action == "deny" else "allowed"
        return Decision(rule.action, f"{verb} by a remembered rule: {rule.describe()}", rule.id, by=f"rule:{rule.id}")
    reasons = _reasons_to_ask(facts, view, mode, unknown)
    if reasons:
        return Decision("ask", reasons[0], asked_because=tuple(reasons), by=by)
    return Decision("allow", f"{mode} mode allows this {facts.effect} call", by=by)


@dataclass(frozen=True, slots=True)
class _View:
    """What the decision reads of a call's paths and effect."""

    writes: tuple[PathFact, ...]
    outside: tuple[PathFact, ...]
    protected: tuple[PathFact, ...]
    harmless: bool  # a read, a proven read-only command, or a call its tool says only reads

    @classmethod
    def of(cls, facts: CallFacts) -> _View:
        # A command proven read-only writes nothing, whatever its working directory (which is marked as written to).
        writes = tuple(p for p in facts.paths if p.writes and not facts.proven_read_only)
        return cls(
            writes=writes,
            outside=tuple(p for p in facts.paths if p.klass == "outside"),
            protected=tuple(p for p in writes if p.klass == "protected"),
            harmless=facts.effect == "read"
            or facts.proven_read_only
            or (facts.read_only_hint and facts.effect != "write"),
        )


def _read_only_refusal(facts: CallFacts, view: _View) -> str | None:
    """Why `read-only` refuses the call, or None."""
    if facts.secrets:
        return facts.secrets[0]
    if view.outside:
        return f"{view.outside[0].path} is outside the workspace"
    if not view.harmless or view.writes:
        return f"{facts.tool} would write or run a process"
    return None


def _remembered(facts: CallFacts, rules: RuleSource | None) -> RuleMatch:
    """The remembered rule that covers the call, None, or `RulesUnknown` when the rules cannot say."""
    if rules is None:
        return None
    try:
        return rules.match(facts)
    except Exception as exc:  # fail closed: a rule source that cannot answer might have held a rejection
        return RulesUnknown(f"the remembered rules could not be checked ({exc})")


def _reasons_to_ask(facts: CallFacts, view: _View, mode: str, unknown: RulesUnknown | None) -> list[str]:
    """Every reason to ask, the first one shown: a file that may hold secrets (in every mode, `auto` included), an
    outside or protected path, a dangerous command, a network limit the sandbox cannot hold, the mode itself, rules
    that could not be read."""
    reasons: list[str] = list(facts.secrets)
    if view.outside:
        reasons.append(f"{view.outside[0].path} is outside the workspace")
    if view.protected:
        reasons.append(f"{view.protected[0].path} is a protected path")
    if facts.dangerous:
        reasons.append(facts.dangerous[0])
    if facts.network_unheld and facts.effect == "execute" and not facts.proven_read_only:
        # It would get the network, which the sandbox cannot limit to [sandbox] network here: asked in every mode.
        reasons.append(facts.network_unheld)
    if mode == "manual":
        reasons.append("manual mode asks for every call")
    elif mode == "safe" and not view.harmless:
        reasons.append(f"safe mode asks before {facts.effect if facts.effect != 'other' else 'unknown'} actions")
    if unknown is not None:
        reasons.append(f"{unknown.reason}; a remembered rejection might cover this call")
    return reasons
