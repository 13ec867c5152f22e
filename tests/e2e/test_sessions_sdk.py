"""Session methods end to end through the official ACP SDK: load in a new process (full replay before the answer,
model context and script position restored), list, resume, fork, close (cancelling a running prompt), delete."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.schema import ClientCapabilities, Implementation

from tests.support.sdk_client import RecordingClient, spawn_sdk_agent

pytestmark = pytest.mark.anyio


def script(tmp: Path, responses: list[dict]) -> str:
    p = tmp / "model.json"
    p.write_text(json.dumps({"responses": responses}))
    return f"scripted:{p}"


async def init(conn) -> object:
    return await asyncio.wait_for(
        conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="t", version="0"),
        ),
        10,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "README.md").write_text("# hello\n")
    return w


def w(aw):
    """Every call is bounded: a hang fails this test, not the whole run."""
    return asyncio.wait_for(aw, 15)


def frames(record: Path) -> list[dict]:
    return [e["msg"] for e in map(json.loads, record.read_text().splitlines()) if "msg" in e and e["msg"]]


async def test_capabilities_advertise_exactly_the_session_methods_that_work(tmp_path, ws):
    async with spawn_sdk_agent(RecordingClient(), tmp_path) as (conn, _, _):
        caps = (await init(conn)).agent_capabilities
    assert caps.load_session is True
    sc = caps.session_capabilities
    assert sc.list is not None and sc.resume is not None and sc.close is not None and sc.delete is not None


async def test_a_session_loaded_in_a_new_process_replays_everything_before_the_answer_and_continues(tmp_path, ws):
    model = script(
        tmp_path,
        [
            {
                "thinking": "Look first.",
                "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}],
            },
            {"text": "It says hello.", "usage": {"input_tokens": 50, "output_tokens": 5}},
            {"text": "Second answer."},
        ],
    )
    first = RecordingClient()
    async with spawn_sdk_agent(first, tmp_path, "--model", model) as (conn, _, _):
        await init(conn)
        sid = (await w(conn.new_session(cwd=str(ws), mcp_servers=[]))).session_id
        answer = await w(conn.prompt(session_id=sid, prompt=[text_block("What is in the README?")]))
        assert answer.stop_reason == "end_turn"
        await w(conn.set_session_mode(session_id=sid, mode_id="auto"))

    client = RecordingClient()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, record):
        await init(conn)
        listed = await w(conn.list_sessions(cwd=str(ws)))
        (info,) = listed.sessions
        assert info.session_id == sid and info.title == "What is in the README?" and info.cwd == str(ws)
        assert datetime.fromisoformat(info.updated_at.replace("Z", "+00:00")).year >= 2024
        loaded = await asyncio.wait_for(conn.load_session(session_id=sid, cwd=str(ws), mcp_servers=[]), 10)
        assert loaded.modes.current_mode_id == "auto"
        assert next(o for o in loaded.config_options if o.id == "mode").current_value == "auto"
        again = await w(conn.prompt(session_id=sid, prompt=[text_block("And now?")]))
    assert again.stop_reason == "end_turn"
    assert client.text().endswith("Second answer.")  # the script went on where the session stood
    # On the wire: every update of the load came before its answer.
    out = frames(record)
    load_id = next(f["id"] for f in out if f.get("method") == "session/load")
    answer_at = next(i for i, f in enumerate(out) if f.get("id") == load_id and "result" in f)
    replayed = [f["params"]["update"] for f in out[:answer_at] if f.get("method") == "session/update"]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds[:5] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert replayed[0]["content"]["text"] == "What is in the README?"
    assert replayed[3]["status"] == "completed" and replayed[3]["content"][0]["content"]["text"].endswith("# hello\n")
    assert replayed[4]["content"]["text"] == "It says hello."
    assert {"available_commands_update", "session_info_update", "usage_update"} <= set(kinds)
    usage = next(u for u in replayed if u["sessionUpdate"] == "usage_update")
    assert usage["used"] == 55
    after = [f for f in out[answer_at + 1 :] if f.get("method") == "session/update"]
    prompt_id = next(f["id"] for f in out if f.get("method") == "session/prompt" and f["id"] != load_id)
    assert all(out.index(f) > out.index(next(x for x in out if x.get("id") == prompt_id)) for f in after)


async def test_resume_fork_close_and_delete_through_the_sdk(tmp_path, ws):
    model = script(tmp_path, [{"text": "one"}, {"text": "two"}, {"text": "three"}])
    client = RecordingClient()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        await init(conn)
        sid = (await w(conn.new_session(cwd=str(ws), mcp_servers=[]))).session_id
        await w(conn.prompt(session_id=sid, prompt=[text_block("first")]))
        n_updates = len(client.updates)
        resumed = await w(conn.resume_session(session_id=sid, cwd=str(ws)))
        assert resumed.modes.current_mode_id == "safe"
        await asyncio.sleep(0.2)
        assert "user_message_chunk" not in client.kinds()[n_updates:]  # resume does not replay

        forked = await w(conn.fork_session(session_id=sid, cwd=str(ws)))
        assert forked.session_id != sid
        await w(conn.prompt(session_id=forked.session_id, prompt=[text_block("in the fork")]))
        assert client.text().endswith("two")  # the fork continues from the original's position
        await w(conn.prompt(session_id=sid, prompt=[text_block("in the original")]))
        assert client.text().endswith("two")  # … and the original keeps its own

        ids = {s.session_id for s in (await w(conn.list_sessions())).sessions}
        assert ids == {sid, forked.session_id}

        assert await w(conn.close_session(session_id=sid)) is not None
        with pytest.raises(RequestError) as err:
            await w(conn.prompt(session_id=sid, prompt=[text_block("closed?")]))
        assert err.value.code == -32002
        # Still listed (closing frees, it does not delete), and loadable again.
        assert sid in {s.session_id for s in (await w(conn.list_sessions())).sessions}

        assert await w(conn._conn.send_request("session/delete", {"sessionId": forked.session_id})) == {}
        assert await w(conn._conn.send_request("session/delete", {"sessionId": "sess_never_existed"})) == {}
        ids = {s.session_id for s in (await w(conn.list_sessions())).sessions}
        assert ids == {sid}
        with pytest.raises(RequestError) as err:
            await w(conn.load_session(session_id=forked.session_id, cwd=str(ws), mcp_servers=[]))
        assert err.value.code == -32002
        with pytest.raises(RequestError) as err:
            await w(conn.resume_session(session_id="sess_unknown", cwd=str(ws)))
        assert err.value.code == -32002
        with pytest.raises(RequestError) as err:
            await w(conn.close_session(session_id="sess_unknown"))
        assert err.value.code == -32002
        assert (await w(conn.list_sessions(cwd=str(tmp_path)))).sessions == []  # no match is an empty list


async def test_close_cancels_the_running_prompt(tmp_path, ws):
    model = script(tmp_path, [{"delay_ms": 30_000, "text": "too late"}])
    client = RecordingClient()
    async with spawn_sdk_agent(client, tmp_path, "--model", model) as (conn, _, _):
        await init(conn)
        sid = (await w(conn.new_session(cwd=str(ws), mcp_servers=[]))).session_id
        running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("take your time")]))
        for _ in range(200):
            if "session_info_update" in client.kinds():
                break
            await asyncio.sleep(0.02)
        await asyncio.wait_for(conn.close_session(session_id=sid), 10)
        resp = await asyncio.wait_for(running, 10)
    assert resp.stop_reason == "cancelled"
    assert "too late" not in client.text()
