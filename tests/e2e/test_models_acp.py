"""End to end: a real `gatewright acp` subprocess, driven by the official ACP SDK, talking to the local fake provider
server through the real provider SDKs. What an editor user sees: tool-using turns, auth errors, failures, cancel,
model switching, usage and cost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, ClientCapabilities, Implementation, RequestPermissionResponse

from tests.support.fake_providers import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Cut,
    Hang,
    Reply,
    anthropic_stream,
    error_body,
    openai_stream,
)
from tests.support.sdk_client import check_recorded_frames

ROOT = Path(__file__).resolve().parents[2]
OPENAI_KEY = "sk-test-e2e-0123456789"
ANTHROPIC_KEY = "sk-ant-e2e-0123456789"


class RecordingClient:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.first_text = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)
        if update.session_update == "agent_message_chunk":
            self.first_text.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kw: Any) -> Any:
        opt = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=opt.option_id))

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def text(self) -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")

    def clear(self) -> None:
        self.updates.clear()
        self.first_text = asyncio.Event()


def agent_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "GATEWRIGHT_"))}
    # No config file: an empty config dir (a GATEWRIGHT_CONFIG that does not exist is an error).
    env.update(PYTHONPATH=str(ROOT), XDG_CONFIG_HOME=str(tmp_path / "no-config-dir"))
    env.update(extra)
    return env


async def start(conn: Any, cwd: Path) -> tuple[Any, str]:
    init = await asyncio.wait_for(
        conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="test", version="0"),
        ),
        15,
    )
    sess = await asyncio.wait_for(conn.new_session(cwd=str(cwd), mcp_servers=[]), 15)
    return init, sess


@contextlib.asynccontextmanager
async def spawn(client: RecordingClient, env: dict[str, str], *args: str, cwd: Path) -> Any:
    """Spawn the agent recording its transcript; every frame is checked against the ACP schema afterwards."""
    record = cwd / f".transcript-{id(client)}-{len(args)}.jsonl"
    async with spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "acp_server",
        "--record",
        str(record),
        *args,
        env=env,
        cwd=str(cwd),
        transport_kwargs={"stderr": None, "limit": 50 * 2**20},
    ) as pair:
        yield pair
    check_recorded_frames(record)


@pytest.mark.anyio
async def test_openai_turn_with_a_tool_call_streams_text_runs_the_tool_and_reports_usage(tmp_path, fp):
    (tmp_path / "a.txt").write_text("hello from a\n")
    fp.openai(
        Reply(
            frames=openai_stream(
                ["Let me ", "read it."],
                tool_calls=[("call_1", "read_file", ['{"path": ', '"a.txt"}'])],
                usage=(100, 20),
            )
        ),
        Reply(frames=openai_stream("It says hello.", usage=(160, 8))),
    )
    client = RecordingClient()
    env = agent_env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY=OPENAI_KEY)
    async with spawn(client, env, "--model", "openai:test-model", cwd=tmp_path) as (conn, _proc):
        init, sess = await start(conn, tmp_path)
        assert [m.id for m in init.auth_methods] == ["env:OPENAI_API_KEY"]
        model_opt = next(o for o in sess.config_options if o.id == "model")
        assert model_opt.category == "model" and model_opt.current_value == "openai:test-model"
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("read a.txt")]), 30)
    assert resp.stop_reason == "end_turn"
    kinds = client.kinds()
    assert kinds.index("agent_message_chunk") < kinds.index("tool_call") < kinds.index("tool_call_update")
    done = [u for u in client.updates if u.session_update == "tool_call_update" and u.status == "completed"]
    assert done and done[0].tool_call_id == "call_1"
    assert client.text() == "Let me read it.It says hello."
    usage = [u for u in client.updates if u.session_update == "usage_update"]
    assert [(u.used, u.size) for u in usage] == [(120, 128_000), (168, 128_000)]
    second = fp.requests_to(OPENAI_PATH)[1].body["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "call_1"
    assert second[-1]["role"] == "tool" and "hello from a" in second[-1]["content"]


@pytest.mark.anyio
async def test_anthropic_turn_with_config_file_settings_keeps_thinking_and_reports_cost(tmp_path, fp):
    (tmp_path / "a.txt").write_text("alpha\n")
    config = tmp_path / "config.toml"
    config.write_text(
        '[models.claude]\nmodel = "anthropic:claude-test"\nthinking_budget = 1024\n'
        "context_window = 200000\nprices = { input = 3.0, output = 15.0 }\n"
    )
    fp.anthropic(
        Reply(
            frames=anthropic_stream(
                "Reading.",
                thinking=["need ", "the file"],
                signature="SIG",
                tool_uses=[("toolu_1", "read_file", ['{"path": "a.txt"}'])],
                usage=(1000, 100),
            )
        ),
        Reply(frames=anthropic_stream("It says alpha.", usage=(1200, 50))),
    )
    client = RecordingClient()
    env = agent_env(tmp_path, ANTHROPIC_BASE_URL=fp.url, ANTHROPIC_API_KEY=ANTHROPIC_KEY, GATEWRIGHT_CONFIG=str(config))
    # The flag names the spec; the config file's entry for that spec adds thinking, window and prices.
    async with spawn(client, env, "--model", "anthropic:claude-test", cwd=tmp_path) as (conn, _proc):
        init, sess = await start(conn, tmp_path)
        assert init.agent_capabilities.prompt_capabilities.image is True
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("read a.txt")]), 30)
    assert resp.stop_reason == "end_turn"
    assert "agent_thought_chunk" in client.kinds()
    second = fp.requests_to(ANTHROPIC_PATH)[1].body
    assert second["messages"][1]["content"][0] == {"type": "thinking", "thinking": "need the file", "signature": "SIG"}
    assert "alpha" in str(second["messages"][2]["content"][0]["content"])
    usage = [u for u in client.updates if u.session_update == "usage_update"]
    assert usage[-1].size == 200_000
    expected = (1000 * 3 + 100 * 15 + 1200 * 3 + 50 * 15) / 1_000_000
    assert usage[-1].cost is not None and usage[-1].cost.currency == "USD"
    assert usage[-1].cost.amount == pytest.approx(expected)


@pytest.mark.anyio
async def test_401_is_auth_required_and_failures_leave_the_session_usable(tmp_path, fp):
    fp.openai(
        Reply(401, body=error_body("openai", 401, f"Incorrect API key provided: {OPENAI_KEY}")),
        Reply(frames=(*openai_stream("half an ans")[:2], Cut())),
        Reply(frames=openai_stream("All good now.")),
    )
    client = RecordingClient()
    env = agent_env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY=OPENAI_KEY)
    async with spawn(client, env, "--model", "openai:test-model", cwd=tmp_path) as (conn, _proc):
        _, sess = await start(conn, tmp_path)
        with pytest.raises(RequestError) as info:
            await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("hi")]), 30)
        assert info.value.code == -32000
        assert OPENAI_KEY not in str(info.value) and OPENAI_KEY not in str(info.value.data)
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("again")]), 30)
        assert resp.stop_reason == "end_turn"
        assert client.text().startswith("half an ans\n\n⚠ The model call failed: the openai stream broke after")
        assert "\n" not in client.text().split("⚠", 1)[1]
        client.clear()
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("once more")]), 30)
        assert resp.stop_reason == "end_turn" and client.text() == "All good now."
    assert len(fp.requests_to(OPENAI_PATH)) == 3  # nothing was retried after output had started


@pytest.mark.anyio
async def test_cancel_mid_stream_ends_the_turn_cancelled_and_drops_the_connection(tmp_path, fp):
    fp.openai(
        Reply(frames=(*openai_stream("thinking out loud")[:2], Hang())), Reply(frames=openai_stream("next turn works"))
    )
    client = RecordingClient()
    env = agent_env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY=OPENAI_KEY)
    async with spawn(client, env, "--model", "openai:test-model", cwd=tmp_path) as (conn, _proc):
        _, sess = await start(conn, tmp_path)
        task = asyncio.create_task(conn.prompt(session_id=sess.session_id, prompt=[text_block("go")]))
        await asyncio.wait_for(client.first_text.wait(), 15)
        cancelled_at = time.monotonic()
        await conn.cancel(session_id=sess.session_id)
        resp = await asyncio.wait_for(task, 10)
        assert resp.stop_reason == "cancelled"
        assert await asyncio.to_thread(fp.disconnected.wait, 3.0)
        assert fp.disconnects[0] - cancelled_at < 1.0
        client.clear()
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("again")]), 30)
        assert resp.stop_reason == "end_turn" and client.text() == "next turn works"


@pytest.mark.anyio
async def test_without_a_key_a_prompt_is_auth_required_naming_the_variable_before_any_call(tmp_path, fp):
    """Before, a missing key was a message in the conversation (and a remote base URL was called anyway, 401); now
    the prompt is ACP `auth_required` naming the variable, and nothing reaches the provider."""
    config = tmp_path / "config.toml"
    config.write_text(f'[providers.remote]\nkind = "openai"\nbase_url = "{fp.url}/v1"\napi_key_env = "REMOTE_KEY"\n')
    env = {**agent_env(tmp_path), "GATEWRIGHT_CONFIG": str(config)}
    for spec, var in (("openai:gpt-4.1", "OPENAI_API_KEY"), ("remote:big", "REMOTE_KEY")):
        client = RecordingClient()
        async with spawn(client, env, "--model", spec, cwd=tmp_path) as (conn, _proc):
            _, sess = await start(conn, tmp_path)
            with pytest.raises(RequestError) as info:
                await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("hi")]), 30)
            assert info.value.code == -32000
            assert f"{var} is not set, and {spec}" in str(info.value) + str(info.value.data)
            with pytest.raises(RequestError) as info:
                await conn.authenticate(method_id=f"env:{var}")
            assert info.value.code == -32000
    assert fp.requests == []


@pytest.mark.anyio
async def test_switching_the_model_option_sends_the_next_call_to_the_other_provider(tmp_path, fp):
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "gpt"\n[models.gpt]\nmodel = "openai:test-model"\n'
        '[models.claude]\nmodel = "anthropic:claude-test"\n'
    )
    fp.openai(Reply(frames=openai_stream("from openai")))
    fp.anthropic(Reply(frames=anthropic_stream("from claude")))
    client = RecordingClient()
    env = agent_env(
        tmp_path,
        OPENAI_BASE_URL=fp.url + "/v1",
        OPENAI_API_KEY=OPENAI_KEY,
        ANTHROPIC_BASE_URL=fp.url,
        ANTHROPIC_API_KEY=ANTHROPIC_KEY,
        GATEWRIGHT_CONFIG=str(config),
    )
    async with spawn(client, env, cwd=tmp_path) as (conn, _proc):
        init, sess = await start(conn, tmp_path)
        assert {m.id for m in init.auth_methods} == {"env:OPENAI_API_KEY", "env:ANTHROPIC_API_KEY"}
        opt = next(o for o in sess.config_options if o.id == "model")
        assert [o.value for o in opt.options] == ["gpt", "claude"]
        await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("one")]), 30)
        changed = await conn.set_config_option(config_id="model", session_id=sess.session_id, value="claude")
        assert next(o for o in changed.config_options if o.id == "model").current_value == "claude"
        await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("two")]), 30)
        with pytest.raises(RequestError) as info:
            await conn.set_config_option(config_id="model", session_id=sess.session_id, value="nope")
        assert info.value.code == -32602
    assert client.text() == "from openaifrom claude"
    claude_saw = fp.requests_to(ANTHROPIC_PATH)[0].body["messages"]
    assert claude_saw[0]["content"][0]["text"] == "one" and claude_saw[1]["content"][0]["text"] == "from openai"
