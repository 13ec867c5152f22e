"""The editor's own files and terminals (`fs/*`, `terminal/*`), for the tools, exactly as far as the client offered.

`AcpEditorBridge.from_capabilities` reads `clientCapabilities` from `initialize`; a method the client did not
advertise is never sent (it raises `EditorError` locally instead). Paths on the wire are absolute and have already
passed the workspace boundary in the tool that asks. Client errors and a closed connection become `EditorError`,
which the tools turn into a `TOOL_ERROR` the model can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from acp_server.rpc import ClientError, ConnectionClosed
from runtime import EditorError

if TYPE_CHECKING:
    from acp_server.rpc import JsonRpcConnection


class AcpEditorBridge:
    def __init__(self, conn: JsonRpcConnection, session_id: str, *, can_read: bool, can_write: bool,
                 can_terminal: bool) -> None:
        self.conn = conn
        self.session_id = session_id
        self.can_read = can_read
        self.can_write = can_write
        self.can_terminal = can_terminal

    @classmethod
    def from_capabilities(cls, conn: JsonRpcConnection, session_id: str,
                          caps: Mapping[str, Any] | None) -> AcpEditorBridge | None:
        """A bridge for what the client advertised, or None when it advertised none of it.

        Only a literal `true` counts: a capability that is missing, null or of the wrong type is not offered.
        """
        caps = caps if isinstance(caps, Mapping) else {}
        fs = f if isinstance(f := caps.get("fs"), Mapping) else {}
        can_read = fs.get("readTextFile") is True
        can_write = fs.get("writeTextFile") is True
        can_terminal = caps.get("terminal") is True
        if not (can_read or can_write or can_terminal):
            return None
        return cls(conn, session_id, can_read=can_read, can_write=can_write, can_terminal=can_terminal)

    async def _call(self, method: str, allowed: bool, params: dict[str, Any]) -> Any:
        if not allowed:
            raise EditorError(f"the editor did not offer {method}")
        try:
            return await self.conn.request(method, {"sessionId": self.session_id, **params})
        except ClientError as exc:
            raise EditorError(f"{exc.message} (error {exc.code})") from None
        except ConnectionClosed:
            raise EditorError("the editor connection is closed") from None

    # ---- fs ------------------------------------------------------------------------------------------------------
    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        params: dict[str, Any] = {"path": path}
        if line is not None and line > 1:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        answer = await self._call("fs/read_text_file", self.can_read, params)
        content = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(content, str):
            raise EditorError("fs/read_text_file answered without text content")
        return content

    async def write_text_file(self, path: str, content: str) -> None:
        await self._call("fs/write_text_file", self.can_write, {"path": path, "content": content})

    # ---- terminals -----------------------------------------------------------------------------------------------
    async def create_terminal(self, command: str, args: list[str], cwd: str, env: Mapping[str, str],
                              output_byte_limit: int) -> str:
        answer = await self._call("terminal/create", self.can_terminal, {
            "command": command,
            "args": list(args),
            "cwd": cwd,
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "outputByteLimit": output_byte_limit,
        })
        tid = answer.get("terminalId") if isinstance(answer, dict) else None
        if not isinstance(tid, str) or not tid:
            raise EditorError("terminal/create answered without a terminalId")
        return tid

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        answer = await self._call("terminal/output", self.can_terminal, {"terminalId": terminal_id})
        return answer if isinstance(answer, dict) else {}

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        answer = await self._call("terminal/wait_for_exit", self.can_terminal, {"terminalId": terminal_id})
        return answer if isinstance(answer, dict) else {}

    async def kill_terminal(self, terminal_id: str) -> None:
        await self._call("terminal/kill", self.can_terminal, {"terminalId": terminal_id})

    async def release_terminal(self, terminal_id: str) -> None:
        await self._call("terminal/release", self.can_terminal, {"terminalId": terminal_id})
