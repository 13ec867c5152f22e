"""`ProviderModel`: what the HTTP providers (OpenAI-compatible, Anthropic) share.

Construction from a config entry, the endpoint URL and headers, the lazily created `httpx2` client (pooled, closed by
`aclose`), the one-line "key not set" message, the retrying `stream` entry point, and the loop that reads one
streamed reply through an assembler and always closes it (so a cancelled turn drops its HTTP connection at once).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from runtime.models.base import ModelEvent, ModelNotConfigured, ModelRequest
from runtime.models.config import ModelEntry, ProviderSettings, accepts_images, missing_key, missing_key_message
from runtime.models.http import make_client, post_events, safe_url
from runtime.models.retry import RetryPolicy, close_stream, first_token_deadline, next_or_none, resilient

if TYPE_CHECKING:
    import httpx2

USER_AGENT = "gatewright"
DRAIN_S = 1.0
# Header names whose configured values are credentials: redacted from every message like the key itself.
_SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie", "signature")


class ProviderModel:
    """Subclasses set `key_env`, `default_base_url`, `path`, and implement `_auth_headers`,
    `_body` and `_attempt`."""

    key_env = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    path = "/chat/completions"

    def __init__(
        self, entry: ModelEntry, settings: ProviderSettings, api_key: str | None, policy: RetryPolicy | None = None
    ) -> None:
        self.entry = entry
        self.settings = settings
        self._api_key = api_key
        self.policy = policy or RetryPolicy(
            settings.max_retries,
            settings.retry_base_delay,
            settings.retry_max_delay,
            first_token_timeout=settings.first_token_timeout,
        )
        self._client: httpx2.AsyncClient | None = None
        self._client_for: tuple[Any, ...] | None = None
        self._replaced: list[httpx2.AsyncClient] = []  # clients built for earlier settings, closed by `aclose`

    @property
    def name(self) -> str:
        return self.entry.spec

    @property
    def info(self) -> ModelEntry:
        return self.entry

    @property
    def accepts_images(self) -> bool:
        return accepts_images(self.entry, self.settings)

    @property
    def label(self) -> str:
        return self.settings.name

    @property
    def _key_var(self) -> str:
        return self.settings.api_key_env or self.key_env

    @property
    def url(self) -> str:
        """Where requests go: the configured base URL (or the provider's own) and the API's path."""
        return (self.settings.base_url or self.default_base_url).rstrip("/") + self.path

    def _auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        # The configured headers come last: a gateway may need its own auth header instead of ours.
        return {"user-agent": USER_AGENT, **self._auth_headers(), **self.settings.headers}

    def _secrets(self) -> tuple[str, ...]:
        values = [self._api_key or ""]
        values += [v for k, v in self.settings.headers.items() if any(w in k.lower() for w in _SECRET_HEADER_WORDS)]
        return tuple(v for v in values if v)

    def _http(self) -> httpx2.AsyncClient:
        """The pooled client, built at the first call (that is when httpx2 is imported). Rebuilt if the settings
        object was replaced since."""
        key = (self.settings, self._api_key)
        if self._client is None or self._client_for != key:
            if self._client is not None:
                self._replaced.append(self._client)
            self._client = make_client(
                self.url,
                self._headers(),
                connect_timeout=self.settings.connect_timeout,
                idle_timeout=self.settings.idle_timeout,
            )
            self._client_for = key
        return self._client

    def prepare(self) -> None:
        """Import the HTTP stack and build the client ahead of the first call (no I/O: connections open on use)."""
        if self._api_key or self.settings.base_url:
            self._http()

    async def aclose(self) -> None:
        """Close pooled connections (kept-alive sockets would otherwise outlive the event loop)."""
        clients = [*self._replaced, *([self._client] if self._client is not None else [])]
        self._client, self._replaced = None, []
        for client in clients:
            await client.aclose()

    def _check_configured(self) -> None:
        """Before anything is sent: a provider that needs a key and has none is `auth_required`, naming the
        variable (`runtime.models.config.missing_key`)."""
        if self._api_key or missing_key(self.settings, {}) is None:
            return
        raise ModelNotConfigured(missing_key_message(self.settings, self.name), auth=True)

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        return resilient(
            lambda: self._attempt(request),
            label=self.label,
            policy=self.policy,
            secrets=self._secrets(),
            auth_hint=f"Check {self._key_var}.",
            url=safe_url(self.url),
        )

    def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        raise NotImplementedError

    async def _drive(self, body: dict[str, Any], assembler: Assembler) -> AsyncGenerator[ModelEvent, None]:
        """POST `body` and feed every server-sent event (name, data) through the assembler until it is done or the
        reply ends; the first event must arrive within the first-token deadline. The reply is closed however this
        ends."""
        events = post_events(self._http(), self.url, body)
        try:
            with first_token_deadline(self.policy.first_token_timeout):
                item = await next_or_none(events)
            while item is not None and not assembler.done:
                for ev in assembler.feed(*item):
                    yield ev
                item = await next_or_none(events)
            if item is not None:
                # Read to the end of the reply (the chunked body's last bytes follow at once), so the connection
                # goes back to the pool for the next step; a server that keeps it open only loses it.
                with anyio.move_on_after(DRAIN_S):
                    while await next_or_none(events) is not None:
                        pass
        finally:
            await close_stream(events)


class Assembler(Protocol):
    """Sans-I/O: turns one API's stream events into ours."""

    @property
    def done(self) -> bool:
        """The stream said it is complete (OpenAI's `[DONE]`, Anthropic's `message_stop`)."""
        ...

    def feed(self, event: str, data: str) -> Iterable[ModelEvent]: ...
