"""End to end: `gatewright acp` as a subprocess, driven by the official ACP SDK, with real MCP servers.

The scripted model calls `mcp__<server>__<tool>`. MCP servers connect in the background after `session/new`; a turn
waits (bounded) for servers still starting, so the first prompt sees their tools without any delay in the script.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    EnvVariable,
    HttpMcpServer,
    Implementation,
    McpServerStdio,
    RequestPermissionResponse,
)

from tests.support.mcp_helpers import TOOLS_SERVER, http_server, marked
from tests.support.sandbox_helpers import eventually
from tests.support.sdk_client import spawn_sdk_agent

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

REPO = Path(__file__).resolve().parents[2]


class EditorClient:
    """A duck-typed acp.Client that records updates and answers permission questions with `answer`."""

    def __init__(self, answer: str = "allow_once") -> None:
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.answer = answer
        self.permission_asked = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kw: Any) -> Any:
        self.permissions.append(tool_call)
        self.permission_asked.set()
        opt = next(o for o in options if o.kind == self.answer)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=opt.option_id))

    def tool_updates(self) -> list[Any]:
        return [u for u in self.updates if u.session_update == "tool_call_update"]

    def final(self, call_id: str) -> Any:
        done = [u for u in self.tool_updates() if u.tool_call_id == call_id and u.status in ("completed", "failed")]
        assert done, f"no final update for {call_id}"
        return done[-1]

    def notices(self) -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")


def script(tmp_path: Path, responses: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": responses}))
    return str(path)


def stdio_server(name: str, env: dict[str, str] | None = None, meta: dict[str, Any] | None = None) -> McpServerStdio:
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=[TOOLS_SERVER],
        env=[EnvVariable(name=k, value=v) for k, v in (env or {}).items()],
        field_meta=meta,
    )


def broken_server(name: str) -> McpServerStdio:
    # It echoes its secret to stderr, as a careless server might: the notice must not repeat it.
    code = "import os, sys; sys.stderr.write('no config file for ' + os.environ['API_TOKEN'] + '\\n'); sys.exit(2)"
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=["-c", code],
        env=[EnvVariable(name="API_TOKEN", value="env-secret-value")],
    )


def agent_env() -> dict[str, str]:
    # This checkout's code, not whatever `gatewright` is installed from (the agent runs in a temporary directory).
    return {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "GATEWRIGHT_MCP_TURN_WAIT": "30"}


class Agent:
    """Spawn `gatewright acp` (recording its transcript, every frame schema-checked at exit), initialize, and open
    sessions with MCP servers."""

    def __init__(self, tmp_path: Path, responses: list[dict[str, Any]], client: EditorClient, mode: str = "safe"):
        self.tmp_path = tmp_path
        self.script = script(tmp_path, responses)
        self.client = client
        self.mode = mode
        self.record: Path | None = None

    async def __aenter__(self) -> Agent:
        self._cm = spawn_sdk_agent(
            self.client,
            self.tmp_path,
            "--model",
            f"scripted:{self.script}",  # type: ignore[arg-type]
            "--mode",
            self.mode,
            env=agent_env(),
        )
        self.conn, self.proc, self.record = await self._cm.__aenter__()
        self.init = await asyncio.wait_for(
            self.conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="test", version="0"),
            ),
            20,
        )
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)

    def transcript(self) -> str:
        assert self.record is not None
        return self.record.read_text()

    async def new_session(self, servers: list[Any]) -> str:
        resp = await asyncio.wait_for(self.conn.new_session(cwd=str(self.tmp_path), mcp_servers=servers), 10)
        return str(resp.session_id)

    async def prompt(self, sid: str, text: str = "go") -> str:
        resp = await asyncio.wait_for(self.conn.prompt(session_id=sid, prompt=[text_block(text)]), 60)
        return str(resp.stop_reason)


def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "arguments": args}]}


async def test_initialize_advertises_http_and_sse_mcp(tmp_path):
    async with Agent(tmp_path, [], EditorClient()) as agent:
        caps = agent.init.agent_capabilities.mcp_capabilities
        assert caps.http is True and caps.sse is True


async def test_an_mcp_tool_is_approved_in_the_editor_and_its_content_shown(tmp_path):
    client = EditorClient("allow_once")
    responses = [call("c1", "mcp__tickets__shout", {"text": "hello"}), {"text": "done"}]
    async with Agent(tmp_path, responses, client) as agent:
        sid = await agent.new_session([stdio_server("tickets")])
        assert await agent.prompt(sid) == "end_turn"
    assert len(client.permissions) == 1
    assert client.permissions[0].title == "tickets/shout"
    assert client.permissions[0].raw_input == {"text": "hello"}
    final = client.final("c1")
    assert final.status == "completed"
    assert final.content[0].content.text == "HELLO"


async def test_a_rejected_mcp_call_does_not_run_and_ends_the_turn(tmp_path):
    client = EditorClient("reject_once")
    responses = [call("c1", "mcp__tickets__shout", {"text": "hello"}), {"text": "should not be reached"}]
    async with Agent(tmp_path, responses, client) as agent:
        sid = await agent.new_session([stdio_server("tickets")])
        assert await agent.prompt(sid) == "end_turn"
    assert client.final("c1").status == "failed"
    assert "should not be reached" not in client.notices()


async def test_read_only_hint_runs_without_asking_in_safe_but_asks_in_manual_on_the_same_connection(tmp_path):
    client = EditorClient("allow_once")
    responses = [
        call("c1", "mcp__t__echo", {"text": "a"}),
        {"text": "ok"},
        call("c2", "mcp__t__echo", {"text": "b"}),
        {"text": "ok"},
    ]
    pidfile = tmp_path / "pids"
    async with Agent(tmp_path, responses, client, mode="safe") as agent:
        sid = await agent.new_session([stdio_server("t", env={"MCP_TEST_PIDFILE": str(pidfile)})])
        await agent.prompt(sid)
        assert client.permissions == []
        assert client.final("c1").status == "completed"
        server_pid = int(pidfile.read_text().split()[0])
        server = marked(pidfile)
        await agent.conn.set_session_mode(session_id=sid, mode_id="manual")
        await agent.prompt(sid)
        assert [p.tool_call_id for p in client.permissions] == ["c2"]
        assert client.final("c2").content[0].content.text == "echo: b"
        # the mode change left the connection alone: same server process, never restarted
        assert int(pidfile.read_text().split()[0]) == server_pid and marked(pidfile) == server


async def test_is_error_and_progress_show_up_as_tool_call_updates(tmp_path):
    client = EditorClient("allow_once")
    responses = [
        {
            "tool_calls": [
                {"id": "c1", "name": "mcp__t__fail", "arguments": {"reason": "bad"}},
                {"id": "c2", "name": "mcp__t__slow", "arguments": {"steps": 3}},
                {"id": "c3", "name": "mcp__t__picture", "arguments": {}},
            ]
        },
        {"text": "ok"},
    ]
    async with Agent(tmp_path, responses, client, mode="auto") as agent:
        sid = await agent.new_session([stdio_server("t")])
        await agent.prompt(sid)
    assert client.final("c1").status == "failed"
    assert client.final("c2").status == "completed"
    progress = [
        u.content[0].content.text
        for u in client.tool_updates()
        if u.tool_call_id == "c2" and u.status == "in_progress" and u.content
    ]
    assert progress and progress[0] == "step 1 (1/3)"
    # text, image and embedded resource content reach the editor (every frame was checked against the ACP schema)
    assert [c.content.type for c in client.final("c3").content] == ["text", "image", "resource"]


async def test_pinned_arguments_are_injected_and_a_model_supplied_value_is_rejected(tmp_path):
    client = EditorClient("allow_once")
    meta = {"gatewright": {"pinned": {"search": {"tenant": {"$env": "E2E_TENANT"}}}}}
    responses = [
        call("c1", "mcp__t__search", {"query": "bug"}),
        {"text": "ok"},
        call("c2", "mcp__t__search", {"query": "bug", "tenant": "evil"}),
        {"text": "ok"},
    ]
    os.environ["E2E_TENANT"] = "acme"
    try:
        async with Agent(tmp_path, responses, client) as agent:
            sid = await agent.new_session([stdio_server("t", meta=meta)])
            await agent.prompt(sid)
            await agent.prompt(sid)
    finally:
        del os.environ["E2E_TENANT"]
    assert client.final("c1").content[0].content.text == "results for 'bug' in tenant acme"
    rejected = client.final("c2")
    assert rejected.status == "failed"
    assert "bound by the session configuration" in rejected.content[0].content.text
    assert [p.tool_call_id for p in client.permissions] == ["c1"]  # the invalid call was never put to the user


async def test_a_broken_server_is_reported_to_the_user_and_the_other_works(tmp_path):
    client = EditorClient("allow_once")
    responses = [call("c1", "mcp__good__echo", {"text": "x"}), {"text": "ok"}]
    async with Agent(tmp_path, responses, client) as agent:
        ghost = McpServerStdio(name="ghost", command="/nonexistent/mcp-server", args=[], env=[])
        # A pin that cannot be resolved refuses its server at once, without starting anything (fails closed).
        pins = {"search": {"tenant": {"$env": "NO_SUCH"}}}
        unpinned = stdio_server("unpinned", meta={"gatewright": {"pinned": pins}})
        sid = await agent.new_session([ghost, unpinned, broken_server("bad"), stdio_server("good")])
        await agent.prompt(sid)
    assert "MCP server bad failed to start: exited with code 2: no config file for <redacted>" in client.notices()
    assert "MCP server ghost failed to start: command not found: /nonexistent/mcp-server" in client.notices()
    assert client.final("c1").status == "completed"
    transcript = agent.transcript()
    assert "env-secret-value" not in transcript
    assert (
        "MCP server unpinned was not started: pinned argument 'tenant' of tool 'search': environment variable "
        "'NO_SUCH' is not set"
    ) in client.notices()
    # On the wire, even the fastest failure (an entry refused without starting anything) comes after the
    # session/new answer, so the editor already knows the session it belongs to.
    frames = [json.loads(line).get("msg") or {} for line in transcript.splitlines()]
    answer = next(i for i, m in enumerate(frames) if "sessionId" in (m.get("result") or {}))
    first_notice = next(i for i, m in enumerate(frames) if "MCP server" in json.dumps(m))
    assert answer < first_notice


async def test_session_new_does_not_wait_for_a_slow_server(tmp_path):
    gate = tmp_path / "gate"
    client = EditorClient("allow_once")
    responses = [call("c1", "mcp__slow__echo", {"text": "late"}), {"text": "ok"}]
    async with Agent(tmp_path, responses, client) as agent:
        # The server cannot serve before the gate file exists, so this answer cannot have waited for it.
        sid = await agent.new_session([stdio_server("slow", env={"MCP_TEST_GATE": str(gate)})])
        gate.write_text("go")
        # The turn waits for the server still starting, then the model sees and calls its tool.
        assert await agent.prompt(sid) == "end_turn"
    assert client.final("c1").content[0].content.text == "echo: late"


async def test_cancelling_the_turn_cancels_the_mcp_request(tmp_path):
    marker = tmp_path / "cancelled"
    client = EditorClient("allow_once")
    responses = [call("c1", "mcp__t__hang", {"marker": str(marker)}), {"text": "ok"}]
    async with Agent(tmp_path, responses, client, mode="auto") as agent:
        sid = await agent.new_session([stdio_server("t")])
        task = asyncio.create_task(agent.prompt(sid))
        assert await eventually(lambda: any(u.status == "in_progress" for u in client.tool_updates()), 30)
        await agent.conn.cancel(session_id=sid)
        assert await task == "cancelled"
        assert await eventually(marker.exists)


async def test_closing_stdin_leaves_no_mcp_process_alive(tmp_path):
    pidfile = tmp_path / "pids"
    client = EditorClient("allow_once")
    responses = [call("c1", "mcp__t__echo", {"text": "x"}), {"text": "ok"}]
    async with Agent(tmp_path, responses, client) as agent:
        sid = await agent.new_session([stdio_server("t", env={"MCP_TEST_PIDFILE": str(pidfile)})])
        await agent.prompt(sid)
        assert len(marked(pidfile)) == 2  # the server and its grandchild
    # spawn_agent_process closed the agent's stdin and waited for it to exit
    assert await eventually(lambda: not marked(pidfile), 5)


async def test_a_streamable_http_server_works_end_to_end_with_its_headers(tmp_path):
    client = EditorClient("allow_once")
    responses = [call("c1", "mcp__web__whoami", {}), {"text": "ok"}]
    with http_server("http") as url:
        async with Agent(tmp_path, responses, client) as agent:
            sid = await agent.new_session(
                [
                    HttpMcpServer(
                        type="http",
                        name="web",
                        url=url,
                        headers=[{"name": "Authorization", "value": "Bearer e2e-secret"}],
                    )
                ]
            )
            await agent.prompt(sid)
        transcript = agent.transcript()
    assert client.permissions == []  # whoami is marked read-only
    # The server received the header and echoed it back: its value is a registered secret, so the model and the
    # editor see it redacted (runtime.secrets), and the recorded session/new never has it.
    assert client.final("c1").content[0].content.text == "authorization: <redacted>"
    new_session = next(line for line in transcript.splitlines() if '"session/new"' in line)
    assert "e2e-secret" not in new_session


async def test_the_agent_start_up_path_never_imports_the_mcp_sdk():
    import subprocess

    code = (
        "import sys\n"
        "from acp_server.agent import AgentConfig, GatewrightAgent\n"
        "agent = GatewrightAgent(AgentConfig())\n"
        "agent.answer_initialize({'protocolVersion': 1})\n"
        "import acp_server.server, acp_server.dispatch, acp_server.session, runtime.mcp\n"
        "assert not [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')], 'mcp imported'\n"
    )
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        check=True,
        cwd=REPO,
        env=dict(os.environ, **agent_env()),
        timeout=30,
    )
