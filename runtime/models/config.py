"""The model configuration a user lives with: `config.toml` in the user's config dir, then env, then flags.

Where: `$GATEWRIGHT_CONFIG`, else `$XDG_CONFIG_HOME/gatewright/config.toml`, else `~/.config/gatewright/config.toml`.
A missing file in the default place is an empty configuration; a `GATEWRIGHT_CONFIG` naming a file that does not
exist, and a malformed file, are refused at start-up with a one-line `ConfigError` naming the file (and the key).
The file's `[permissions]` table is read by `runtime.config`. Example:

    default_model = "sonnet"              # a name below, or PROVIDER:MODEL

    [providers.openai]                    # built-in: kind "openai", key in OPENAI_API_KEY
    base_url = "http://localhost:8080/v1" # OPENAI_BASE_URL overrides it
    first_token_timeout = 120

    [providers.deepseek]                  # any OpenAI-compatible server
    kind = "openai"
    base_url = "https://api.deepseek.com/v1"
    api_key_env = "DEEPSEEK_API_KEY"

    [models.sonnet]
    model = "anthropic:claude-sonnet-4-5"
    context_window = 200000
    thinking_budget = 4000
    prices = { input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }   # USD per million tokens

Keys are never stored here: a provider names the environment variable holding its key (`api_key_env`).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from runtime import lazy  # tomllib, only when there is a config file

if TYPE_CHECKING:
    from runtime.models.base import Usage

ProviderKind = Literal["openai", "anthropic"]

# Built-in providers: what `openai:MODEL` and `anthropic:MODEL` mean with no config at all.
_BUILTIN_KINDS: dict[str, ProviderKind] = {"openai": "openai", "anthropic": "anthropic"}
_BUILTIN_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_BUILTIN_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
_DEFAULT_CONTEXT = {"openai": 128_000, "anthropic": 200_000}


class ConfigError(ValueError):
    """A malformed configuration: one line naming the file and the offending key."""


@dataclass(frozen=True, slots=True)
class Prices:
    """Per million tokens. Cache prices default to the input price when not given."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    currency: str = "USD"

    def cost(self, usage: Usage) -> float:
        # `Usage.input_tokens` counts every prompt token, cached ones included (see providers); price each part once.
        read = usage.cached_read_tokens
        write = usage.cached_write_tokens
        plain = max(0, usage.input_tokens - read - write)
        cr = self.input if self.cache_read is None else self.cache_read
        cw = self.input if self.cache_write is None else self.cache_write
        return (plain * self.input + read * cr + write * cw + usage.output_tokens * self.output) / 1_000_000


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    name: str
    kind: ProviderKind
    base_url: str | None = None
    api_key_env: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 10.0
    first_token_timeout: float = 90.0  # reasoning models can think for a while before the first chunk
    idle_timeout: float = 120.0  # between two chunks once streaming
    max_retries: int = 3
    retry_base_delay: float = 0.5
    retry_max_delay: float = 20.0
    send_reasoning: bool = False  # send `reasoning_content` back (Moonshot/DeepSeek thinking-with-tools want it)


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One selectable model. `id` is what the session's `model` config option carries."""

    id: str
    provider: str
    model: str
    name: str
    description: str = ""
    context_window: int = 128_000
    max_tokens: int | None = None
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    images: bool | None = None  # None: decided by the provider (see `accepts_images`)
    prices: Prices | None = None

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"


