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

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from runtime import lazy  # tomllib, only when there is a config file

if TYPE_CHECKING:
    from runtime.models.base import Usage

ProviderKind = Literal["openai", "anthropic"]

# Built-in providers: what `openai:MODEL` and `anthropic:MODEL` mean with no config at all.
_BUILTIN_KINDS: dict[str, ProviderKind] = {"openai": "openai", "anthropic": "anthropic"}
_BUILTIN_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_BUILTIN_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
_DEFAULT_CONTEXT = {"openai": 128_000, "anthropic": 200_000}
_PROVIDER_KEYS = {
    "kind",
    "base_url",
    "api_key_env",
    "headers",
    "connect_timeout",
    "first_token_timeout",
    "idle_timeout",
    "max_retries",
    "retry_base_delay",
    "retry_max_delay",
    "send_reasoning",
}
_MODEL_KEYS = {
    "model",
    "name",
    "description",
    "context_window",
    "max_tokens",
    "thinking_budget",
    "reasoning_effort",
    "images",
    "prices",
}
_PRICE_KEYS = {"input", "output", "cache_read", "cache_write", "currency"}


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
    """Read the config file (the default one missing → empty) and apply env overrides. Raises `ConfigError`."""
    env = os.environ if env is None else env
    doc, source = read_document(path, env)
    return apply_env(parse_config(doc, source) if source is not None else ModelsConfig(), env)


def parse_config(doc: Mapping[str, Any], source: str = "<config>") -> ModelsConfig:
    where = f"config file {source}"
    # permissions, sandbox: runtime.config
    unknown = set(doc) - {"default_model", "providers", "models", "permissions", "sandbox"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s): {', '.join(sorted(unknown))}")
    default = doc.get("default_model")
    if default is not None and not isinstance(default, str):
        raise ConfigError(f"{where}: default_model must be a string")
    providers: dict[str, ProviderSettings] = {}
    for name, table in _table(doc, "providers", where).items():
        providers[name] = _provider(name, table, f"{where}: providers.{name}")
    config = ModelsConfig(source, default, providers)
    models = tuple(
        _model(mid, table, f"{where}: models.{mid}", config) for mid, table in _table(doc, "models", where).items()
    )
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


def accepts_images(entry: ModelEntry, settings: ProviderSettings) -> bool:
    if entry.images is not None:
        return entry.images
    # Claude and OpenAI's own models take images; a self-hosted server usually runs a text-only model, and sending it
    # an image fails the whole request, so those must opt in with `images = true`.
    return settings.kind == "anthropic" or settings.base_url is None


# ---- table parsing -------------------------------------------------------------------------------------------------
def _table(doc: Mapping[str, Any], key: str, where: str) -> dict[str, Mapping[str, Any]]:
    value = doc.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(f"{where}: [{key}] must hold tables, e.g. [{key}.NAME]")
    return value


def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(table) - allowed
    if unknown:
        hint = (
            " (keys are never read from the config: name the variable with api_key_env)" if "api_key" in unknown else ""
        )
        raise ConfigError(f"{where}: unknown key(s): {', '.join(sorted(unknown))}{hint}")


def _num(table: Mapping[str, Any], key: str, where: str, default: float, *, integer: bool = False) -> Any:
    value = table.get(key, default)
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if not ok or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{where}.{key} must be a non-negative {'integer' if integer else 'number'}")
    return value


def _opt_str(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}.{key} must be a string")
    return value


def _provider(name: str, table: Mapping[str, Any], where: str) -> ProviderSettings:
    _check_keys(table, _PROVIDER_KEYS, where)
    kind = table.get("kind", name if name in _BUILTIN_KEY_ENV else None)
    if kind not in ("openai", "anthropic"):
        raise ConfigError(f'{where}.kind must be "openai" (any OpenAI-compatible server) or "anthropic"')
    headers = table.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ConfigError(f"{where}.headers must be a table of strings")
    send_reasoning = table.get("send_reasoning", False)
    if not isinstance(send_reasoning, bool):
        raise ConfigError(f"{where}.send_reasoning must be true or false")
    d = ProviderSettings(name, kind)
    return ProviderSettings(
        name,
        kind,
        base_url=_opt_str(table, "base_url", where),
        api_key_env=_opt_str(table, "api_key_env", where) or _BUILTIN_KEY_ENV.get(name),
        headers=dict(headers),
        connect_timeout=_num(table, "connect_timeout", where, d.connect_timeout),
        first_token_timeout=_num(table, "first_token_timeout", where, d.first_token_timeout),
        idle_timeout=_num(table, "idle_timeout", where, d.idle_timeout),
        max_retries=_num(table, "max_retries", where, d.max_retries, integer=True),
        retry_base_delay=_num(table, "retry_base_delay", where, d.retry_base_delay),
        retry_max_delay=_num(table, "retry_max_delay", where, d.retry_max_delay),
        send_reasoning=send_reasoning,
    )


def _model(mid: str, table: Mapping[str, Any], where: str, config: ModelsConfig) -> ModelEntry:
    _check_keys(table, _MODEL_KEYS, where)
    spec = table.get("model")
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f'{where}.model must look like PROVIDER:MODEL, e.g. "openai:gpt-4.1"')
    provider, _, model = spec.partition(":")
    settings = config.provider(provider)
    if settings is None:
        raise ConfigError(f"{where}.model names provider {provider!r}, which is neither built in nor configured")
    images = table.get("images")
    if images is not None and not isinstance(images, bool):
        raise ConfigError(f"{where}.images must be true or false")
    prices = None
    if "prices" in table:
        pt = table["prices"]
        if not isinstance(pt, dict):
            raise ConfigError(f"{where}.prices must be a table like {{ input = 3.0, output = 15.0 }}")
        _check_keys(pt, _PRICE_KEYS, f"{where}.prices")
        if "input" not in pt or "output" not in pt:
            raise ConfigError(f"{where}.prices needs both input and output (per million tokens)")
        pw = f"{where}.prices"
        prices = Prices(
            _num(pt, "input", pw, 0),
            _num(pt, "output", pw, 0),
            _num(pt, "cache_read", pw, 0) if "cache_read" in pt else None,
            _num(pt, "cache_write", pw, 0) if "cache_write" in pt else None,
            _opt_str(pt, "currency", pw) or "USD",
        )
    max_tokens = table.get("max_tokens")
    thinking = table.get("thinking_budget")
    return ModelEntry(
        mid,
        provider,
        model,
        name=_opt_str(table, "name", where) or mid,
        description=_opt_str(table, "description", where) or spec,
        context_window=_num(table, "context_window", where, _DEFAULT_CONTEXT[settings.kind], integer=True),
        max_tokens=None if max_tokens is None else _num(table, "max_tokens", where, 0, integer=True),
        thinking_budget=None if thinking is None else _num(table, "thinking_budget", where, 0, integer=True),
        reasoning_effort=_opt_str(table, "reasoning_effort", where),
        images=images,
        prices=prices,
    )
