"""The slash commands as ACP advertises them: the `available_commands_update` the editor shows in its command menu.

The commands themselves (which there are, running them) are host-neutral: `runtime.commands`.
"""

from __future__ import annotations

from typing import Any

from runtime import commands


def wire(command: commands.Command) -> dict[str, Any]:
    out: dict[str, Any] = {"name": command.name, "description": command.description}
    if command.hint:
        out["input"] = {"hint": command.hint}
    return out


def update_frame(available: list[commands.Command]) -> dict[str, Any]:
    return {"sessionUpdate": "available_commands_update", "availableCommands": [wire(c) for c in available]}
