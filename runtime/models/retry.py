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
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from runtime.models.base import ModelError, ModelEvent

log = logging.getLogger("gatewright.models")

FailureKind = Literal["auth", "rate_limit", "server", "connection", "timeout", "client", "malformed"]
_RETRYABLE: frozenset[str] = frozenset({"rate_limit", "server", "connection", "timeout"})
# A failure reported inside a 200 stream says what happened by its `type` (Anthropic's error types; the types and
# codes OpenAI-compatible servers put in an `{"error": …}` chunk).
_ERROR_TYPES: dict[str, FailureKind] = {
    "overloaded_error": "server",
    "api_error": "server",
    "rate_limit_error": "rate_limit",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_request_error": "client",
    "not_found_error": "client",
    "request_too_large": "client",
    "server_error": "server",
    "rate_limit_exceeded": "rate_limit",
    "invalid_api_key": "auth",
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


class ProviderHTTPError(Exception):
    """A non-2xx reply: its status, the provider's own error message and type, and its headers (`Retry-After`)."""

    def __init__(
        self, status: int, message: str, error_type: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.error_type = error_type
        self.headers = headers


class ProviderStreamError(Exception):
    """An error the provider reported inside a 2xx reply: Anthropic's `error` event (an `overloaded_error` where a
    non-streamed call would get HTTP 529), or the `{"error": …}` chunk OpenAI-compatible servers send mid-stream."""

    def __init__(self, message: str, error_type: str | None = None, code: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.code = code


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


def backoff_delay(
    attempt: int, policy: RetryPolicy, retry_after: float | None = None, rand: Callable[[], float] = random.random
) -> float:
    """Delay before retry number `attempt` (1-based). The server's `Retry-After` wins over our own backoff."""
    if retry_after is not None:
        return retry_after
    ceiling = min(policy.max_delay, policy.base_delay * 2.0 ** (attempt - 1))
    # "Equal jitter": at least half the backoff, so many sessions hitting one 429 spread out but still back off.
    return ceiling / 2 + rand() * ceiling / 2


def _status_kind(status: int) -> FailureKind:
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status >= 500 or status in (408, 409):
        return "server"
    return "client"


# httpx2's exceptions, by class name: the failure vocabulary does not import the HTTP library.
_URL_ERRORS = frozenset({"UnsupportedProtocol", "InvalidURL"})
_TIMEOUTS = {
    "ConnectTimeout": "connecting timed out",
    "ReadTimeout": "no data within the idle timeout",
    "WriteTimeout": "sending the request timed out",
    "PoolTimeout": "no free connection in time",
}


def classify(exc: BaseException, secrets: tuple[str, ...] = ()) -> Failure:
    """Map a provider or transport exception to a `Failure`: the first of `_CLASSIFIERS` that knows it, else a
    client failure naming the exception."""
    names = {c.__name__ for c in type(exc).__mro__}
    for classifier in _CLASSIFIERS:
        failure = classifier(exc, names, secrets)
        if failure is not None:
            return failure
    return Failure("client", one_line(redact(f"{type(exc).__name__}: {exc}", secrets)))


def _ours(exc: BaseException, names: set[str], secrets: tuple[str, ...]) -> Failure | None:
    if isinstance(exc, FirstTokenTimeout):
        return Failure("timeout", str(exc))
    if isinstance(exc, MalformedStream):
        return Failure("malformed", one_line(redact(str(exc), secrets)))
    return None


def _http_status(exc: BaseException, names: set[str], secrets: tuple[str, ...]) -> Failure | None:
    if not isinstance(exc, ProviderHTTPError):
        return None
    kind = _status_kind(exc.status)
    should = (exc.headers or {}).get("x-should-retry")
    if kind in ("client", "server") and should in ("true", "false"):
        # Both providers say per reply whether a retry can help (e.g. a 409 lock, a 5xx that will not clear).
        kind = "server" if should == "true" else "client"
    return Failure(kind, one_line(redact(exc.message, secrets)), exc.status, parse_retry_after(exc.headers))


def _stream_error(exc: BaseException, names: set[str], secrets: tuple[str, ...]) -> Failure | None:
    if not isinstance(exc, ProviderStreamError):
        return None
    code = exc.code if isinstance(exc.code, int) and not isinstance(exc.code, bool) else None
    kind = _ERROR_TYPES.get(exc.error_type or "") or (_status_kind(code) if code else "server")
    return Failure(kind, one_line(redact(exc.message, secrets)), {"rate_limit": 429, "auth": 401}.get(kind, code))


def _request_refused(exc: BaseException, names: set[str], secrets: tuple[str, ...]) -> Failure | None:
    """The request cannot leave: a URL httpx2 cannot use, a header value it refuses to send."""
    if names & _URL_ERRORS:
        return Failure("client", one_line(redact(f"the URL cannot be used ({exc})", secrets)))
    if "LocalProtocolError" in names:
        return Failure("client", one_line(redact(f"the request cannot be sent ({exc})", secrets)))
    return None


def _timed_out(exc: BaseException, names: set[str], secrets: tuple[str, ...]) -> Failure | None:
    timeout = next((_TIMEOUTS[n] for n in names if n in _TIMEOUTS), None)
    if timeout is not None or names & {"TimeoutException", "TimeoutError"}:
        return Failure("timeout", timeout or "timed out")
    return None


def _untrusted_certificate(exc: BaseException, names: set[str], secrets: tuple[str, ...]) -> Failure | None:
    if "CERTIFICATE_VERIFY_FAILED" not in str(exc) and "SSLCertVerificationError" not in _cause_names(exc):
        return None
    # Not transient: retrying cannot make the certificate trusted.
    detail = f"the server's TLS certificate is not trusted ({exc}); for a private CA set SSL_CERT_FILE"
    return Failure("client", one_line(redact(detail, secrets)))


def _broken(exc: BaseException, names: set[str], secrets: tuple[str, ...]) -> Failure | None:
    """A stream that cannot be read, a connection that failed, or a reply that was not what it should be."""
    if names & {"SSEError", "DecodingError"}:
        return Failure("malformed", one_line(redact(str(exc) or type(exc).__name__, secrets)))
    if names & {"TransportError", "ConnectionError", "OSError"}:
        cause = exc.__cause__ or exc.__context__
        detail = str(exc) or (str(cause) if cause is not None else "") or type(exc).__name__
        return Failure("connection", one_line(redact(detail, secrets)))
    if names & {"JSONDecodeError", "ValueError", "KeyError", "TypeError", "AttributeError"}:
        return Failure("malformed", one_line(redact(f"{type(exc).__name__}: {exc}", secrets)))
    return None


_Classifier = Callable[[BaseException, set[str], tuple[str, ...]], Failure | None]
_CLASSIFIERS: tuple[_Classifier, ...] = (
    _ours,
    _http_status,
    _stream_error,
    _request_refused,
    _timed_out,
    _untrusted_certificate,
    _broken,
)
"""In order: the first that recognises an exception decides its failure."""


def _cause_names(exc: BaseException) -> set[str]:
    out: set[str] = set()
    seen = 0
    cause = exc.__cause__ or exc.__context__
    while cause is not None and seen < 8:
        out |= {c.__name__ for c in type(cause).__mro__}
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return out


def describe(f: Failure, label: str, attempts: int, auth_hint: str = "", url: str = "") -> str:
    """One line for the user: what failed, the provider's own words, and the URL that was tried."""
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    at = f" (at {url})" if url else ""
    if f.kind == "auth":
        hint = f" {auth_hint}" if auth_hint else ""
        return f"{label} refused the credentials (HTTP {f.status or 401}): {f.detail}{at}.{hint}"
    if f.kind == "rate_limit":
        return f"{label} is rate limiting requests (HTTP 429){tries}: {f.detail}{at}"
    if f.kind == "server":
        return (
            f"{label} failed (HTTP {f.status}){tries}: {f.detail}{at}"
            if f.status
            else f"{label} reported an error{tries}: {f.detail}{at}"
        )
    if f.kind == "connection":
        return f"cannot reach {label}{tries}: {f.detail}{at}"
    if f.kind == "timeout":
        return f"{label} did not answer{tries}: {f.detail}{at}"
    if f.kind == "malformed":
        return f"{label} sent a response gatewright cannot read: {f.detail}{at}"
    return (
        f"{label} rejected the request (HTTP {f.status}): {f.detail}{at}"
        if f.status
        else f"{label} failed: {f.detail}{at}"
    )


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
            await stream.aclose()
        except Exception:  # closing a broken stream may fail; the connection is gone either way
            log.debug("closing the stream failed", exc_info=True)


# ---- the retry loop ------------------------------------------------------------------------------------------------
async def resilient(
    attempt: Callable[[], AsyncGenerator[ModelEvent, None]],
    *,
    label: str,
    policy: RetryPolicy,
    secrets: tuple[str, ...] = (),
    auth_hint: str = "",
    url: str = "",
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> AsyncGenerator[ModelEvent, None]:
    """Run `attempt()` (one HTTP call as a stream of events), retrying failures that happen before any output.

    Cancellation is not an `Exception`, so it passes straight through and the attempt's `finally` closes the stream.
    `url` (already safe to show) goes into every message, so a user can see which server failed.
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
                await events.aclose()
            return
        except ModelError as exc:
            if produced or not exc.retryable or tries > policy.max_retries:
                raise
            failure = Failure("server", exc.message)
        except Exception as exc:
            failure = classify(exc, secrets)
            if produced:
                log.warning("%s stream broke after output started: %s", label, failure.detail)
                where = f"; at {url}" if url else ""
                raise ModelError(
                    f"the {label} stream broke after the reply had started ({failure.detail}{where}); "
                    "it was not retried, so nothing is duplicated — ask again to continue"
                ) from None
            if failure.kind == "auth":
                raise ModelError(describe(failure, label, 1, auth_hint, url), auth=True) from None
            if not failure.retryable or tries > policy.max_retries:
                raise ModelError(describe(failure, label, tries, auth_hint, url)) from None
        if failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
            raise ModelError(
                f"{label} asks to wait {failure.retry_after:.0f} s before retrying ({failure.detail}); try again later",
                retryable=False,
            )
        delay = backoff_delay(tries, policy, failure.retry_after)
        log.warning(  # describe() names the provider already: "openai failed (HTTP 503) …; retrying …"
            "%s; retrying in %.2f s (attempt %d of %d)",
            describe(failure, label, 1, url=url),
            delay,
            tries + 1,
            policy.max_retries + 1,
        )
        await sleep(delay)
