"""The built-in tools. `builtin_tools()` gives a fresh instance of each for one session.

This package, and with it every tool module, loads at session creation (`runtime.builtin_tools`, a lazy name): start-up
of `gatewright acp` does not pay for them.
"""

from __future__ import annotations

from runtime.tools.base import Tool
from runtime.tools.builtin.agents_md import UpdateAgentsMdTool
from runtime.tools.builtin.bash import BashTool
from runtime.tools.builtin.edit import EditTool
from runtime.tools.builtin.files import ReadFileTool, WriteFileTool
from runtime.tools.builtin.patch import ApplyPatchTool
from runtime.tools.builtin.plan import UpdatePlanTool
from runtime.tools.builtin.search import GlobTool, GrepTool


def builtin_tools() -> list[Tool]:
    tools: list[Tool] = [
        ReadFileTool(),
        WriteFileTool(),
        EditTool(),
        ApplyPatchTool(),
        GlobTool(),
        GrepTool(),
        BashTool(),
        UpdateAgentsMdTool(),
        UpdatePlanTool(),
    ]
    return tools
