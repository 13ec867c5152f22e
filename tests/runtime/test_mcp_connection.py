"""MCP servers as real subprocesses (stdio) and on loopback (streamable HTTP, SSE), driven through McpConnections."""

from __future__ import annotations

import os

import anyio
import pytest

from runtime.tools.base import ToolFailure, ToolResult
from tests.support.mcp_helpers import SERVERS, broken_entry, harness, http_server, marked, stdio_entry
from tests.support.sandbox_helpers import eventually

LEGACY_SERVER = str(SERVERS / "legacy_server.py")

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_tools_are_listed_under_normalised_prefixed_names(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("tickets")])
        await h.ready()
        names = h.registry.names()
        assert "mcp__tickets__echo" in names
        assert "mcp__tickets__search" in names
        weird = [n for n in names if n.startswith("mcp__tickets__weird_name_")]
        assert len(weird) == 1 and len(weird[0]) <= 64
        assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") for n in names)
        assert h.manager.status() == [("tickets", "ready", len(names))]
        assert h.notices == []


@pytest.mark.parametrize("legacy", [False, True], ids=["listen-subscription", "legacy-notification"])
async def test_a_changed_tool_list_is_followed_added_and_removed_tools_included(tmp_path, legacy):
    """2026-07-28 servers announce changes on a `subscriptions/listen` stream; older ones send a bare
    `notifications/tools/list_changed` (tests/mcp_servers/legacy_server.py speaks only that protocol)."""
    entry = stdio_entry("t")
    if legacy:
        entry["args"] = [LEGACY_SERVER]
    async with harness(str(tmp_path)) as h:
        h.start([entry])
        await h.ready()
        assert "mcp__t__sparkle" not in h.registry.names()
        before = set(h.registry.names())
        assert (await h.call("mcp__t__grow", {"name": "sparkle"})).output == "added sparkle"
        assert await eventually(lambda: "mcp__t__sparkle" in h.registry.names())
        assert set(h.registry.names()) == before | {"mcp__t__sparkle"}  # the other tools keep their names
        assert (await h.call("mcp__t__sparkle", {})).output == "sparkle says hi"
        assert h.manager.status() == [("t", "ready", len(before) + 1)]
        await h.call("mcp__t__shrink", {"name": "sparkle"})
        assert await eventually(lambda: "mcp__t__sparkle" not in h.registry.names())
        assert set(h.registry.names()) == before
        assert h.notices == []


