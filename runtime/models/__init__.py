"""Model specs (`scripted:PATH`, `openai:MODEL`, `anthropic:MODEL`, a configured name) and model construction.

Precedence: `--model` (or `GATEWRIGHT_MODEL`) picks the default model, else the config file's `default_model`;
provider URLs come from env (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`) over the config file; keys only ever from the
environment variable a provider names. The HTTP stack (`httpx2`, ~40 ms) is imported when a model client is first used
or prepared by the agent's idle warm-up, never at start-up; no provider SDK is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime import lazy, secrets  # lazy: the model clients load with the first session that needs one
from runtime.models import thinking
from runtime.models.config import ConfigError, ModelEntry, ModelsConfig, accepts_images, entry_for_spec, load_config
from runtime.models.errors import ModelError, ModelNotConfigured

if TYPE_CHECKING:  # not at run time: `initialize` is answered before the conversation records are imported
    from runtime.models.base import ModelClient

__all__ = [
    "ModelFactory",
    "ModelSpec",
    "ModelError",
    "ModelNotConfigured",
    "parse_model_spec",
    "NO_MODEL_MESSAGE",
    "ConfigError",
]

NO_MODEL_MESSAGE = (
    "No model is configured. Sign in with `gatewright setup` in a terminal, or start gatewright with --model (or "
    "set GATEWRIGHT_MODEL), e.g. "
    "`--model openai:gpt-4.1` with OPENAI_API_KEY, `--model anthropic:claude-sonnet-4-5` with ANTHROPIC_API_KEY, "
    "or `--model scripted:PATH` for a scripted test model."
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    provider: str  # scripted | openai | anthropic | a configured provider | "" for a configured model name
    name: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}" if self.provider else self.name


def parse_model_spec(spec: str | None) -> ModelSpec | None:
    """Parse `PROVIDER:NAME`, or a bare NAME (a model from the config file, checked by `ModelFactory`).

    Raises ValueError with a one-line message on a malformed spec.
    """
    if spec is None or not spec.strip():
        return None
    provider, sep, name = spec.strip().partition(":")
    if not sep:
        return ModelSpec("", provider)
    if not name or not provider:
        raise ValueError(
            f"model spec {spec!r} must look like scripted:PATH, openai:MODEL, anthropic:MODEL or the "
            "name of a model in the config file"
        )
    return ModelSpec(provider, name)


class ModelFactory:
    """Resolves the configuration once at start-up (bad specs and bad config files are refused then) and builds
    model clients. HTTP clients are shared by every session using the same model (they pool connections); a
    scripted model is per session, since each session keeps its own position in the script."""

    def __init__(
        self, spec: ModelSpec | None, config: ModelsConfig | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.env = os.environ if env is None else env
        self.config = config if config is not None else load_config(env=self.env)
        # Before any session (and so any child process) exists: the key variables are never inherited, their values
        # and the configured headers never written anywhere.
        secrets.register_names(self.config.key_variables(), self.env)
        secrets.register_headers(self.config.header_items())
        self._script = None
        self._clients: dict[str, ModelClient] = {}
        self._retired: list[ModelClient] = []  # clients made before a logout, closed with the others
        self.default_id: str | None = None
        self._extra: list[ModelEntry] = []  # the --model spec when it is not a configured model
        if spec is None and self.config.default_model:
            spec = parse_model_spec(self.config.default_model)
        if spec is not None and spec.provider == "scripted":
            self._script = lazy.scripted.load_script(spec.name)
            self.default_id = str(spec)
        elif spec is not None:
            entry = self._resolve(spec)
            self.default_id = entry.id
            spec = ModelSpec(entry.provider, entry.model)
        self.spec = spec

    def _resolve(self, spec: ModelSpec) -> ModelEntry:
        if not spec.provider:
            entry = self.config.model(spec.name)
            if entry is None:
                known = ", ".join(m.id for m in self.config.models) or "none"
                raise ConfigError(
                    f"model {spec.name!r} is not in the config file ({self.config.source or 'absent'}; "
                    f"configured: {known}); use PROVIDER:MODEL, e.g. openai:gpt-4.1"
                )
            return entry
        entry = entry_for_spec(self.config, spec.provider, spec.name)
        if self.config.model(entry.id) is None:
            self._extra.append(entry)
        return entry

    # ---- what sessions see ---------------------------------------------------------------------------------------
    def choices(self) -> tuple[ModelEntry, ...]:
        """The models a session can switch between (the `model` config option), default first."""
        if self._script is not None:
            return ()
        entries = [*self._extra, *self.config.models]
        entries.sort(key=lambda m: m.id != self.default_id)
        return tuple(entries)

    def adopt(self, model_id: str | None) -> str | None:
        """The id to run a stored session's model `model_id` on, if this factory can make it: a configured model, or
        a `PROVIDER:MODEL` of a known provider (added to the choices), or the scripted model when this factory has
        none (its file read again). None when it cannot (a name no longer configured, a script that is gone)."""
        if not model_id:
            return None
        if model_id == self.default_id or self.entry(model_id) is not None:
            return model_id
        try:
            spec = parse_model_spec(model_id)
        except ValueError:
            return None
        if spec is None or not spec.provider:
            return None
        if spec.provider == "scripted":
            if self._script is not None or self.default_id is not None:
                return None  # one script per process: another one is in use
            try:
                self._script = lazy.scripted.load_script(spec.name)
            except (OSError, ValueError):  # a ScriptError is a ValueError
                return None
            self.default_id = model_id
            return model_id
        try:
            entry = self._resolve(spec)
        except ConfigError:
            return None
        return entry.id

    def entry(self, model_id: str) -> ModelEntry | None:
        return next((m for m in self.choices() if m.id == model_id), None)

    def any_accepts_images(self) -> bool:
        out = False
        for m in self.choices():
            settings = self.config.provider(m.provider)
            out = out or (settings is not None and accepts_images(m, settings))
        return out

    def auth_methods(self) -> list[dict[str, Any]]:
        """One ACP auth method per API key the offered models read from the environment (schema-valid v1 `agent`
        methods: stable v1 has no env-var type, so the variable is described in `_meta`)."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for m in self.choices():
            settings = self.config.provider(m.provider)
            if settings is None or not settings.api_key_env or settings.api_key_env in seen:
                continue
            var = settings.api_key_env
            seen.add(var)
            out.append(
                {
                    "id": f"env:{var}",
                    "name": f"{var}",
                    "description": f"Set {var} in the environment the editor starts gatewright with "
                    f"(used for {settings.name} models).",
                    "_meta": {
                        "gatewright": {
                            "type": "env_var",
                            "vars": [{"name": var, "secret": True}],
                            "set": bool(self.env.get(var)),
                        }
                    },
                }
            )
        return out

    def key_is_set(self, var: str) -> bool:
        return bool(self.env.get(var))

    @property
    def scripted(self) -> bool:
        return self._script is not None

    def forget_keys(self, names: Iterable[str]) -> None:
        """Stored keys were forgotten (`logout`): the models made from now on no longer have them (a variable set in
        the process's environment stays: it was not stored)."""
        if isinstance(self.env, dict):  # the environment with the stored keys under it (`runtime.credentials`)
            for name in names:
                if name not in os.environ:
                    self.env.pop(name, None)
        self._retired += self._clients.values()
        self._clients = {}

    async def aclose(self) -> None:
        """Close every HTTP client this factory made (sessions share them)."""
        clients, self._clients = [*self._clients.values(), *self._retired], {}
        self._retired = []
        for client in clients:
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()

    # ---- construction --------------------------------------------------------------------------------------------
    def prepare_default(self) -> None:
        """Build the default model's client and its HTTP stack ahead of the first call (the agent's idle warm-up).
        Opens no connection; a scripted model has nothing to prepare."""
        if self._script is None and self.default_id is not None:
            client = self.create()
            prepare = getattr(client, "prepare", None)
            if prepare is not None:
                prepare()

    def thought_levels(self, model_id: str | None) -> tuple[tuple[thinking.Level, ...], str]:
        """How hard `model_id` can think (`runtime.models.thinking`): its levels and the configured one."""
        entry = self.entry(model_id) if model_id else None
        settings = self.config.provider(entry.provider) if entry else None
        if entry is None or settings is None:
            return (), ""
        return thinking.levels(entry, settings.kind), thinking.current(entry, settings.kind)

    def create(self, model_id: str | None = None, thought: str | None = None) -> ModelClient | None:
        """The client for `model_id` (default: the default model), thinking at level `thought` (None: as
        configured); None when no model is configured.

        Raises:
            ValueError: an unknown model, or a level the model does not have.
        """
        model_id = model_id or self.default_id
        if model_id is None:
            return None
        if self._script is not None:
            return lazy.scripted.ScriptedModel(self._script)
        key = model_id if thought is None else f"{model_id}\x00{thought}"
        if key in self._clients:
            return self._clients[key]
        entry = self.entry(model_id)
        if entry is None:
            raise ValueError(f"unknown model {model_id!r}")
        settings = self.config.provider(entry.provider)
        assert settings is not None  # checked when the config was parsed
        if thought is not None:
            entry = thinking.at_level(entry, settings.kind, thought)
        api_key = self.env.get(settings.api_key_env) if settings.api_key_env else None
        client: ModelClient
        if settings.kind == "openai":
            client = lazy.openai_compat.OpenAIChatModel(entry, settings, api_key or None)
        else:
            client = lazy.anthropic_messages.AnthropicModel(entry, settings, api_key or None)
        self._clients[key] = client
        return client
