"""The editor's own files and terminals (`fs/*`, `terminal/*`), for the tools, exactly as far as the client offered.

`AcpEditorBridge.from_capabilities` reads the client's capabilities from `initialize` (as the schema reads them: a
capability that is not a literal `true` is not offered); a method the client did not advertise is never sent (it
raises `EditorError` locally instead). Paths on the wire are absolute and have already passed the workspace boundary
in the tool that asks. Client errors, a closed connection and an answer that does not fit the method's response
model become `EditorError`, which the tools turn into a `TOOL_ERROR` the model can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from acp_server.errors import WireError
from acp_server.protocol.schema import (
    CreateTerminalRequest,
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalRequest,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    TerminalOutputRequest,
    WaitForTerminalExitRequest,
    WriteTextFileRequest,
)
from acp_server.rpc import ClientError, ConnectionClosed
from runtime import EditorError

if TYPE_CHECKING:
    from acp_server.protocol.base import WireModel
    from acp_server.protocol.schema import ClientCapabilities
    from acp_server.rpc import JsonRpcConnection


class AcpEditorBridge:
    def __init__(
        self, conn: JsonRpcConnection, session_id: str, *, can_read: bool, can_write: bool, can_terminal: bool
    ) -> None:
        self.conn = conn
        self.session_id = session_id
        self.can_read = can_read
        self.can_write = can_write
        self.can_terminal = can_terminal

    @classmethod
    def from_capabilities(
        cls, conn: JsonRpcConnection, session_id: str, caps: ClientCapabilities
    ) -> AcpEditorBridge | None:
        """A bridge for what the client advertised, or None when it advertised none of it."""
        can_read, can_write, can_terminal = caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal
        if not (can_read or can_write or can_terminal):
            return None
        return cls(conn, session_id, can_read=can_read, can_write=can_write, can_terminal=can_terminal)

    async def _call(self, method: str, allowed: bool, params: WireModel) -> Any:
        if not allowed:
            raise EditorError(f"the editor did not offer {method}")
        try:
            return await self.conn.request(method, params.to_wire())
        except ClientError as exc:
            raise EditorError(f"{exc.message} (error {exc.code})") from None
        except ConnectionClosed:
            raise EditorError("the editor connection is closed") from None

    # ---- fs ------------------------------------------------------------------------------------------------------
    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        params = ReadTextFileRequest(
            session_id=self.session_id, path=path, line=line if line is not None and line > 1 else None, limit=limit
        )
        answer = await self._call("fs/read_text_file", self.can_read, params)
        try:
            return ReadTextFileResponse.from_wire(answer, "result").content
        except WireError:
            raise EditorError("fs/read_text_file answered without text content") from None

    async def write_text_file(self, path: str, content: str) -> None:
        await self._call(
            "fs/write_text_file",
            self.can_write,
            WriteTextFileRequest(session_id=self.session_id, path=path, content=content),
        )

    # ---- terminals -----------------------------------------------------------------------------------------------
    async def create_terminal(
        self, command: str, args: list[str], cwd: str, env: Mapping[str, str], output_byte_limit: int
    ) -> str:
        answer = await self._call(
            "terminal/create",
            self.can_terminal,
            CreateTerminalRequest(
                session_id=self.session_id,
                command=command,
                args=list(args),
                cwd=cwd,
                env=[EnvVariable(name=k, value=v) for k, v in env.items()],
                output_byte_limit=output_byte_limit,
            ),
        )
        try:
            tid = CreateTerminalResponse.from_wire(answer, "result").terminal_id
        except WireError:
            tid = ""
        if not tid:
            raise EditorError("terminal/create answered without a terminalId")
        return tid

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        answer = await self._call(
            "terminal/output",
            self.can_terminal,
            TerminalOutputRequest(session_id=self.session_id, terminal_id=terminal_id),
        )
        return answer if isinstance(answer, dict) else {}

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        answer = await self._call(
            "terminal/wait_for_exit",
            self.can_terminal,
            WaitForTerminalExitRequest(session_id=self.session_id, terminal_id=terminal_id),
        )
        return answer if isinstance(answer, dict) else {}

    async def kill_terminal(self, terminal_id: str) -> None:
        await self._call(
            "terminal/kill", self.can_terminal, KillTerminalRequest(session_id=self.session_id, terminal_id=terminal_id)
        )

    async def release_terminal(self, terminal_id: str) -> None:
        await self._call(
            "terminal/release",
            self.can_terminal,
            ReleaseTerminalRequest(session_id=self.session_id, terminal_id=terminal_id),
        )