async def test_a_call_returns_the_servers_text_as_content(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t")])
        await h.ready()
        result = await h.call("mcp__t__echo", {"text": "hi"})
        assert not result.is_error
        assert result.output == "echo: hi"
        assert result.content[0] == {"type": "content", "content": {"type": "text", "text": "echo: hi"}}
        assert result.raw_output == {"structuredContent": {"result": "echo: hi"}}


async def test_is_error_becomes_a_failed_result_with_the_servers_message(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t")])
        await h.ready()
        result = await h.call("mcp__t__fail", {"reason": "nope"})
        assert result.is_error
        assert "fail" in result.output


async def test_images_and_embedded_resources_become_acp_content(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t")])
        await h.ready()
        result = await h.call("mcp__t__picture", {})
        blocks = [c["content"] for c in result.content]
        assert blocks[0] == {"type": "text", "text": "a red dot"}
        assert blocks[1] == {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        assert blocks[2] == {
            "type": "resource",
            "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "hello notes"},
        }
        assert "[image image/png, 8 bytes]" in result.output
        assert "hello notes" in result.output


async def test_progress_notifications_become_progress_updates(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t")])
        await h.ready()
        progress: list[ToolResult] = []
        result = await h.call("mcp__t__slow", {"steps": 3}, progress)
        assert result.output == "finished 3 steps"
        texts = [p.content[0]["content"]["text"] for p in progress]
        assert texts and texts[0] == "step 1 (1/3)"


async def test_env_pairs_reach_the_stdio_server(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t", env={"TICKETS_TOKEN": "tok-123456"})])
        await h.ready()
        assert (await h.call("mcp__t__getenv", {"name": "TICKETS_TOKEN"})).output == "tok-123456"
        # the server runs in the session's cwd
        assert (await h.call("mcp__t__cwd", {})).output == str(tmp_path)


async def test_pinned_argument_is_hidden_from_the_schema_and_injected(tmp_path):
    meta = {"gatewright": {"pinned": {"search": {"tenant": "acme"}}}}
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t", meta=meta)])
        await h.ready()
        tool = h.registry.get("mcp__t__search")
        assert tool is not None
        assert "tenant" not in tool.schema["properties"]
        assert tool.schema.get("required") == ["query"]
        assert (await h.call("mcp__t__search", {"query": "bug"})).output == "results for 'bug' in tenant acme"
        with pytest.raises(ToolFailure) as err:
            await h.call("mcp__t__search", {"query": "bug", "tenant": "evil"})
        assert err.value.error_type == "InvalidArguments"


async def test_a_broken_server_is_reported_and_the_others_still_work(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([broken_entry("bad", "bad config: missing key"), stdio_entry("good")])
        await h.ready()
        notices = await h.wait_notices(1)
        assert notices[0].title == "MCP server bad failed to start"
        assert notices[0].description == "exited with code 3: bad config: missing key"
        assert (await h.call("mcp__good__echo", {"text": "x"})).output == "echo: x"
        assert not any(n.startswith("mcp__bad__") for n in h.registry.names())


async def test_a_missing_command_and_an_unsupported_entry_are_reported(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start(
            [
                {"name": "ghost", "command": "/nonexistent/server", "args": [], "env": []},
                {"type": "acp", "name": "inproc", "serverId": "x"},
            ]
        )
        notices = await h.wait_notices(2)
        by_title = {n.title: n.description for n in notices}
        assert by_title["MCP server ghost failed to start"] == "command not found: /nonexistent/server"
        assert "not supported" in by_title["MCP server inproc was not started"]


async def test_secrets_never_appear_in_failure_notices(tmp_path):
    secret = "hunter2-very-secret"
    entry = broken_entry("leaky", f"cannot log in with {secret}")
    entry["env"] = [{"name": "PASSWORD", "value": secret}]
    async with harness(str(tmp_path)) as h:
        h.start([entry])
        notices = await h.wait_notices(1)
        assert secret not in notices[0].description
        assert "<redacted>" in notices[0].description


async def test_a_server_crashing_mid_call_fails_the_call_and_removes_its_tools(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t")])
        await h.ready()
        with pytest.raises(ToolFailure) as err:
            await h.call("mcp__t__crash", {})
        assert err.value.error_type == "McpServerStopped"
        notices = await h.wait_notices(1)
        assert notices[0].title == "MCP server t stopped"
        assert notices[0].description.startswith("exited with code 7")
        assert h.registry.names() == []


async def test_cancelling_a_call_cancels_the_mcp_request(tmp_path):
    marker = tmp_path / "cancelled.txt"
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t")])
        await h.ready()
        with anyio.move_on_after(1.0):
            await h.call("mcp__t__hang", {"marker": str(marker)})
        assert await eventually(marker.exists)
        # the connection is still usable afterwards
        assert (await h.call("mcp__t__echo", {"text": "after"})).output == "echo: after"


async def test_closing_kills_the_server_and_its_grandchildren(tmp_path):
    pidfile = tmp_path / "pids"
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("t", env={"MCP_TEST_PIDFILE": str(pidfile)})])
        await h.ready()
        assert len(marked(pidfile)) == 2  # the server and its grandchild
        await h.manager.close()
        assert h.registry.names() == []
    assert await eventually(lambda: not marked(pidfile), 5)


async def test_a_server_that_never_answers_fails_after_the_start_timeout(tmp_path):
    hang = {"name": "mute", "command": "/bin/sh", "args": ["-c", "sleep 600"], "env": []}
    async with harness(str(tmp_path), start_timeout=1.0) as h:
        h.start([hang])
        notices = await h.wait_notices(1)
        assert notices[0].title == "MCP server mute failed to start"
        assert notices[0].description == "did not finish starting within 1 s"


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_http_and_sse_servers_get_their_headers_and_report_progress(tmp_path, kind):
    with http_server(kind) as url:
        entry = {
            "type": kind,
            "name": "web",
            "url": url,
            "headers": [{"name": "Authorization", "value": "Bearer s3cr3t-token"}],
        }
        async with harness(str(tmp_path)) as h:
            h.start([entry])
            await h.ready()
            assert h.notices == []
            assert (await h.call("mcp__web__whoami", {})).output == "authorization: Bearer s3cr3t-token"
            progress: list[ToolResult] = []
            assert (await h.call("mcp__web__countdown", {"n": 2}, progress)).output == "liftoff"
            assert progress


async def test_an_unreachable_http_server_is_reported_without_its_credentials(tmp_path):
    entry = {
        "type": "http",
        "name": "down",
        "url": "http://user:pw-secret@127.0.0.1:9/mcp?token=qs-secret-1",
        "headers": [{"name": "X-Api-Key", "value": "header-secret"}],
    }
    async with harness(str(tmp_path)) as h:
        h.start([entry])
        notices = await h.wait_notices(1)
        text = notices[0].description
        assert text == "cannot connect to http://127.0.0.1:9/mcp"
        for secret in ("pw-secret", "qs-secret-1", "header-secret"):
            assert secret not in text


async def test_two_servers_with_colliding_names_both_keep_their_tools(tmp_path):
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("my server"), stdio_entry("my_server"), stdio_entry("my_server")])
        await h.ready()
        echo = sorted(n for n in h.registry.names() if "echo" in n)
        assert len(echo) == 3, echo
        assert "mcp__my_server__echo" in echo
        assert "mcp__my_server-2__echo" in echo
        assert os.environ.get("PYTEST_CURRENT_TEST")


async def test_a_turn_waits_for_a_starting_server_but_only_up_to_the_budget(tmp_path):
    gate = tmp_path / "gate"
    async with harness(str(tmp_path), turn_wait=0.5) as h:
        h.start([stdio_entry("late", env={"MCP_TEST_GATE": str(gate)})])
        await h.ready()  # returns although the server cannot be ready: it waits for the gate
        assert h.manager.status() == [("late", "starting", 0)]
        gate.write_text("go")
        with anyio.fail_after(20):
            await h.manager.connections[0].settled.wait()
        assert "mcp__late__echo" in h.registry.names()
        await h.ready()  # nothing left to wait for


async def test_closing_a_server_that_is_still_starting_kills_it_quietly(tmp_path):
    gate, pidfile = tmp_path / "gate", tmp_path / "pids"
    async with harness(str(tmp_path)) as h:
        h.start([stdio_entry("late", env={"MCP_TEST_GATE": str(gate), "MCP_TEST_PIDFILE": str(pidfile)})])
        assert await eventually(lambda: pidfile.exists() and pidfile.read_text().endswith("\n"))
        assert await eventually(lambda: len(marked(pidfile)) == 2)
        with anyio.fail_after(10):
            await h.manager.close()
        assert h.manager.status() == [("late", "closed", 0)]
        assert h.notices == []
    assert await eventually(lambda: not marked(pidfile), 5)
