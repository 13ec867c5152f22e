"""The prompt texts the model reads: Markdown files shipped inside this package (package data), read once each.

`system.md` is the session's system prompt; `explore.md` and `task.md` are the subagents' prompts and
`subagent.md` the rules every subagent shares. `runtime.context` adds the project instructions and the
environment to whichever of them a runtime uses.
"""

from __future__ import annotations

import functools
from pathlib import Path

_DIR = Path(__file__).resolve().parent


@functools.cache
def prompt(name: str) -> str:
    """The text of `<name>.md`, without its trailing newline."""
    return (_DIR / f"{name}.md").read_text(encoding="utf-8").rstrip("\n")