@dataclass(frozen=True, slots=True)
class ModelsConfig:
    source: str | None = None
    default_model: str | None = None
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)
    models: tuple[ModelEntry, ...] = ()

    def provider(self, name: str) -> ProviderSettings | None:
        if name in self.providers:
            return self.providers[name]
        kind = _BUILTIN_KINDS.get(name)
        if kind is not None:
            return ProviderSettings(name, kind, api_key_env=_BUILTIN_KEY_ENV[name])
        return None

    def model(self, model_id: str) -> ModelEntry | None:
        return next((m for m in self.models if m.id == model_id), None)

    def key_variables(self) -> tuple[str, ...]:
        """Every variable a provider reads its key from, the built-in ones included whether used or not."""
        names = dict.fromkeys(_BUILTIN_KEY_ENV.values())
        names.update(dict.fromkeys(p.api_key_env for p in self.providers.values() if p.api_key_env))
        return tuple(names)

    def header_items(self) -> tuple[tuple[str, str], ...]:
        """The providers' configured headers (they may carry credentials)."""
        return tuple((k, v) for p in self.providers.values() for k, v in p.headers.items())


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("GATEWRIGHT_CONFIG"):
        return Path(env["GATEWRIGHT_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gatewright" / "config.toml"


def read_document(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], str | None]:
    """The config file (`path`, else `config_path(env)`) as a TOML document and where it came from; `({}, None)`
    when it is absent, unless `GATEWRIGHT_CONFIG` named it.

    Raises:
        ConfigError: a `GATEWRIGHT_CONFIG` that does not exist, an unreadable file, invalid TOML.
    """
    env = os.environ if env is None else env
    named = path is None and bool(env.get("GATEWRIGHT_CONFIG"))  # the user named it: it must exist
    p = Path(path) if path is not None else config_path(env)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"config file {p} (GATEWRIGHT_CONFIG) does not exist") from None
        return {}, None
    except OSError as exc:
        raise ConfigError(f"config file {p}: cannot be read ({exc.strerror or exc})") from None
    try:
        return lazy.tomllib.loads(raw.decode("utf-8")), str(p)
    except (lazy.tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {p}: not valid TOML ({exc})") from None


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> ModelsConfig:
    """Read and check the config file (the default one missing → empty), then apply env overrides. Raises
    `ConfigError`. (The start-up check, which remembers what it checked, is `runtime.settings.check`.)"""
    env = os.environ if env is None else env
    doc, source = read_document(path, env)
    return apply_env(parse_config(doc, source) if source is not None else ModelsConfig(), env)


def parse_config(doc: Mapping[str, Any], source: str = "<config>") -> ModelsConfig:
    """A config file's document, checked (`runtime.settings_models`) and built. Raises `ConfigError`."""
    return build_config(lazy.settings_models.check_document(doc, source), source)


def build_config(doc: Mapping[str, Any], source: str | None) -> ModelsConfig:
    """The models part of a checked document (`runtime.settings_models.ConfigFile`): every key it has is known and
    of its type, so this only fills in the defaults, which are the records' own."""
    providers = {name: _provider(name, table) for name, table in (doc.get("providers") or {}).items()}
    config = ModelsConfig(source, doc.get("default_model"), providers)
    models = tuple(_model(mid, table, config) for mid, table in (doc.get("models") or {}).items())
    return replace(config, models=models)


def apply_env(config: ModelsConfig, env: Mapping[str, str]) -> ModelsConfig:
    """`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` win over the file for the built-in providers."""
    providers = dict(config.providers)
    for name, var in _BUILTIN_URL_ENV.items():
        url = (env.get(var) or "").strip()
        if url:
            base = config.provider(name)
            assert base is not None
            providers[name] = replace(base, base_url=url)
    return replace(config, providers=providers)


def entry_for_spec(config: ModelsConfig, provider: str, model: str) -> ModelEntry:
    """A `PROVIDER:MODEL` spec as a model entry: the configured one with that spec if any, else defaults."""
    for m in config.models:
        if m.provider == provider and m.model == model:
            return m
    settings = config.provider(provider)
    if settings is None:
        raise ConfigError(
            f"unknown model provider {provider!r}; expected openai, anthropic or a provider from the config file"
        )
    return ModelEntry(f"{provider}:{model}", provider, model, model, context_window=_DEFAULT_CONTEXT[settings.kind])


def missing_key(settings: ProviderSettings, env: Mapping[str, str]) -> str | None:
    """The variable `settings`' provider reads its key from, when it is needed and not set; None when nothing is
    missing. A provider that names no `api_key_env` needs none; a built-in one (`openai`, `anthropic`) pointed at a
    local server (loopback, a private network, a `.local` or single-label host name) needs none either, since such
    servers (Ollama, llama.cpp, vLLM, LM Studio) take none; any other needs its key before anything is sent."""
    var = settings.api_key_env
    if not var or env.get(var):
        return None
    builtin = _BUILTIN_KEY_ENV.get(settings.name) == var
    if builtin and settings.base_url and is_local_url(settings.base_url):
        return None
    return var


def missing_key_message(settings: ProviderSettings, what: str) -> str:
    """The one line for `missing_key`: which variable, what needs it, and what else would do."""
    var = settings.api_key_env
    name = settings.name
    if name in _BUILTIN_URL_ENV and var == _BUILTIN_KEY_ENV[name]:
        also = f"or, for a local server that needs no key, point {_BUILTIN_URL_ENV[name]} (or base_url) at it"
    else:
        also = f"or, if the server needs no key, remove api_key_env from [providers.{name}] in the config file"
    return f"{var} is not set, and {what} needs it: set {var} in the environment gatewright runs in, {also}"


def is_local_url(url: str) -> bool:
    """Whether `url`'s host is this machine or a private network (where keyless servers run)."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal", ".lan")) or "." not in host:
        return ":" not in host or _private_ip(host)
    return _private_ip(host)


def _private_ip(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def accepts_images(entry: ModelEntry, settings: ProviderSettings) -> bool:
    if entry.images is not None:
        return entry.images
    # Claude and OpenAI's own models take images; a self-hosted server usually runs a text-only model, and sending it
    # an image fails the whole request, so those must opt in with `images = true`.
    return settings.kind == "anthropic" or settings.base_url is None


# ---- building records from checked tables ------------------------------------------------------------------------
def _provider(name: str, table: Mapping[str, Any]) -> ProviderSettings:
    kind = table.get("kind") or _BUILTIN_KINDS[name]  # a provider that is not built in has a kind (checked)
    given = {k: v for k, v in table.items() if k not in ("kind", "headers", "api_key_env")}
    return replace(
        ProviderSettings(name, kind),
        api_key_env=table.get("api_key_env") or _BUILTIN_KEY_ENV.get(name),
        headers=dict(table.get("headers") or {}),
        **given,
    )


def _model(mid: str, table: Mapping[str, Any], config: ModelsConfig) -> ModelEntry:
    spec = table["model"]
    provider, _, model = spec.partition(":")
    settings = config.provider(provider)
    assert settings is not None  # checked: built in or configured
    prices = table.get("prices")
    return ModelEntry(
        mid,
        provider,
        model,
        name=table.get("name") or mid,
        description=table.get("description") or spec,
        context_window=table.get("context_window", _DEFAULT_CONTEXT[settings.kind]),
        max_tokens=table.get("max_tokens"),
        thinking_budget=table.get("thinking_budget"),
        reasoning_effort=table.get("reasoning_effort"),
        images=table.get("images"),
        prices=Prices(**prices) if prices is not None else None,
    )
