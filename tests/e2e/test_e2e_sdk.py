"""End to end: `gatewright acp` as a subprocess, driven by the official Python ACP SDK like an editor would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.schema import ClientCapabilities, Implementation

from tests.support.sdk_client import RecordingClient, spawn_sdk_agent

pytestmark = pytest.mark.anyio


def script(tmp: Path, responses: list[dict]) -> str:
    p = tmp / "model.json"
    p.write_text(json.dumps({"responses": responses}))
    return f"scripted:{p}"


async def start(conn, ws: Path):
    init = await asyncio.wait_for(
        conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="t", version="0"),
        ),
        10,
    )
    assert init.protocol_version == 1
    sess = await asyncio.wait_for(conn.new_session(cwd=str(ws), mcp_servers=[]), 10)
    return sess.session_id


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "README.md").write_text("# hello\n")
    return w


async def test_a_turn_streams_thoughts_tool_calls_with_diffs_and_text_through_an_approval(tmp_path, ws):
    model = script(
        tmp_path,
        [
            {"thinking": "Look first.", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {
                "tool_calls": [
                    {"id": "call_w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}
                ]
            },
            {"text": "Done: wrote hello.txt.", "chunks": 4},
        ],
    )
    client = RecordingClient(["allow_once"])
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("write hello")]), 30)
    assert resp.stop_reason == "end_turn"
    assert (ws / "hello.txt").read_text() == "hi\n"
    kinds = [k for k in client.kinds() if k not in ("available_commands_update", "session_info_update")]
    assert kinds[0] == "agent_thought_chunk" and "tool_call" in kinds and kinds[-1] == "agent_message_chunk"
    assert client.text() == "Done: wrote hello.txt."
    ((tool_call, options),) = client.permissions
    assert tool_call.title == "Write hello.txt" and tool_call.kind == "edit"
    assert tool_call.raw_input == {"path": "hello.txt", "content": "hi\n"}
    assert tool_call.content[0].type == "diff" and tool_call.content[0].new_text == "hi\n"
    assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once", "reject_always"}
    statuses = [
        u.status
        for u in client.updates
        if u.session_update == "tool_call_update" and u.tool_call_id == "call_w1" and u.status
    ]
    assert statuses == ["in_progress", "completed"]
    starts = [u for u in client.updates if u.session_update == "tool_call"]
    assert [s.kind for s in starts] == ["read", "edit"] and all(s.status == "pending" for s in starts)
    assert starts[0].locations[0].path == str(ws / "README.md")


async def test_a_rejected_call_is_not_run_fails_and_ends_the_turn_without_another_model_call(tmp_path, ws):
    model = script(
        tmp_path,
        [
            {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
            {"text": "NEXT-ENTRY"},
        ],
    )
    client = RecordingClient(["reject_once"])
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        resp = await conn.prompt(session_id=sid, prompt=[text_block("go")])
        assert resp.stop_reason == "end_turn"
        assert not (ws / "x.txt").exists()
        assert "NEXT-ENTRY" not in client.text()
        final = [u for u in client.updates if u.session_update == "tool_call_update" and u.status][-1]
        assert final.status == "failed"
        # the next prompt consumes the entry the rejected turn did not reach
        await conn.prompt(session_id=sid, prompt=[text_block("again")])
        assert "NEXT-ENTRY" in client.text()


async def test_a_cancelled_permission_outcome_ends_the_turn_cancelled(tmp_path, ws):
    model = script(
        tmp_path,
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]}, {"text": "no"}],
    )
    client = RecordingClient(["cancelled"])
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        resp = await conn.prompt(session_id=sid, prompt=[text_block("go")])
    assert resp.stop_reason == "cancelled" and not (ws / "x.txt").exists()


async def test_session_cancel_while_a_permission_is_pending_runs_nothing_and_answers_cancelled(tmp_path, ws):
    model = script(
        tmp_path,
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]}, {"text": "no"}],
    )
    client = RecordingClient(["hang"])
    client.permission_asked = asyncio.Event()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await asyncio.wait_for(client.permission_asked.wait(), 10)
        await conn.cancel(session_id=sid)
        resp = await asyncio.wait_for(task, 10)
        assert resp.stop_reason == "cancelled"
        n = len(client.updates)
        await asyncio.sleep(0.3)
        assert len(client.updates) == n, "no update may follow the prompt's answer"
        calls = [u for u in client.updates if u.session_update == "tool_call_update"]
        assert calls[-1].status == "failed"
        assert client.updates[-1].session_update == "session_info_update"  # the turn's last activity, then the answer
    assert not (ws / "x.txt").exists()


async def test_session_cancel_during_a_slow_model_call_answers_cancelled(tmp_path, ws):
    model = script(tmp_path, [{"delay_ms": 60_000, "text": "late"}])
    client = RecordingClient()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await asyncio.sleep(0.3)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(task, 5)).stop_reason == "cancelled"


async def test_allow_always_is_remembered_for_an_identical_call_in_the_session(tmp_path, ws):
    call = {"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}
    model = script(tmp_path, [{"tool_calls": [call]}, {"text": "a"}, {"tool_calls": [call]}, {"text": "b"}])
    client = RecordingClient(["allow_always"])
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        await conn.prompt(session_id=sid, prompt=[text_block("1")])
        r = await conn.prompt(session_id=sid, prompt=[text_block("2")])
    assert r.stop_reason == "end_turn" and len(client.permissions) == 1


async def test_modes_switch_through_set_mode_and_config_options(tmp_path, ws):
    call = {"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}
    model = script(tmp_path, [{"tool_calls": [call]}, {"text": "refused"}, {"tool_calls": [call]}, {"text": "ok"}])
    client = RecordingClient()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        await conn.prompt(session_id=sid, prompt=[text_block("1")])
        assert not client.permissions and not (ws / "x.txt").exists()
        resp = await conn.set_config_option(config_id="mode", session_id=sid, value="auto")
        assert resp.config_options[0].current_value == "auto"
        await conn.prompt(session_id=sid, prompt=[text_block("2")])
    assert not client.permissions and (ws / "x.txt").read_text() == "x"
    assert "current_mode_update" in client.kinds() and "config_option_update" in client.kinds()


async def test_without_a_model_session_new_works_and_a_prompt_says_what_to_set(tmp_path, ws):
    client = RecordingClient()
    async with spawn_sdk_agent(client, tmp_path) as (conn, _, _):
        sid = await start(conn, ws)
        resp = await conn.prompt(session_id=sid, prompt=[text_block("hi")])
    assert resp.stop_reason == "end_turn" and "--model" in client.text()


async def test_resource_links_and_embedded_resources_reach_the_model_as_text(tmp_path, ws):
    from acp import embedded_text_resource, resource_block, resource_link_block

    model = script(tmp_path, [{"text": "ok"}])
    client = RecordingClient()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        resp = await conn.prompt(
            session_id=sid,
            prompt=[
                text_block("look"),
                resource_link_block(name="README.md", uri=f"file://{ws}/README.md"),
                resource_block(embedded_text_resource(uri=f"file://{ws}/a.py", text="print(1)")),
            ],
        )
    assert resp.stop_reason == "end_turn"


async def test_two_sessions_have_separate_working_directories_and_approvals(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    call = {"name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}
    model = script(tmp_path, [{"tool_calls": [call]}, {"text": "done"}])
    client = RecordingClient(["allow_always", "allow_once"])
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sa = await start(conn, a)
        sb = (await conn.new_session(cwd=str(b), mcp_servers=[])).session_id
        await conn.prompt(session_id=sa, prompt=[text_block("1")])
        await conn.prompt(session_id=sb, prompt=[text_block("2")])
    assert (a / "f.txt").exists() and (b / "f.txt").exists()
    assert len(client.permissions) == 2, "an always-allow in session A must not apply in session B"


class NoQuestionsClient:
    """An SDK client without a `request_permission` handler (as the SDK's example client): the SDK answers -32601."""

    def __init__(self) -> None:
        self.updates: list = []

    async def session_update(self, session_id: str, update, **kw) -> None:
        self.updates.append(update)

    def text(self) -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")


async def test_a_client_that_does_not_serve_permission_questions_is_never_said_to_have_rejected(tmp_path, ws):
    model = script(
        tmp_path,
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "x"}}]}, {"text": "no"}],
    )
    client = NoQuestionsClient()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        sid = await start(conn, ws)
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("write n.txt")]), 30)
    assert resp.stop_reason == "end_turn"
    assert "the editor could not ask you about Write n.txt, so it was not run" in client.text()
    assert "rejected" not in client.text()
    assert not (ws / "n.txt").exists()
