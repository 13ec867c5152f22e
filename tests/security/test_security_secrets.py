"""Security corpus, hole 7 (tests/security/test_boundary_corpus.py): a configured key variable without a marker in its
name (`CORP_LLM_KEY`, named by a provider's `api_key_env` in the config file) is a secret like `OPENAI_API_KEY`: it
reaches no child process (bash exec and start, the command of an editor terminal, MCP stdio servers), and its value is
in no frame on the wire, no line of the `--record` file, no byte of the state dir (sessions, rules, audit) and no stderr
log line. The same for an MCP server's env value, an MCP header value, a provider header value from the config file and
an `authenticate` payload. Every probe drives the real binary (`python -m acp_server --model scripted:FILE`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.security.test_security_leaks import everything_under
from tests.support.harness import AgentProcess, allow_once, write_script
from tests.support.mcp_helpers import stdio_entry

pytestmark = [pytest.mark.timeout(90)]


def corp_config(path: Path, header_value: str) -> Path:
    path.write_text(
        '[providers.corp]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "CORP_LLM_KEY"\n'
        f'headers = {{ "X-Corp-Auth" = "{header_value}" }}\n\n'
        '[models.corp]\nmodel = "corp:big-model"\n',
        encoding="utf-8",
    )
    return path


def places(agent: AgentProcess, record: Path, state: Path) -> dict[str, bytes]:
    return {
        "stdout": b"".join(agent.raw_lines),
        "stderr": b"".join(agent.stderr_chunks),
        "transcript": record.read_bytes(),
        "state dir": everything_under(state),
    }


def assert_nowhere(found: dict[str, bytes], secrets: dict[str, str]) -> None:
    for where, data in found.items():
        for name, value in secrets.items():
            assert value.encode() not in data, f"{name} leaked into {where}"


def finished(agent: AgentProcess, sid: str) -> dict[str, dict[str, Any]]:
    """The final tool_call_update of every call, by call id."""
    out: dict[str, dict[str, Any]] = {}
    for u in agent.updates(sid):
        if u.get("sessionUpdate") == "tool_call_update" and u.get("status") in ("completed", "failed"):
            out[u["toolCallId"]] = u
    return out


def text_of(update: dict[str, Any]) -> str:
    return json.dumps(update.get("content")) + json.dumps(update.get("rawOutput"))


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:12]


@pytest.mark.req("gw:secrets:configured-key-variables")
def test_a_configured_key_variable_reaches_no_child_and_no_sink(spawn, workspace, tmp_path, tag):
    """Hole 7. `CORP_LLM_KEY` is named only by `api_key_env` in the config file. `env` and `printenv` in bash exec
    and in a background process do not see the variable at all (stripped, not merely redacted); a file in the workspace
    that holds the key, the agent's own /proc environ, a tool call whose arguments carry the key and a provider error
    that quotes it all reach the model, the wire, the transcript and the store as `<redacted>`; stderr (debug logging)
    never has it."""
    secrets = {
        "configured key": f"corp-key-{tag}-{uuid.uuid4().hex}",
        "provider header": f"corp-hdr-{tag}-{uuid.uuid4().hex}",
    }
    key = secrets["configured key"]
    (workspace / "deploy.env").write_text(f"CORP_LLM_KEY={key}\n", encoding="utf-8")
    script = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {"id": "env", "name": "bash", "arguments": {"command": "env"}},
                    {"id": "printenv", "name": "bash", "arguments": {"command": "printenv CORP_LLM_KEY; echo rc=$?"}},
                    {
                        "id": "start",
                        "name": "bash",
                        "arguments": {"action": "start", "command": "printenv CORP_LLM_KEY; echo bg-rc=$?"},
                    },
                    {"id": "file", "name": "read_file", "arguments": {"path": "deploy.env"}},
                    {
                        "id": "proc",
                        "name": "bash",
                        "arguments": {"command": "tr '\\0' '\\n' < /proc/$PPID/environ | grep CORP_LLM_KEY || true"},
                    },
                    {"id": "args", "name": "bash", "arguments": {"command": f"echo {key} >/dev/null"}},
                ]
            },
            {"error": f"provider exploded: 401 for key {key}"},
        ],
    )
    record, state = tmp_path / "t.jsonl", tmp_path / "state"
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        "auto",
        "--record",
        str(record),
        "--log-level",
        "DEBUG",
        env={
            "CORP_LLM_KEY": key,
            "GATEWRIGHT_CONFIG": str(corp_config(tmp_path / "config.toml", secrets["provider header"])),
        },
        state_dir=state,
    )
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "show me the environment", timeout=60)
    done = finished(agent, sid)
    assert set(done) >= {"env", "printenv", "start", "file", "proc", "args"}, sorted(done)
    env_out = text_of(done["env"])
    assert "PATH=" in env_out, "the env command did not run, so the probe proved nothing"
    assert "CORP_LLM_KEY" not in env_out
    assert "rc=1" in text_of(done["printenv"])
    assert "<redacted>" in text_of(done["file"])
    assert agent.close() == 0
    found = places(agent, record, state)
    assert found["transcript"] and found["stderr"]
    assert_nowhere(found, secrets)


@pytest.mark.req("gw:secrets:configured-key-variables")
def test_an_editor_terminal_is_sent_no_secret_and_blanks_the_configured_key_variables(spawn, workspace, tmp_path, tag):
    """An editor terminal runs in the editor's environment, which may hold the key too (the editor started us with
    it): `terminal/create` carries no secret value, and sets every configured key variable to the empty string."""
    key = f"corp-term-{tag}-{uuid.uuid4().hex}"
    script = write_script(
        tmp_path / "m.json", [{"tool_calls": [{"name": "bash", "arguments": {"command": "env"}}]}, {"text": "done"}]
    )
    created: list[dict[str, Any]] = []

    def editor(msg: dict[str, Any]) -> Any:
        if msg["method"] == "terminal/create":
            created.append(msg["params"])
            return {"terminalId": "t1"}
        if msg["method"] == "terminal/output":
            return {"output": "", "truncated": False, "exitStatus": {"exitCode": 0}}
        if msg["method"] == "terminal/wait_for_exit":
            return {"exitCode": 0}
        if msg["method"] == "session/request_permission":
            return allow_once(msg)
        return {}

    record, state = tmp_path / "t.jsonl", tmp_path / "state"
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        "auto",
        "--record",
        str(record),
        responder=editor,
        env={"CORP_LLM_KEY": key, "GATEWRIGHT_CONFIG": str(corp_config(tmp_path / "c.toml", "h" * 12))},
        state_dir=state,
    )
    agent.initialize({"terminal": True})
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "env in a terminal")["result"]["stopReason"] == "end_turn"
    assert agent.close() == 0
    assert len(created) == 1
    env = {e["name"]: e["value"] for e in created[0]["env"]}
    assert env.get("CORP_LLM_KEY") == ""
    assert key not in json.dumps(created)
    assert_nowhere(places(agent, record, state), {"configured key": key})


@pytest.mark.req("gw:secrets:configured-key-variables")
def test_an_mcp_stdio_server_gets_only_its_own_env_and_mcp_values_are_redacted_everywhere(
    spawn, workspace, tmp_path, tag
):
    """Two stdio servers and an http one: each stdio server sees its own configured env and neither the other's nor
    the provider key; a bash child sees none of them; a value a server hands back (its own token) reaches the model
    and every sink redacted; the http header value is in no sink."""
    secrets = {
        "configured key": f"corp-mcp-{tag}-{uuid.uuid4().hex}",
        "server a env": f"a-token-{tag}-{uuid.uuid4().hex}",
        "server b env": f"b-token-{tag}-{uuid.uuid4().hex}",
        "http header": f"Bearer hdr-{tag}-{uuid.uuid4().hex}",
    }
    ask = [("mine", "A_VALUE"), ("other", "B_VALUE"), ("key", "CORP_LLM_KEY")]
    calls: list[dict[str, Any]] = [
        {"id": cid, "name": "mcp__a__getenv", "arguments": {"name": var}} for cid, var in ask
    ]
    calls.append({"id": "bash", "name": "bash", "arguments": {"command": "env"}})
    script = write_script(tmp_path / "m.json", [{"tool_calls": calls}, {"text": "done"}])
    record, state = tmp_path / "t.jsonl", tmp_path / "state"
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        "auto",
        "--record",
        str(record),
        "--log-level",
        "DEBUG",
        env={
            "CORP_LLM_KEY": secrets["configured key"],
            "GATEWRIGHT_MCP_TURN_WAIT": "60",
            "GATEWRIGHT_CONFIG": str(corp_config(tmp_path / "c.toml", "h" * 12)),
        },
        state_dir=state,
    )
    agent.initialize()
    sid = agent.result(
        "session/new",
        {
            "cwd": str(workspace),
            "mcpServers": [
                stdio_entry("a", {"A_VALUE": secrets["server a env"]}),
                stdio_entry("b", {"B_VALUE": secrets["server b env"]}),
                {
                    "type": "http",
                    "name": "h",
                    "url": "http://127.0.0.1:9/mcp",
                    "headers": [{"name": "Authorization", "value": secrets["http header"]}],
                },
            ],
        },
    )["sessionId"]
    assert agent.prompt(sid, "read the servers' environment", timeout=60)["result"]["stopReason"] == "end_turn"
    done = finished(agent, sid)
    assert set(done) >= {"mine", "other", "key", "bash"}, sorted(done)
    assert "<redacted>" in text_of(done["mine"])  # it had its own value: the model and the sinks see it redacted
    assert "<unset>" in text_of(done["other"]) and "<unset>" in text_of(done["key"])
    assert "A_VALUE" not in text_of(done["bash"]) and "PATH=" in text_of(done["bash"])
    assert agent.close() == 0
    assert_nowhere(places(agent, record, state), secrets)


@pytest.mark.req("gw:secrets:configured-key-variables")
def test_an_authenticate_payload_and_a_key_pasted_into_a_prompt_are_kept_out_of_every_file(
    spawn, workspace, tmp_path, tag
):
    """An `authenticate` payload beyond the method id is a secret: it is in no log, transcript or state file. A key
    the user pastes into a prompt, and the model's answer echoing it in pieces, are stored redacted (the session
    replayed by `session/load` shows `<redacted>`), and the transcript never has it."""
    auth = f"auth-payload-{tag}-{uuid.uuid4().hex}"
    pasted = f"corp-pasted-{tag}-{uuid.uuid4().hex}"
    script = write_script(tmp_path / "m.json", [{"text": f"You gave me {pasted} as the key.", "chunks": 1}])
    record, state = tmp_path / "t.jsonl", tmp_path / "state"
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--record",
        str(record),
        "--log-level",
        "DEBUG",
        env={"CORP_LLM_KEY": pasted, "GATEWRIGHT_CONFIG": str(corp_config(tmp_path / "c.toml", "h" * 12))},
        state_dir=state,
    )
    agent.initialize()
    agent.request("authenticate", {"methodId": "env:CORP_LLM_KEY", "_meta": {"key": auth}})
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, f"my key is {pasted}")["result"]["stopReason"] == "end_turn"
    assert agent.close() == 0
    found = places(agent, record, state)
    del found["stdout"]  # the editor's own prompt echo and the model's answer go back to the editor (see the module)
    assert_nowhere(found, {"authenticate payload": auth, "pasted key": pasted})
    again = spawn("--model", f"scripted:{script}", env={"CORP_LLM_KEY": pasted}, state_dir=state)
    again.initialize()
    again.result("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    replayed = json.dumps(again.updates(sid))
    assert pasted not in replayed and "<redacted>" in replayed
    assert again.close() == 0


@pytest.mark.req("gw:secrets:configured-key-variables")
def test_writing_back_a_redacted_file_cannot_destroy_the_key_it_holds(spawn, workspace, tmp_path, tag):
    """The model reads `.env` and sees the key as `<redacted>`; writing back what it saw (a whole-file write, or an
    edit that puts the marker in) is refused without touching the file, and an edit around the key still works."""
    key = f"corp-env-{tag}-{uuid.uuid4().hex}"
    env_file = workspace / ".env"
    env_file.write_text(f"CORP_LLM_KEY={key}\nDEBUG=0\n", encoding="utf-8")
    script = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"id": "read", "name": "read_file", "arguments": {"path": ".env"}}]},
            {
                "tool_calls": [
                    {
                        "id": "write",
                        "name": "write_file",
                        "arguments": {"path": ".env", "content": "CORP_LLM_KEY=<redacted>\nDEBUG=1\n"},
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "id": "edit_in",
                        "name": "edit",
                        "arguments": {
                            "path": ".env",
                            "old_string": "DEBUG=0",
                            "new_string": "KEY_COPY=<redacted>\nDEBUG=0",
                        },
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "id": "edit_around",
                        "name": "edit",
                        "arguments": {"path": ".env", "old_string": "DEBUG=0", "new_string": "DEBUG=1"},
                    }
                ]
            },
            {"text": "done"},
        ],
    )
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        "auto",
        env={"CORP_LLM_KEY": key, "GATEWRIGHT_CONFIG": str(corp_config(tmp_path / "c.toml", "h" * 12))},
    )
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "turn debugging on", timeout=60)["result"]["stopReason"] == "end_turn"
    done = finished(agent, sid)
    assert "<redacted>" in text_of(done["read"]) and key not in text_of(done["read"])
    assert done["write"]["status"] == "failed" and done["edit_in"]["status"] == "failed"
    assert done["edit_around"]["status"] == "completed"
    assert env_file.read_text(encoding="utf-8") == f"CORP_LLM_KEY={key}\nDEBUG=1\n"
    assert agent.close() == 0


@pytest.mark.req("gw:secrets:configured-key-variables")
def test_a_file_the_editor_saves_for_us_keeps_its_key_exactly_while_the_transcript_does_not_have_it(
    spawn, workspace, tmp_path, tag
):
    """With the editor's file system, an edit of `.env` around the key is read and saved through the editor: the
    `fs/write_text_file` content must carry the key unchanged (the wire's redaction would otherwise save the marker
    into the user's file), and the transcript still never has it."""
    key = f"corp-fs-{tag}-{uuid.uuid4().hex}"
    env_file = workspace / ".env"
    env_file.write_text(f"CORP_LLM_KEY={key}\nDEBUG=0\n", encoding="utf-8")
    script = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {"name": "edit", "arguments": {"path": ".env", "old_string": "DEBUG=0", "new_string": "DEBUG=1"}}
                ]
            },
            {"text": "done"},
        ],
    )

    def editor(msg: dict[str, Any]) -> Any:
        if msg["method"] == "fs/read_text_file":
            return {"content": Path(msg["params"]["path"]).read_text(encoding="utf-8")}
        if msg["method"] == "fs/write_text_file":
            Path(msg["params"]["path"]).write_text(msg["params"]["content"], encoding="utf-8")
            return {}
        return allow_once(msg)

    record = tmp_path / "t.jsonl"
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        "auto",
        "--record",
        str(record),
        responder=editor,
        env={"CORP_LLM_KEY": key, "GATEWRIGHT_CONFIG": str(corp_config(tmp_path / "c.toml", "h" * 12))},
    )
    agent.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "turn debugging on")["result"]["stopReason"] == "end_turn"
    assert agent.close() == 0
    assert [r["method"] for r in agent.agent_requests if r["method"].startswith("fs/")][-1] == "fs/write_text_file"
    assert env_file.read_text(encoding="utf-8") == f"CORP_LLM_KEY={key}\nDEBUG=1\n"
    assert key.encode() not in record.read_bytes()
