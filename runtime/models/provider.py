"""`ProviderModel`: what the HTTP providers (OpenAI-compatible, Anthropic) share.

Construction from a config entry, the lazily created SDK client (pooled, closed by `aclose`), the one-line
"key not set" message, the retrying `stream` entry point, and the loop that drives an SDK stream through an
assembler and always closes the stream (so a cancelled turn drops its HTTP connection at once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from runtime.models.base import ModelEvent, ModelNotConfigured, ModelRequest
from runtime.models.config import ModelEntry, ProviderSettings, accepts_images
from runtime.models.retry import RetryPolicy, close_stream, first_token_deadline, next_or_none, resilient


class ProviderModel:
    """Subclasses set `key_env` and `no_key_hint`, and implement `_make_client` and `_attempt`."""

    key_env = "OPENAI_API_KEY"
    no_key_hint = "or set base_url under [providers.{name}] in the config file"

    def __init__(self, entry: ModelEntry, settings: ProviderSettings, api_key: str | None,
                 policy: RetryPolicy | None = None) -> None:
        self.entry = entry
        self.settings = settings
        self._api_key = api_key
        self.policy = policy or RetryPolicy(settings.max_retries, settings.retry_base_delay, settings.retry_max_delay,
                                            first_token_timeout=settings.first_token_timeout)
        self._client: Any = None

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

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _sdk(self) -> Any:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    async def aclose(self) -> None:
        """Close pooled connections (kept-alive sockets would otherwise outlive the event loop)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _check_configured(self) -> None:
        if self._api_key or self.settings.base_url:
            return
        var = self._key_var
        hint = self.no_key_hint.format(name=self.settings.name)
        raise ModelNotConfigured(f"{var} is not set: set {var} in the environment gatewright starts with ({hint})")

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return resilient(lambda: self._attempt(request), label=self.label, policy=self.policy,
                         secrets=(self._api_key or "",), auth_hint=f"Check {self._key_var}.")

    def _attempt(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise NotImplementedError

    async def _drive(self, create: Callable[[], Awaitable[Any]],
                     feed: Callable[[Any], Iterable[ModelEvent]]) -> AsyncIterator[ModelEvent]:
        """Open the SDK stream (the first chunk within the first-token deadline) and feed every chunk through the
        assembler; the stream is closed however this ends."""
        stream: Any = None
        try:
            with first_token_deadline(self.policy.first_token_timeout):
                stream = await create()
                iterator = stream.__aiter__()
                chunk = await next_or_none(iterator)
            while chunk is not None:
                for ev in feed(chunk):
                    yield ev
                chunk = await next_or_none(iterator)
        finally:
            if stream is not None:
                await close_stream(stream)
