"""`ToolApprovalDecorator`: asks a `PermissionGateway` before a wrapped executor runs anything.

It is generic over the executor it wraps (this package does not import the runtime): the runtime hands it a
`describe` function that turns a call into an `ApprovalSubject` (the facts the policy needs and the presentation a
human needs). The mode is read at call time, so a mode change applies to the next call without rebuilding anything.

Outcomes are typed, never string prefixes:
- `ApprovalRejected`: a human (now, or through a remembered `reject_always`) said no. The call does not run and the
  runtime stops the turn.
- `ApprovalCancelled`: the permission question was cancelled because the turn is being cancelled.
- `ApprovalDenied`: the mode forbids the call (for example a write in `read-only`); the model is told and may adapt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio

from permissions.gateway import PermissionGateway, PermissionOption, PermissionOutcome, PermissionRequest
from permissions.modes import ApprovalMode
from permissions.policy import CallFacts, Decision, decide
from permissions.rules import RuleStore


class ApprovalRejected(Exception):
    def __init__(self, reason: str, option_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.option_id = option_id


class ApprovalCancelled(Exception):
    pass


class ApprovalDenied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ApprovalSubject:
    """One call as the policy and the human see it. `summary` is a short label such as "`npm test`"."""

    facts: CallFacts
    title: str
    kind: str
    raw_input: Any
    summary: str
    content: tuple[dict[str, Any], ...] = ()
    locations: tuple[dict[str, Any], ...] = ()
    call_id: str = ""


C = TypeVar("C")
X = TypeVar("X", bound="GrantableContext")
R = TypeVar("R")


class GrantableContext(Protocol):
    def with_grants(self, paths: frozenset[str]) -> Any: ...


class Executor(Protocol[C, X, R]):  # type: ignore[misc]
    async def execute(self, call: C, ctx: X) -> R: ...


AuditHook = Callable[[ApprovalSubject, Decision, PermissionOutcome | None], None]


def standard_options(subject: ApprovalSubject) -> tuple[PermissionOption, ...]:
    """The four standard options, each saying exactly what it covers."""
    what = subject.summary
    return (
        PermissionOption("allow_once", "Allow once", "allow_once"),
        PermissionOption("allow_always", f"Always allow {what} in this session", "allow_always"),
        PermissionOption("reject_once", "Reject", "reject_once"),
        PermissionOption("reject_always", f"Always reject {what} in this session", "reject_always"),
    )


class ToolApprovalDecorator(Generic[C, X, R]):
    def __init__(
        self,
        delegate: Executor[C, X, R],
        gateway: PermissionGateway,
        describe: Callable[[C, X], Awaitable[ApprovalSubject]],
        mode: Callable[[], ApprovalMode],
        rules: RuleStore,
        audit: AuditHook | None = None,
    ) -> None:
        self.delegate = delegate
        self.gateway = gateway
        self.describe = describe
        self.mode = mode
        self.rules = rules
        self.audit = audit
        # One question at a time: parallel calls queue behind the human, who sees them in order.
        self._ask_lock = anyio.Lock()

    async def execute(self, call: C, ctx: X) -> R:
        subject = await self.describe(call, ctx)
        decision = decide(subject.facts, self.mode(), self.rules)
        if decision.action == "ask":
            async with self._ask_lock:
                # A rule may have been added while this call waited for the previous question.
                decision = decide(subject.facts, self.mode(), self.rules)
                if decision.action == "ask":
                    await self._ask(subject, decision)
            if decision.action == "ask":
                # Run outside the lock: an approved call may itself ask (a subagent's calls go through this same
                # decorator), and approved calls run in parallel.
                return await self._run(call, ctx, subject)
        self._audit(subject, decision, None)
        if decision.action == "deny":
            if decision.rule_id is not None:
                raise ApprovalRejected(decision.reason, None)
            raise ApprovalDenied(decision.reason)
        return await self._run(call, ctx, subject)

    async def _run(self, call: C, ctx: X, subject: ApprovalSubject) -> R:
        outside = frozenset(p.path for p in subject.facts.paths if p.klass != "inside")
        if outside:
            ctx = ctx.with_grants(outside)
        return await self.delegate.execute(call, ctx)

    async def _ask(self, subject: ApprovalSubject, decision: Decision) -> None:
        options = standard_options(subject)
        request = PermissionRequest(
            call_id=subject.call_id,
            tool=subject.facts.tool,
            title=subject.title,
            kind=subject.kind,
            raw_input=subject.raw_input,
            options=options,
            reason=decision.reason,
            content=subject.content,
            locations=subject.locations,
            details=decision.asked_because,
        )
        outcome = await self.gateway.request(request)
        self._audit(subject, decision, outcome)
        if outcome.cancelled:
            raise ApprovalCancelled()
        kind = next((o.kind for o in options if o.option_id == outcome.option_id), None)
        if kind == "allow_always":
            self.rules.add("allow", subject.facts, subject.summary)
        elif kind == "reject_always":
            self.rules.add("deny", subject.facts, subject.summary)
        if kind not in ("allow_once", "allow_always"):
            # An unknown option id is not an approval: fail closed.
            raise ApprovalRejected(f"{subject.facts.tool} was rejected ({outcome.option_id or 'no option'})",
                                   outcome.option_id)

    def _audit(self, subject: ApprovalSubject, decision: Decision, outcome: PermissionOutcome | None) -> None:
        if self.audit is not None:
            self.audit(subject, decision, outcome)
