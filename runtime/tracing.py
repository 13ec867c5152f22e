"""One tool execution made traceable and safe to repeat: operation ids, attempts, traces, retries, result checks.

Rules (ARCHITECTURE.md, "Principles"):
- Every call has its call id (matches the model's request to its result) and an operation id (the business operation
  it performs). Automatic retries reuse the operation id, so a service can use it as an idempotency key.
- Only read calls (`effect == "read"`) are retried, only on transient failures, within an attempt and time budget.
  Side-effecting calls are never retried automatically; when one times out its outcome is unknown (the write may
  have landed, only the answer was lost), and the model is told to check the state before repeating it.
- An executor may keep a structured trace of each execution, keyed by call id (never "the last one": calls run in
  parallel on one executor). `find_trace` walks a decorator chain through `.delegate`, so wrapping never hides it.
- What a tool returns is checked before the model sees it: a string, without NUL, encodable as UTF-8.
"""

from __future__ import annotations

import errno
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import orjson

from runtime.tools.base import ToolCall, ToolContext, ToolExecutor, ToolFailure, ToolRegistry, ToolResult

TRANSIENT_ERROR_TYPES = frozenset({"Transient"})
# Errors that say "try again" rather than "this is wrong": resource briefly busy, interrupted, connection dropped.
TRANSIENT_ERRNOS = frozenset(
    {
        errno.EAGAIN,
        errno.EWOULDBLOCK,
        errno.EBUSY,
        errno.EINTR,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ENETUNREACH,
        errno.EHOSTUNREACH,
    }
)
MAX_TRACE_BYTES = 64_000
META_KEY = "gatewright"


def new_operation_id() -> str:
    return "op_" + uuid.uuid4().hex[:20]


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int
    error_type: str | None  # None: this attempt succeeded
    duration_ms: int


@dataclass(slots=True)
class CallRecord:
    """The runtime's log of one call. Mutable because executors append attempts while the call runs; each call has
    its own record, so parallel calls never share one."""

    call_id: str
    operation_id: str
    attempts: list[Attempt] = field(default_factory=list)
    outcome: Literal["unknown"] | None = None

    def meta(self, trace: Any = None) -> dict[str, Any]:
        """What is stored with the tool result and shown to the client (never to the model)."""
        out: dict[str, Any] = {"operationId": self.operation_id}
        if len(self.attempts) > 1:
            out["attempts"] = [
                {"attempt": a.number, "errorType": a.error_type, "durationMs": a.duration_ms} for a in self.attempts
            ]
        if self.outcome is not None:
            out["outcome"] = self.outcome
        if trace is not None:
            out["trace"] = trace
        return out

    @property
    def notable(self) -> bool:
        """Worth showing on the wire even without a trace: retried, or its outcome is unknown."""
        return len(self.attempts) > 1 or self.outcome is not None


# ---- traces -------------------------------------------------------------------------------------------------------
@runtime_checkable
class TraceableExecutor(Protocol):
    def trace_for(self, call_id: str) -> Any | None:
        """The trace of the execution of `call_id`, once (it is forgotten after being read)."""
        ...


def find_trace(executor: object, call_id: str, max_layers: int = 32) -> Any | None:
    """The trace of `call_id` from the first layer of the chain that keeps traces.

    Decorators in this code base keep what they wrap in `.delegate`; walking it means a decorator that knows nothing
    about traces (e.g. the approval decorator) cannot hide one. A layer that implements `trace_for` answers for the
    rest of the chain (it may need to map the call id, as a subagent's executor does).
    """
    layer: object | None = executor
    for _ in range(max_layers):
        if layer is None:
            return None
        if isinstance(layer, TraceableExecutor):
            return layer.trace_for(call_id)
        layer = getattr(layer, "delegate", None)
    return None


