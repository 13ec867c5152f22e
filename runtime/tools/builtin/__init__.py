"""The built-in tools. `builtin_tools()` gives a fresh instance of each for one session."""

from __future__ import annotations

from runtime.tools.base import Tool


def builtin_tools() -> list[Tool]:
    from runtime.tools.builtin.files import ReadFileTool, WriteFileTool

    tools: list[Tool] = [ReadFileTool(), WriteFileTool()]
    return tools
