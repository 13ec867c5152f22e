"""Approval modes: the closed set docs/configuration.md lists, and their parsing (never failing open)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ApprovalMode = Literal["manual", "safe", "auto", "read-only"]

DEFAULT_MODE: ApprovalMode = "safe"


@dataclass(frozen=True, slots=True)
class ModeInfo:
    id: ApprovalMode
    name: str
    description: str


MODES: tuple[ModeInfo, ...] = (
    ModeInfo("safe", "Safe", "Reads and searches run freely; every write, command and outside access asks first."),
    ModeInfo("manual", "Manual", "Every tool call asks first."),
    ModeInfo("auto", "Auto", "Runs without asking, except denied calls and protected paths (.git/, agent settings)."),
    ModeInfo("read-only", "Read-only", "Nothing that writes or runs a process is executed; such calls are refused."),
)

_BY_ID = {m.id: m for m in MODES}


def parse_mode(value: str | None) -> ApprovalMode:
    """Parse a mode name. A missing value gives the default; an unknown one raises (it never means `auto`).

    Raises:
        ValueError: the name is not one of the four modes.
    """
    if value is None or not value.strip():
        return DEFAULT_MODE
    key = value.strip().lower()
    if key == "readonly" or key == "read_only":
        key = "read-only"
    if key not in _BY_ID:
        raise ValueError(f"unknown approval mode {value!r}; expected one of: {', '.join(_BY_ID)}")
    return _BY_ID[key].id
