"""`ToolApprovalDecorator`: asks a `PermissionGateway` before a wrapped executor runs anything.

It is generic over the executor it wraps (this package does not import the runtime): the runtime hands it a
`describe` function that turns a call into an `ApprovalSubject` (the facts the policy needs and the presentation a
human needs). The mode is read at call time, so a mode change applies to the next call without rebuilding anything.

Outcomes are typed, never string prefixes:
- `ApprovalRejected`: a human (now, through a remembered `reject_always`, or by not answering in time) said no. The
  call does not run and the runtime stops the turn, telling the user what was refused.
- `ApprovalDeclined`: the human rejected the call but chose to let the model try another way; the model gets a
  `TOOL_ERROR` and the turn goes on. A gateway that can (`ReasonGateway`) is then asked why, and the model gets that
  too.
- `ApprovalCancelled`: the permission question was cancelled because the turn is being cancelled.
- `ApprovalDenied`: the mode forbids the call (for example a write in `read-only`); the model is told and may adapt.

An approval binds to what was shown: after the answer the call is described again, and if what it would do changed
(another path resolution, another diff) the question is asked again; the policy is checked once more just before
the call runs (a switch to `read-only` while the question was open means the call does not run). Questions are
asked one at a time; a call waiting for its turn to ask decides again when its turn comes, so an "always" answer
given meanwhile resolves it without a question. An "always" answer remembered for the project or everywhere also
settles the questions it decides that are open in other sessions of this process: they are withdrawn (the editor
gets `$/cancel_request`) and the calls run, or are refused, as the new rule says.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Self, TypeVar

import anyio
import anyio.lowlevel

from permissions.audit import summarize_arguments
from permissions.confinement import Confinement, confinement_for
from permissions.gateway import PermissionGateway, PermissionOutcome, PermissionRequest, ReasonGateway
from permissions.modes import ApprovalMode
from permissions.options import MAX_REASON, Choice, build_choices
from permissions.policy import CallFacts, Decision, decide
from permissions.rules import RuleStore

log = logging.getLogger("gatewright.permissions")

_MAX_ASKS = 3  # a call whose preview keeps changing under the question is refused after this many questions


def _meta(decision: str, by: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"gatewright": {"decision": decision, "by": by, "reason": reason, **extra}}


class ApprovalRejected(Exception):
    """The call is not run and the turn stops: the user rejected it, a rule refused it, no answer came in time, or
    (`unasked`: who could not ask, in words) the user could not be asked at all."""

    def __init__(
        self,
        reason: str,
        option_id: str | None = None,
        meta: dict[str, Any] | None = None,
        unasked: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.option_id = option_id
        self.meta = meta
        self.unasked = unasked


class ApprovalCancelled(Exception):
    pass


class ApprovalDenied(Exception):
    error_type = "PermissionDenied"

    def __init__(self, reason: str, meta: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.meta = meta


class ApprovalDeclined(ApprovalDenied):
    """The user rejected the call and let the model continue: reported to the model, the turn goes on. `said` is the
    reason the user gave, if any (it is in `reason` too)."""

    error_type = "UserDeclined"

    def __init__(self, reason: str, meta: dict[str, Any] | None = None, said: str | None = None) -> None:
        super().__init__(reason, meta)
        self.said = said


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


class ApprovalContext(Protocol):
    """What the decorator needs of the context a call runs with (the runtime's `ToolContext`)."""

    @property
    def session_id(self) -> str: ...

    def approved(self, grants: frozenset[str], confinement: Confinement, meta: dict[str, Any]) -> Self:
        """This context for a call that may run: with access to the `grants` (outside paths the decision covered),
        its processes confined by `confinement`, and `meta` (why it may run) carried by its `in_progress` update."""
        ...


class CallResult(Protocol):
    """What the decorator reads of a call's result: whether it failed (for the audit log)."""

    @property
    def is_error(self) -> bool: ...


C = TypeVar("C")
X = TypeVar("X", bound=ApprovalContext)
R = TypeVar("R", bound=CallResult)
C_contra = TypeVar("C_contra", contravariant=True)
X_contra = TypeVar("X_contra", bound=ApprovalContext, contravariant=True)
R_co = TypeVar("R_co", bound=CallResult, covariant=True)


class Executor(Protocol[C_contra, X_contra, R_co]):
    async def execute(self, call: C_contra, ctx: X_contra) -> R_co: ...


Ask = Callable[[ApprovalContext, PermissionRequest], Awaitable[str | None]]
"""The decorator's own way of asking the human (`ToolApprovalDecorator.ask_human`), lent to a `CallWatch`."""


class CallWatch(Protocol[X_contra, R]):
    """A collaborator that looks at the workspace around every call that runs (the runtime's: the repositories a
    call creates, `runtime.repositories`), and may ask the human about what it finds through `ask`, the decorator's
    own question path (one question at a time, the question timeout, the audit log). `before` runs once the call is
    allowed, just before it runs; `after` once it ended (`result` None when it raised), and may return the result
    with what the model must know added."""

    async def before(self, ctx: X_contra, title: str, ask: Ask) -> None: ...

    async def after(self, ctx: X_contra, title: str, result: R | None, ask: Ask) -> R | None: ...


class AuditSink(Protocol):
    """Where decisions are recorded (`permissions.audit.AuditLog`)."""

    def begin(
        self,
        *,
        session_id: str,
        call_id: str,
        tool: str,
        summary: str,
        decision: str,
        decided_by: str,
        reason: str,
        option: str | None = None,
        outcome: str = "pending",
        ask_ms: int | None = None,
        project: str | None = None,
    ) -> int | None: ...

    def end(self, seq: int | None, outcome: str, run_ms: int | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class _Approved:
    subject: ApprovalSubject
    decision: Decision
    choice: Choice | None
    ask_ms: int
    asked_reason: str


class _NoAnswer(enum.Enum):
    """Why `_request` has no answer from the human: in both cases the question was withdrawn."""

    TIMED_OUT = "the configured question timeout ran out"
    SETTLED = "a rule remembered meanwhile (maybe in another session) decides the call"


@dataclass(eq=False)
class _OpenQuestion:
    """A question waiting for a human in this process, with how to decide its call again without asking."""

    redecide: Callable[[], Decision]
    scope: anyio.CancelScope


# Every open question of every session in this agent process. A remembered answer (an "always" rule for the project
# or everywhere) may decide questions open in other sessions too: those are withdrawn (the editor gets a
# `$/cancel_request` for them) and their calls go on as the new rule says.
_OPEN_QUESTIONS: set[_OpenQuestion] = set()


def _settle_open_questions() -> None:
    for question in list(_OPEN_QUESTIONS):
        try:
            decided = question.redecide().action != "ask"
        except Exception:  # a question that cannot be re-decided stays with the human
            log.warning("could not re-check an open question against a new rule", exc_info=True)
            continue
        if decided:
            question.scope.cancel()


class ToolApprovalDecorator(Generic[C, X, R]):
    def __init__(
        self,
        delegate: Executor[C, X, R],
        gateway: PermissionGateway,
        describe: Callable[[C, X], Awaitable[ApprovalSubject]],
        mode: Callable[[], ApprovalMode],
        rules: RuleStore,
        audit: AuditSink | None = None,
        question_timeout: float | None = None,
        watch: CallWatch[X, R] | None = None,
    ) -> None:
        self.delegate = delegate
        self.watch = watch
        self.gateway = gateway
        self.describe = describe
        self.mode = mode
        self.rules = rules
        self.audit = audit
        self.question_timeout = question_timeout  # seconds a question may stay unanswered (None: no limit)
        # One question at a time: parallel calls queue behind the human, who sees them in order.
        self._ask_lock = anyio.Lock()

    async def execute(self, call: C, ctx: X) -> R:
        subject = await self.describe(call, ctx)
        decision = decide(subject.facts, self.mode(), self.rules)
        approved: _Approved | None = None
        if decision.action == "ask":
            async with self._ask_lock:
                # A rule may have been added while this call waited for the previous question.
                decision = decide(subject.facts, self.mode(), self.rules)
                if decision.action == "ask":
                    approved = await self._ask(call, ctx, subject, decision)
                    subject, decision = approved.subject, approved.decision
        # Run outside the lock: an approved call may itself ask (a subagent's calls go through this same decorator),
        # and approved calls run in parallel.
        if decision.action == "deny":
            self._record(subject, ctx, decision, "refused" if decision.rule_id else "denied")
            self._refuse(decision)
        if approved is not None and approved.choice is not None:
            meta = _meta("ask", "user", approved.asked_reason, option=approved.choice.option.option_id)
            seq = self._record(
                subject,
                ctx,
                Decision("ask", approved.asked_reason, by="user"),
                "running",
                option=approved.choice.option.option_id,
                ask_ms=approved.ask_ms,
            )
        else:
            extra = {"rule": decision.rule_id} if decision.rule_id else {}
            meta = _meta(decision.action, decision.by, decision.reason, **extra)
            seq = self._record(subject, ctx, decision, "running")
        return await self._run(call, ctx, subject, meta, seq)

    # ---- running -------------------------------------------------------------------------------------------------
    async def _run(self, call: C, ctx: X, subject: ApprovalSubject, meta: dict[str, Any], seq: int | None) -> R:
        outside = frozenset(p.path for p in subject.facts.paths if p.klass != "inside")
        # The sandbox of the call's processes follows from what was allowed, with the facts that were shown.
        ctx = ctx.approved(outside, confinement_for(subject.facts, self.mode()), meta)
        t0 = time.monotonic()
        try:
            if self.watch is not None:
                await self.watch.before(ctx, subject.title, self.ask_human)
            result = await self.delegate.execute(call, ctx)
        except anyio.get_cancelled_exc_class():
            self._end(seq, "cancelled", t0)
            raise
        except BaseException:
            self._end(seq, "failed", t0)
            if self.watch is not None:  # a call that failed may have left something behind all the same
                await self.watch.after(ctx, subject.title, None, self.ask_human)
            raise
        self._end(seq, "failed" if result.is_error else "completed", t0)
        if self.watch is not None:
            result = await self.watch.after(ctx, subject.title, result, self.ask_human) or result
        return result

    async def ask_human(self, ctx: ApprovalContext, request: PermissionRequest) -> str | None:
        """Put a question of a `CallWatch` to the human, as the decorator's own are put (one at a time, the question
        timeout) and audited: the option chosen, or None when there was no answer in time. The policy has no say in
        it and no rule can answer it.

        Raises:
            ApprovalCancelled: the turn is being cancelled.
        """
        async with self._ask_lock:
            t0 = time.monotonic()
            outcome = await self._request(request, lambda: Decision("ask", request.reason))
        option = outcome.option_id if isinstance(outcome, PermissionOutcome) and not outcome.cancelled else None
        if self.audit is not None:
            self.audit.begin(
                session_id=ctx.session_id,
                call_id=request.call_id,
                tool=request.tool,
                summary=request.title,
                decision="ask",
                decided_by="user" if option else "timeout",
                reason=request.reason,
                option=option,
                outcome="cancelled" if isinstance(outcome, PermissionOutcome) and outcome.cancelled else "answered",
                ask_ms=int((time.monotonic() - t0) * 1000),
                project=self.rules.project,
            )
        if isinstance(outcome, PermissionOutcome) and outcome.cancelled:
            raise ApprovalCancelled()
        return option

    def _refuse(self, decision: Decision) -> None:
        extra = {"rule": decision.rule_id} if decision.rule_id else {}
        meta = _meta("deny", decision.by, decision.reason, **extra)
        if decision.rule_id is not None:
            raise ApprovalRejected(decision.reason, None, meta)
        raise ApprovalDenied(decision.reason, meta)

    # ---- asking --------------------------------------------------------------------------------------------------
    async def _ask(self, call: C, ctx: X, subject: ApprovalSubject, decision: Decision) -> _Approved:
        for _ in range(_MAX_ASKS):
            choices = build_choices(subject.facts, subject.summary, self.rules.persistent, self.rules.remember)
            request = PermissionRequest(
                call_id=subject.call_id,
                tool=subject.facts.tool,
                title=subject.title,
                kind=subject.kind,
                raw_input=subject.raw_input,
                options=tuple(c.option for c in choices),
                reason=decision.reason,
                content=subject.content,
                locations=subject.locations,
                details=decision.asked_because,
            )
            t0 = time.monotonic()
            outcome = await self._request(request, self._redecider(subject.facts))
            ask_ms = int((time.monotonic() - t0) * 1000)
            asked = decision.reason
            user = Decision("ask", asked, by="user")
            if outcome is _NoAnswer.SETTLED:
                # Another session's remembered answer decided this call while its question was open.
                fresh = await self.describe(call, ctx)
                final = decide(fresh.facts, self.mode(), self.rules)
                if final.action == "allow":
                    return _Approved(fresh, final, None, ask_ms, asked)
                if final.action == "deny":
                    self._record(fresh, ctx, final, "refused" if final.rule_id else "denied", ask_ms=ask_ms)
                    self._refuse(final)
                subject, decision = fresh, final
                continue
            if outcome is _NoAnswer.TIMED_OUT:
                reason = f"no answer within {self.question_timeout:g} s to: {subject.title}"
                self._record(subject, ctx, user, "timeout", ask_ms=ask_ms)
                raise ApprovalRejected(reason, None, _meta("ask", "timeout", reason))
            if outcome.cancelled:
                self._record(subject, ctx, user, "cancelled", ask_ms=ask_ms)
                raise ApprovalCancelled()
            if outcome.unasked is not None:
                reason = f"{outcome.unasked} about {subject.title}, so it was not run"
                self._record(subject, ctx, user, "unasked", ask_ms=ask_ms)
                raise ApprovalRejected(reason, None, _meta("ask", "unasked", reason), unasked=outcome.unasked)
            # The answer may arrive just as the turn is cancelled: a cancelled turn runs nothing.
            await anyio.lowlevel.checkpoint_if_cancelled()
            choice = next((c for c in choices if c.option.option_id == outcome.option_id), None)
            if choice is not None and choice.remember is not None:
                self.rules.add(choice.action, subject.facts, choice.label, choice.remember)
                _settle_open_questions()
            if choice is None or not choice.allow:
                # An unknown option id is not an approval: fail closed.
                oid = outcome.option_id or None
                keep_going = choice is not None and choice.keep_going
                self._record(subject, ctx, user, "declined" if keep_going else "rejected", option=oid, ask_ms=ask_ms)
                meta = _meta("ask", "user", asked, option=oid)
                if keep_going:
                    why = await self._reason(request)
                    said = f", saying: “{why}”" if why else ""
                    raise ApprovalDeclined(
                        f"the user declined {subject.title}{said}; do not retry it as it is, "
                        "try another way or ask the user",
                        meta,
                        why,
                    )
                raise ApprovalRejected(f"you rejected {subject.title}", oid, meta)
            # Bind the approval to what was shown, and check the policy once more before running.
            fresh = await self.describe(call, ctx)
            final = decide(fresh.facts, self.mode(), self.rules)
            if final.action == "deny":
                self._record(
                    fresh,
                    ctx,
                    final,
                    "refused" if final.rule_id else "denied",
                    option=choice.option.option_id,
                    ask_ms=ask_ms,
                )
                self._refuse(
                    Decision(
                        "deny",
                        f"not run: {final.reason} (decided while the question was open)",
                        final.rule_id,
                        by=final.by,
                    )
                )
            if fresh.facts == subject.facts and fresh.content == subject.content:
                return _Approved(fresh, Decision("allow", "approved by the user", by="user"), choice, ask_ms, asked)
            if final.action == "allow":
                return _Approved(fresh, final, None, ask_ms, asked)
            # What the call would do changed while the question was open: show the new version.
            log.info("call %s changed while it was being approved; asking again", subject.call_id)
            subject, decision = fresh, final
        reason = f"{subject.title} kept changing while it was being approved"
        self._record(subject, ctx, decision, "rejected")
        raise ApprovalRejected(reason, None, _meta("ask", "user", reason))

    def _redecider(self, facts: CallFacts) -> Callable[[], Decision]:
        """How an open question about a call with these facts is decided again when a rule is remembered."""
        return lambda: decide(facts, self.mode(), self.rules)

    async def _request(
        self, request: PermissionRequest, redecide: Callable[[], Decision]
    ) -> PermissionOutcome | _NoAnswer:
        """The gateway's answer, or why there is none (the question is then withdrawn)."""
        question = _OpenQuestion(redecide, anyio.CancelScope())
        _OPEN_QUESTIONS.add(question)
        try:
            with question.scope:
                if self.question_timeout is None:
                    return await self.gateway.request(request)
                with anyio.move_on_after(self.question_timeout):
                    return await self.gateway.request(request)
                return _NoAnswer.TIMED_OUT
            return _NoAnswer.SETTLED  # only reached when question.scope was cancelled by `_settle_open_questions`
        finally:
            _OPEN_QUESTIONS.discard(question)

    async def _reason(self, request: PermissionRequest) -> str | None:
        """Why the user declined ("reject, and let the agent try another way"), when the gateway can ask; bounded by
        the question timeout. Nothing here can turn the rejection into anything else."""
        gateway = self.gateway
        if not isinstance(gateway, ReasonGateway):
            return None
        why: object = None  # checked below: a reason is text or nothing
        try:
            if self.question_timeout is None:
                why = await gateway.ask_reason(request)
            else:
                with anyio.move_on_after(self.question_timeout):
                    why = await gateway.ask_reason(request)
        except Exception:  # no reason is fine; the rejection stands
            log.warning("asking why a call was declined failed", exc_info=True)
            return None
        if not isinstance(why, str):
            return None
        why = " ".join(why.split())
        return why[:MAX_REASON] or None

    # ---- audit ---------------------------------------------------------------------------------------------------
    def _record(
        self,
        subject: ApprovalSubject,
        ctx: X,
        decision: Decision,
        outcome: str,
        *,
        option: str | None = None,
        ask_ms: int | None = None,
    ) -> int | None:
        if self.audit is None:
            return None
        return self.audit.begin(
            session_id=ctx.session_id,
            call_id=subject.call_id,
            tool=subject.facts.tool,
            summary=summarize_arguments(subject.raw_input),
            decision=decision.action,
            decided_by=decision.by or "user",
            reason=decision.reason,
            option=option,
            outcome=outcome,
            ask_ms=ask_ms,
            project=self.rules.project,
        )

    def _end(self, seq: int | None, outcome: str, t0: float) -> None:
        if self.audit is not None:
            self.audit.end(seq, outcome, int((time.monotonic() - t0) * 1000))
