"""The modules the runtime and the ACP host import on first use: `from runtime import lazy` at module level, then
`lazy.httpx2.AsyncClient(...)` where it is needed (the mechanism, and the other lazy places: `permissions.lazy`).

Two kinds, each with its reason:
- heavy libraries that only some calls need: the MCP SDK (over a second), the HTTP client (a provider's first call),
  jsonschema (argument checks beyond argcheck's part of JSON Schema), rich (`gatewright replay`), sqlite3 (the
  `permissions` and `audit` commands);
- what `gatewright acp` must not load before it answers `initialize` (tests/acp_server/test_startup_path.py): anyio
  and the event loop, tomllib (only when a config file exists), and the runtime's own modules that start-up modules
  (`runtime.config`, `runtime.models`) use for later calls: the model clients, the conversation records, the bash
  tool's rule keys, the host patterns of `[sandbox] network` (only when the file has that key).

Nothing here is imported at run time until it is used: type checkers read the imports below, the interpreter reads
the table.
"""

from __future__ import annotations

from permissions.lazy import deferred

TYPE_CHECKING = False  # without importing typing, as in `runtime/__init__.py`
if TYPE_CHECKING:
    import hashlib as hashlib
    import sqlite3 as sqlite3
    import tomllib as tomllib

    import anyio as anyio
    import anyio.lowlevel as anyio_lowlevel
    import anyio.to_thread as anyio_to_thread
    import httpx2 as httpx2
    import jsonschema as jsonschema
    import mcp.client.client as mcp_client
    import mcp.client.session as mcp_session
    import mcp.client.sse as mcp_sse
    import mcp.client.streamable_http as mcp_streamable_http
    import mcp.client.subscriptions as mcp_subscriptions
    import mcp.shared.exceptions as mcp_exceptions
    import mcp.shared.message as mcp_message
    import mcp_types as mcp_types
    import rich.console as rich_console
    import rich.markdown as rich_markdown
    import rich.table as rich_table
    import rich.text as rich_text

    import runtime.approval as approval
    import runtime.models.anthropic_messages as anthropic_messages
    import runtime.models.base as model_base
    import runtime.models.openai_compat as openai_compat
    import runtime.models.scripted as scripted
    import runtime.sandbox.netnames as netnames
    import runtime.settings_models as settings_models
    import runtime.tools.builtin.bash as bash_tool

_LAZY: dict[str, str | tuple[str, str]] = {
    "hashlib": "hashlib",
    "sqlite3": "sqlite3",
    "tomllib": "tomllib",
    "anyio": "anyio",
    "anyio_lowlevel": "anyio.lowlevel",
    "anyio_to_thread": "anyio.to_thread",
    "httpx2": "httpx2",
    "jsonschema": "jsonschema",
    "mcp_client": "mcp.client.client",
    "mcp_session": "mcp.client.session",
    "mcp_sse": "mcp.client.sse",
    "mcp_streamable_http": "mcp.client.streamable_http",
    "mcp_subscriptions": "mcp.client.subscriptions",
    "mcp_exceptions": "mcp.shared.exceptions",
    "mcp_message": "mcp.shared.message",
    "mcp_types": "mcp_types",
    "rich_console": "rich.console",
    "rich_markdown": "rich.markdown",
    "rich_table": "rich.table",
    "rich_text": "rich.text",
    "approval": "runtime.approval",
    "anthropic_messages": "runtime.models.anthropic_messages",
    "model_base": "runtime.models.base",
    "openai_compat": "runtime.models.openai_compat",
    "scripted": "runtime.models.scripted",
    "settings_models": "runtime.settings_models",
    "netnames": "runtime.sandbox.netnames",
    "bash_tool": "runtime.tools.builtin.bash",
}

# A literal list, so that tools see the names (tests/test_import_contract.py checks it matches _LAZY).
__all__ = [
    "anthropic_messages",
    "anyio",
    "anyio_lowlevel",
    "anyio_to_thread",
    "approval",
    "bash_tool",
    "hashlib",
    "httpx2",
    "jsonschema",
    "mcp_client",
    "mcp_exceptions",
    "mcp_message",
    "mcp_session",
    "mcp_sse",
    "mcp_streamable_http",
    "mcp_subscriptions",
    "mcp_types",
    "model_base",
    "netnames",
    "openai_compat",
    "rich_console",
    "rich_markdown",
    "rich_table",
    "rich_text",
    "scripted",
    "settings_models",
    "sqlite3",
    "tomllib",
]

if not TYPE_CHECKING:
    __getattr__ = deferred(globals(), _LAZY)