def jsonable_trace(trace: Any, limit: int = MAX_TRACE_BYTES) -> Any:
    """A trace as JSON values for the wire and the store; dataclasses are converted, other objects become strings,
    and an oversized trace is replaced by a marker rather than flooding the client."""
    if trace is None:
        return None
    try:
        raw = orjson.dumps(trace, default=repr, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return {"unserialisable": type(trace).__name__}
    if len(raw) > limit:
        return {"truncated": True, "bytes": len(raw)}
    return orjson.loads(raw)


# ---- result checks ------------------------------------------------------------------------------------------------
def check_output(value: object) -> str:
    """The structural check on what a tool hands the model.

    NUL becomes U+FFFD and unpaired surrogates are replaced, so the text is always valid UTF-8 on every provider's
    wire. Size is capped separately (`cap_output`).

    Raises:
        ToolFailure: `InvalidToolResult` when the output is not a string at all.
    """
    if not isinstance(value, str):
        raise ToolFailure(f"the tool returned {type(value).__name__} instead of text", "InvalidToolResult")
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


# ---- retries ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try a read call again. `budget_seconds` bounds the whole series, waits included."""

    max_attempts: int = 3
    base_delay_seconds: float = 0.2
    max_delay_seconds: float = 2.0
    budget_seconds: float = 30.0

    def delay(self, attempt: int) -> float:
        return min(self.max_delay_seconds, self.base_delay_seconds * 2.0 ** (attempt - 1))


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ToolFailure):
        return exc.error_type in TRANSIENT_ERROR_TYPES
    return isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS


class RetryingExecutor:
    """Sits under the approval decorator (an approved read is not asked again for its retries) and over the router.

    Records every attempt in the call's `CallRecord`, retries transient failures of read calls, and turns the timeout
    of a side-effecting call into `OutcomeUnknown`.
    """

    def __init__(self, delegate: ToolExecutor, registry: ToolRegistry, policy: RetryPolicy | None = None) -> None:
        self.delegate = delegate
        self.registry = registry
        self.policy = policy or RetryPolicy()

    def trace_for(self, call_id: str) -> Any | None:
        return find_trace(self.delegate, call_id)

    def _effect(self, call: ToolCall) -> str:
        tool = self.registry.get(call.name)
        if tool is None:
            return "other"
        try:
            return tool.effect(call.arguments)
        except Exception:  # an effect we cannot establish is not a read
            return "other"

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        effect = self._effect(call)
        record = ctx.record
        operation_id = ctx.operation_id or (record.operation_id if record else "")
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            t0 = time.monotonic()
            try:
                result = await self.delegate.execute(call, ctx)
            except (ToolFailure, OSError) as exc:
                error_type = exc.error_type if isinstance(exc, ToolFailure) else type(exc).__name__
                self._log(record, attempt, error_type, t0)
                if isinstance(exc, ToolFailure) and exc.error_type == "Timeout" and effect != "read":
                    if record is not None:
                        record.outcome = "unknown"
                    raise ToolFailure(
                        f"{exc.message}. Its outcome is unknown: it may have partly or fully taken effect. Check the "
                        f"current state before repeating it (operation {operation_id}).",
                        "OutcomeUnknown",
                    ) from None
                if effect != "read" or not is_transient(exc):
                    raise
                wait = self.policy.delay(attempt)
                spent = time.monotonic() - started
                if attempt >= self.policy.max_attempts or spent + wait > self.policy.budget_seconds:
                    detail = exc.message if isinstance(exc, ToolFailure) else (exc.strerror or str(exc))
                    raise ToolFailure(
                        f"{call.name} failed {attempt} time(s) with a transient error: {detail}", "Transient"
                    ) from None
                await anyio.sleep(wait)
                continue
            except BaseException as exc:  # a crash or a cancel: logged, never retried
                self._log(record, attempt, type(exc).__name__, t0)
                raise
            self._log(record, attempt, "ToolError" if result.is_error else None, t0)
            return result

    @staticmethod
    def _log(record: CallRecord | None, attempt: int, error_type: str | None, t0: float) -> None:
        if record is not None:
            record.attempts.append(Attempt(attempt, error_type, int((time.monotonic() - t0) * 1000)))


def wire_meta(record: CallRecord | None, trace: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The `_meta` of a finished call's last update: only when there is something to show, so ordinary calls keep
    their frames unchanged."""
    if record is None:
        return {META_KEY: dict(extra)} if extra else None
    if trace is None and not record.notable and not extra:
        return None
    inner = record.meta(trace)
    if extra:
        inner.update(extra)
    return {META_KEY: inner}
