"""Model specs (`scripted:PATH`, `openai:MODEL`, `anthropic:MODEL`) and per-session model construction.

Provider SDKs are imported only when a session first uses them.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.models.base import ModelClient, ModelError, ModelNotConfigured

__all__ = ["ModelFactory", "ModelSpec", "ModelError", "ModelNotConfigured", "parse_model_spec", "NO_MODEL_MESSAGE"]

NO_MODEL_MESSAGE = (
    "No model is configured. Start gatewright with --model (or set GATEWRIGHT_MODEL), e.g. "
    "`--model openai:gpt-4.1` with OPENAI_API_KEY, `--model anthropic:claude-sonnet-4-5` with ANTHROPIC_API_KEY, "
    "or `--model scripted:PATH` for a scripted test model."
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    provider: str  # scripted | openai | anthropic
    name: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}"


def parse_model_spec(spec: str | None) -> ModelSpec | None:
    """Parse `PROVIDER:NAME`. Raises ValueError with a one-line message on a malformed spec."""
    if spec is None or not spec.strip():
        return None
    provider, sep, name = spec.strip().partition(":")
    if not sep or not name:
        raise ValueError(f"model spec {spec!r} must look like scripted:PATH, openai:MODEL or anthropic:MODEL")
    if provider not in ("scripted", "openai", "anthropic"):
        raise ValueError(f"unknown model provider {provider!r}; expected scripted, openai or anthropic")
    return ModelSpec(provider, name)


class ModelFactory:
    """Checks a spec once at start-up (a malformed script is refused then) and builds one client per session."""

    def __init__(self, spec: ModelSpec | None) -> None:
        self.spec = spec
        self._script = None
        if spec is not None and spec.provider == "scripted":
            from runtime.models.scripted import load_script

            self._script = load_script(spec.name)

    def create(self) -> ModelClient | None:
        if self.spec is None:
            return None
        if self.spec.provider == "scripted":
            from runtime.models.scripted import ScriptedModel

            assert self._script is not None
            return ScriptedModel(self._script)
        if self.spec.provider == "openai":
            from runtime.models.openai_compat import OpenAIChatModel

            return OpenAIChatModel(self.spec.name)
        from runtime.models.anthropic_messages import AnthropicModel

        return AnthropicModel(self.spec.name)
