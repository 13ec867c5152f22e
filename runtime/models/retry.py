"""Resilience shared by the HTTP providers: failure classification, retries with backoff, timeouts, safe messages.

The rule that matters most: a call is retried only while nothing has reached the user. Once a provider yielded any
event (text, a thought, a tool call) a failure ends the call with a clear error instead — a silent retry would show
the user a second, different answer glued to the first. Before that point 429, 5xx, connection failures and timeouts
are retried with exponential backoff and jitter, and a `Retry-After` (or OpenAI's `retry-after-ms`) is honoured.

Every message that leaves here is one line with the API key and anything that looks like a credential removed.
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from runtime.models.base import ModelError, ModelEvent

log = logging.getLogger("gatewright.models")

FailureKind = Literal["auth", "rate_limit", "server", "connection", "timeout", "client", "malformed"]
_RETRYABLE: frozenset[str] = frozenset({"rate_limit", "server", "connection", "timeout"})
# Anthropic reports some failures as an `error` event inside a 200 stream; its `type` says what happened.
_ERROR_TYPES: dict[str, FailureKind] = {
    "overloaded_error": "server", "api_error": "server", "rate_limit_error": "rate_limit",
    "authentication_error": "auth", "permission_error": "auth", "invalid_request_error": "client",
    "not_found_error": "client", "request_too_large": "client",
}
_CREDENTIAL = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|(?i:bearer)\s+\S+|(?i:x-api-key)\S*\s*\S+)")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0  # a provider asking us to wait longer than this gets an error, not a frozen UI
    first_token_timeout: float = 90.0


@dataclass(frozen=True, slots=True)
class Failure:
    kind: FailureKind
    detail: str
    status: int | None = None
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in _RETRYABLE


class FirstTokenTimeout(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"no response within {seconds:g} s")
        self.seconds = seconds


class MalformedStream(Exception):
    """The provider sent something that is not its wire format (bad JSON, an impossible event order)."""


# ---- pure helpers --------------------------------------------------------------------------------------------------
def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "[redacted]")
    return _CREDENTIAL.sub("[redacted]", text)


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date; None if absent/bad."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        with contextlib.suppress(ValueError):
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, policy: RetryPolicy, retry_after: float | None = None,
                  rand: Callable[[], float] = random.random) -> float:
    """Delay before retry number `attempt` (1-based). The server's `Retry-After` wins over our own backoff."""
    if retry_after is not None:
        return retry_after
    ceiling = min(policy.max_delay, policy.base_delay * (2 ** (attempt - 1)))
    # "Equal jitter": at least half the backoff, so many sessions hitting one 429 spread out but still back off.
    return ceiling / 2 + rand() * ceiling / 2


def _error_detail(body: Any, fallback: str) -> tuple[str, str | None]:
    """(message, error type) from an OpenAI- or Anthropic-shaped error body."""
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            msg = err.get("message")
            kind = err.get("type")
            return (msg if isinstance(msg, str) and msg else fallback), (kind if isinstance(kind, str) else None)
        if isinstance(err, str):
            return err, None
    if isinstance(body, str) and body.strip():
        return body, None
    return fallback, None


def classify(exc: BaseException, secrets: tuple[str, ...] = ()) -> Failure:
    """Map an SDK or transport exception to a `Failure`. Duck-typed so neither SDK is imported here."""
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, FirstTokenTimeout):
        return Failure("timeout", str(exc))
    if isinstance(exc, MalformedStream):
        return Failure("malformed", one_line(redact(str(exc), secrets)))
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and "APIStatusError" in names:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        detail, etype = _error_detail(getattr(exc, "body", None), f"HTTP {status}")
        detail = one_line(redact(detail, secrets))
        kind: FailureKind
        if status in (401, 403):
            kind = "auth"
        elif status == 429:
            kind = "rate_limit"
        elif status >= 500 or status in (408, 409):
            kind = "server"
        elif status < 400 and etype is not None:  # an error event inside a 200 stream
            kind = _ERROR_TYPES.get(etype, "server")
            status = {"rate_limit": 429, "auth": 401}.get(kind)  # type: ignore[assignment]
        else:
            kind = "client"
        return Failure(kind, detail, status, parse_retry_after(headers))
    if names & {"APITimeoutError", "TimeoutException", "TimeoutError"}:
        return Failure("timeout", "timed out")
    if names & {"APIConnectionError", "TransportError", "ConnectionError", "OSError"}:
        cause = exc.__cause__ or exc.__context__
        detail = str(cause) if cause is not None and str(cause) else str(exc)
        return Failure("connection", one_line(redact(detail or type(exc).__name__, secrets)))
    if names & {"JSONDecodeError", "ValidationError", "ValueError", "KeyError", "TypeError", "AttributeError"}:
        return Failure("malformed", one_line(redact(f"{type(exc).__name__}: {exc}", secrets)))
    return Failure("client", one_line(redact(f"{type(exc).__name__}: {exc}", secrets)))


