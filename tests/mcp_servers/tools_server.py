"""A stdio MCP server with one tool per behaviour the tests need.

Environment: MCP_TEST_GATE=PATH makes the server wait until PATH exists before it serves (to prove that nothing waits
for it); MCP_TEST_PIDFILE=PATH records the pids of the server and of a grandchild it starts (to prove both die). The
pids are those of the server's sandbox (its own pid namespace): tests find both processes by PATH instead, which is
in the server's environment and in the grandchild's argv.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

pidfile = os.environ.get("MCP_TEST_PIDFILE")
if pidfile:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", pidfile])
    with open(pidfile, "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")

gate = os.environ.get("MCP_TEST_GATE")
if gate:
    while not os.path.exists(gate):
        time.sleep(0.02)

import anyio  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents, ToolAnnotations  # noqa: E402

server = MCPServer(os.environ.get("MCP_TEST_NAME", "tools"))


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text (not marked read-only)."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress for each step."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await anyio.sleep(0.15)
    return f"finished {steps} steps"


@server.tool()
def picture() -> list[TextContent | ImageContent | EmbeddedResource]:
    """A text, an image and an embedded resource."""
    return [
        TextContent(type="text", text="a red dot"),
        ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///notes.txt", text="hello notes",
                                                                        mime_type="text/plain")),
    ]


@server.tool()
def search(query: str, tenant: str) -> str:
    """Search tickets of a tenant."""
    return f"results for {query!r} in tenant {tenant}"


@server.tool()
def getenv(name: str) -> str:
    """Read an environment variable of the server process."""
    return os.environ.get(name, "<unset>")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def cwd() -> str:
    """The server's working directory."""
    return os.getcwd()


@server.tool()
def crash() -> str:
    """The server process dies in the middle of the call."""
    os._exit(7)


@server.tool()
async def hang(marker: str) -> str:
    """Waits forever; writes MARKER when the call is cancelled."""
    try:
        await anyio.sleep(600)
    except anyio.get_cancelled_exc_class():
        with open(marker, "w") as f:  # noqa: ASYNC230 - must happen before the cancellation completes
            f.write("cancelled")
        raise
    return "never"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool NAME at run time and tells the client its tool list changed."""

    def added() -> str:
        return f"{name} says hi"

    server.add_tool(added, name=name, description="Added at run time.")
    await ctx.notify_tools_changed()  # to `subscriptions/listen` subscribers
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Removes the tool NAME at run time and tells the client its tool list changed."""
    server.remove_tool(name)
    await ctx.notify_tools_changed()
    return f"removed {name}"


@server.tool(name="weird name!", annotations=ToolAnnotations(readOnlyHint=True))
def weird() -> str:
    """A tool whose name needs normalising."""
    return "weird ok"


if __name__ == "__main__":
    server.run()
