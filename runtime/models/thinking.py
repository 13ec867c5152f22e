"""How hard a model thinks: the levels a session can pick (ACP's `thought_level` config option) for the models that
think, and the model entry each level gives.

Anthropic models think within a token budget (`thinking_budget`, the Messages API's `thinking.budget_tokens`);
OpenAI's reasoning models take a `reasoning_effort`. A model thinks if its config entry sets either, or if it is one of
the families that are documented to: Claude 3.7 Sonnet and the Claude 4 family; OpenAI's o-series and GPT-5. Any
other model (a local one included) gets no level to pick unless its entry says it takes one, since sending the
parameter to a model that does not know it fails the request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from runtime.models.config import ModelEntry, ProviderKind

_THINKING_CLAUDE = re.compile(r"^claude-(?:3-7-sonnet|(?:opus|sonnet|haiku)-4)")
_REASONING_OPENAI = re.compile(r"^(?:o\d|gpt-5)")

# Anthropic: the budget of each level (the API's minimum is 1024).
BUDGETS = {"low": 2_048, "medium": 8_192, "high": 24_576}
EFFORTS = ("low", "medium", "high")
CONFIGURED = "configured"  # the value of a level that is the config file's own setting, not one of the above
DEFAULT = "default"  # OpenAI: send no effort, the provider's default


@dataclass(frozen=True, slots=True)
class Level:
    value: str
    name: str
    description: str


def levels(entry: ModelEntry, kind: ProviderKind) -> tuple[Level, ...]:
    """The levels of this model, in order (none: it does not think, or is not known to)."""
    if kind == "anthropic":
        if entry.thinking_budget is None and not _THINKING_CLAUDE.match(entry.model):
            return ()
        out = [Level("off", "Off", "Answer without extended thinking")]
        out += [Level(v, v.title(), f"Think for up to {b:,} tokens before answering") for v, b in BUDGETS.items()]
        if entry.thinking_budget and entry.thinking_budget not in BUDGETS.values():
            b = max(1_024, entry.thinking_budget)
            out.append(Level(CONFIGURED, f"{b:,} tokens", "The thinking budget of the config file"))
        return tuple(out)
    if entry.reasoning_effort is None and not _REASONING_OPENAI.match(entry.model):
        return ()
    out = [Level(DEFAULT, "Default", "The provider's own default effort")]
    out += [Level(v, v.title(), f"{v.title()} reasoning effort") for v in EFFORTS]
    if entry.reasoning_effort and entry.reasoning_effort not in EFFORTS:
        out.append(Level(CONFIGURED, entry.reasoning_effort.title(), "The reasoning effort of the config file"))
    return tuple(out)


def current(entry: ModelEntry, kind: ProviderKind) -> str:
    """The level the entry as configured thinks at."""
    if kind == "anthropic":
        if not entry.thinking_budget:
            return "off"
        return next((v for v, b in BUDGETS.items() if b == entry.thinking_budget), CONFIGURED)
    if entry.reasoning_effort is None:
        return DEFAULT
    return entry.reasoning_effort if entry.reasoning_effort in EFFORTS else CONFIGURED


def at_level(configured: ModelEntry, kind: ProviderKind, level: str) -> ModelEntry:
    """The entry that thinks at `level` (`configured`: the entry as the config file has it).

    Raises:
        ValueError: not one of this model's levels.
    """
    if level not in {lv.value for lv in levels(configured, kind)}:
        raise ValueError(level)
    if level == CONFIGURED:
        return configured
    if kind == "anthropic":
        return replace(configured, thinking_budget=BUDGETS.get(level, 0) or None)
    return replace(configured, reasoning_effort=None if level == DEFAULT else level)