def describe(f: Failure, label: str, attempts: int, auth_hint: str = "") -> str:
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if f.kind == "auth":
        hint = f" {auth_hint}" if auth_hint else ""
        return f"{label} refused the credentials (HTTP {f.status or 401}): {f.detail}.{hint}"
    if f.kind == "rate_limit":
        return f"{label} is rate limiting requests (HTTP 429){tries}: {f.detail}"
    if f.kind == "server":
        return f"{label} failed (HTTP {f.status}){tries}: {f.detail}" if f.status else \
            f"{label} reported an error{tries}: {f.detail}"
    if f.kind == "connection":
        return f"cannot reach {label}{tries}: {f.detail}"
    if f.kind == "timeout":
        return f"{label} did not answer{tries}: {f.detail}"
    if f.kind == "malformed":
        return f"{label} sent a response gatewright cannot read: {f.detail}"
    return f"{label} rejected the request (HTTP {f.status}): {f.detail}" if f.status else f"{label} failed: {f.detail}"


@contextlib.contextmanager
def first_token_deadline(seconds: float) -> Iterator[None]:
    """Bound the wait for the first stream item; raises `FirstTokenTimeout` (retryable: nothing was shown yet)."""
    try:
        with anyio.fail_after(seconds if seconds > 0 else None):
            yield
    except TimeoutError:
        raise FirstTokenTimeout(seconds) from None


async def next_or_none(iterator: Any) -> Any:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return None


async def close_stream(stream: Any) -> None:
    # Shielded and bounded: on cancellation the close must still happen (it is what drops the connection), but a
    # wedged peer must not hold up the cancel.
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await stream.close()
        except Exception:  # closing a broken stream may fail; the connection is gone either way
            log.debug("closing the stream failed", exc_info=True)


# ---- the retry loop ------------------------------------------------------------------------------------------------
async def resilient(attempt: Callable[[], AsyncIterator[ModelEvent]], *, label: str, policy: RetryPolicy,
                    secrets: tuple[str, ...] = (), auth_hint: str = "",
                    sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> AsyncIterator[ModelEvent]:
    """Run `attempt()` (one HTTP call as a stream of events), retrying failures that happen before any output.

    Cancellation is not an `Exception`, so it passes straight through and the attempt's `finally` closes the stream.
    """
    tries = 0
    while True:
        tries += 1
        produced = False
        try:
            events = attempt()
            try:
                async for ev in events:
                    produced = True
                    yield ev
            finally:
                await events.aclose()  # type: ignore[attr-defined]
            return
        except ModelError as exc:
            if produced or not exc.retryable or tries > policy.max_retries:
                raise
            failure = Failure("server", exc.message)
        except Exception as exc:
            failure = classify(exc, secrets)
            if produced:
                log.warning("%s stream broke after output started: %s", label, failure.detail)
                raise ModelError(f"the {label} stream broke after the reply had started ({failure.detail}); "
                                 "it was not retried, so nothing is duplicated — ask again to continue") from None
            if failure.kind == "auth":
                raise ModelError(describe(failure, label, 1, auth_hint), auth=True) from None
            if not failure.retryable or tries > policy.max_retries:
                raise ModelError(describe(failure, label, tries, auth_hint)) from None
        if failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
            raise ModelError(f"{label} asks to wait {failure.retry_after:.0f} s before retrying "
                             f"({failure.detail}); try again later")
        delay = backoff_delay(tries, policy, failure.retry_after)
        log.warning("%s: %s; retrying in %.2f s (attempt %d of %d)", label, describe(failure, label, 1),
                    delay, tries + 1, policy.max_retries + 1)
        await sleep(delay)
