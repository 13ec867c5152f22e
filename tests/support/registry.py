"""What the ACP Registry's verifier sends and how it reads the answer (its AUTHENTICATION.md and `--auth-check`),
for the tests and for `.ci/uvx_check.py`."""

from __future__ import annotations

from typing import Any

VERIFIER_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
        "clientCapabilities": {
            "terminal": True,
            "fs": {"readTextFile": True, "writeTextFile": True},
            "_meta": {"terminal_output": True, "terminal-auth": True},
        },
    },
}


def method_type(method: dict[str, Any]) -> str:
    """An auth method's type as the verifier reads it: `type`, else a `terminal-auth` / `agent-auth` key of
    `_meta`, else `agent`."""
    if method.get("type"):
        return str(method["type"])
    meta = method.get("_meta") or {}
    return "terminal" if "terminal-auth" in meta else "agent"
