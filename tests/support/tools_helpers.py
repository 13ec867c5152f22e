"""Shared helpers for the tool tests: a context over a temporary workspace, schema-checked calls, a fake editor."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from runtime.tools.base import Tool, ToolContext, ToolResult, validate_arguments
from runtime.tools.builtin import builtin_tools
from runtime.tools.builtin.textio import EditorError
from runtime.workspace import Workspace

TOOLS: dict[str, Tool] = {t.name: t for t in builtin_tools()}


def make_ctx(
    root: Any,
    *,
    grants: frozenset[str] = frozenset(),
    editor: Any = None,
    session_id: str = "sess_test",
    progress: Any = None,
) -> ToolContext:
    return ToolContext(session_id, "call_1", Workspace(str(root)), grants=grants, editor=editor, progress=progress)


async def run(name: str, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    """Validate like the runtime does, then run."""
    tool = TOOLS[name]
    validate_arguments(tool, dict(args))
    return await tool.run(args, ctx)


class FakeEditor:
    """An editor bridge backed by a dict of buffers (falling back to disk) and a scripted terminal."""

    def __init__(self, *, can_read: bool = True, can_write: bool = True, can_terminal: bool = False) -> None:
        self.can_read = can_read
        self.can_write = can_write
        self.can_terminal = can_terminal
        self.buffers: dict[str, str] = {}
        self.calls: list[tuple[str, Any]] = []
        self.terminal_exit: dict[str, Any] = {"exitCode": 0, "signal": None}
        self.terminal_text = "terminal says hi\n"
        self.wait_forever = False
        self.waiting = anyio.Event()  # set once a terminal is being waited for
        self.on_read: Any = None  # hook called after each read (to simulate a concurrent change)

    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        assert self.can_read
        self.calls.append(("fs/read_text_file", {"path": path, "line": line, "limit": limit}))
        if path in self.buffers:
            text = self.buffers[path]
        else:
            try:
                text = await anyio.Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise EditorError(str(exc)) from None
        if self.on_read is not None:
            self.on_read(path)
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = (line or 1) - 1
            text = "".join(lines[start : start + limit if limit is not None else None])
        return text

    async def write_text_file(self, path: str, content: str) -> None:
        assert self.can_write
        self.calls.append(("fs/write_text_file", {"path": path, "content": content}))
        self.buffers[path] = content

    async def create_terminal(
        self, command: str, args: list[str], cwd: str, env: Mapping[str, str], output_byte_limit: int
    ) -> str:
        assert self.can_terminal
        self.calls.append(
            (
                "terminal/create",
                {"command": command, "args": args, "cwd": cwd, "env": dict(env), "outputByteLimit": output_byte_limit},
            )
        )
        return "term_1"

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        self.calls.append(("terminal/wait_for_exit", terminal_id))
        self.waiting.set()
        if self.wait_forever:
            await anyio.sleep_forever()
        return self.terminal_exit

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        self.calls.append(("terminal/output", terminal_id))
        return {
            "output": self.terminal_text,
            "truncated": False,
            "exitStatus": None if self.wait_forever else self.terminal_exit,
        }

    async def kill_terminal(self, terminal_id: str) -> None:
        self.calls.append(("terminal/kill", terminal_id))

    async def release_terminal(self, terminal_id: str) -> None:
        self.calls.append(("terminal/release", terminal_id))

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls]
