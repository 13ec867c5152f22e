"""What the model gets when the agent asks: the real `gatewright acp`, driven by the official ACP SDK client (its
`create_elicitation` handler), talking to the local fake OpenAI-compatible provider, whose recorded requests show
which tools the model was offered and what each tool result said.

Provenance: ACP elicitation (form mode, `clientCapabilities.elicitation.form`); the reject-and-continue option ("offer
the model a way to ask the user", "reject, and let the agent try another way asks for an optional reason that reaches
the model").
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    Implementation,
    RequestPermissionResponse,
)

from tests.e2e.test_models_acp import agent_env
from tests.support.fake_providers import OPENAI_PATH, FakeProviders, Reply, openai_stream
from tests.support.sdk_client import check_recorded_frames

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

KEY = "sk-test-elicit-0123456789"


class AskingEditor:
    """An SDK client that answers permission questions with `option` and every form with `content`."""

    def __init__(self, option: str = "allow_once", content: dict[str, Any] | None = None) -> None:
        self.option = option
        self.content = content or {}
        self.forms: list[tuple[str, Any]] = []
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kw: Any) -> Any:
        opt = next(o for o in options if o.option_id == self.option or o.kind == self.option)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=opt.option_id))

    async def create_elicitation(self, message: str, mode: Any, **kw: Any) -> Any:
        self.forms.append((message, mode))
        return AcceptElicitationResponse(action="accept", content=self.content)


async def run_turn(tmp_path: Path, fp: FakeProviders, editor: AskingEditor, caps: ClientCapabilities) -> None:
    env = agent_env(
        tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY=KEY, GATEWRIGHT_STATE_DIR=str(tmp_path / "state")
    )
    record = tmp_path / "transcript.jsonl"
    # SDK 0.12.1 still routes `elicitation/create` only on its unstable router (the vendored schema has it stable).
    async with spawn_agent_process(
        editor,
        sys.executable,
        "-m",
        "acp_server",
        "--record",
        str(record),
        "--model",  # type: ignore[arg-type]
        "openai:test-model",
        env=env,
        cwd=str(tmp_path),
        use_unstable_protocol=True,
        transport_kwargs={"stderr": None, "limit": 50 * 2**20},
    ) as (conn, _proc):
        await asyncio.wait_for(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=caps,
                client_info=Implementation(name="test", version="0"),
            ),
            15,
        )
        sess = await asyncio.wait_for(conn.new_session(cwd=str(tmp_path), mcp_servers=[]), 15)
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("go")]), 60)
    assert resp.stop_reason == "end_turn"
    check_recorded_frames(record)  # every frame, both ways, against the vendored schema


def offered(fp: FakeProviders) -> list[str]:
    return [t["function"]["name"] for t in fp.requests_to(OPENAI_PATH)[0].body.get("tools", [])]


def tool_result(fp: FakeProviders) -> str:
    message = fp.requests_to(OPENAI_PATH)[1].body["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


FORMS = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))


@pytest.mark.req("acp:elicitation:form-and-url")
async def test_the_model_is_offered_ask_user_and_gets_the_users_answer_as_its_result(tmp_path, fp):
    fp.openai(
        Reply(frames=openai_stream("", tool_calls=[("call_q", "ask_user", ['{"question": "Which database?"}'])])),
        Reply(frames=openai_stream("Postgres it is.")),
    )
    editor = AskingEditor(content={"answer": "Postgres, please"})
    await run_turn(tmp_path, fp, editor, FORMS)
    assert "ask_user" in offered(fp)
    [(message, mode)] = editor.forms
    assert message == "Which database?" and mode.tool_call_id == "call_q"
    assert tool_result(fp) == "The user answered: Postgres, please"


@pytest.mark.req("acp:elicitation:only-if-advertised")
async def test_a_model_behind_an_editor_without_forms_is_not_offered_ask_user(tmp_path, fp):
    fp.openai(Reply(frames=openai_stream("Nothing to ask.")))
    await run_turn(tmp_path, fp, AskingEditor(), ClientCapabilities())
    assert "ask_user" not in offered(fp) and "read_file" in offered(fp)


@pytest.mark.req("gw:approval:reject-continue-reason")
async def test_the_reason_given_after_reject_and_continue_reaches_the_model_in_the_tool_error(tmp_path, fp):
    fp.openai(
        Reply(frames=openai_stream("", tool_calls=[("call_w", "write_file", ['{"path": "a.txt", "content": "x"}'])])),
        Reply(frames=openai_stream("I will ask first.")),
    )
    editor = AskingEditor(option="reject_continue", content={"reason": "that file belongs to another team"})
    await run_turn(tmp_path, fp, editor, FORMS)
    assert not (tmp_path / "a.txt").exists()
    [(message, mode)] = editor.forms
    assert message == "Tell the agent why (optional)" and mode.tool_call_id == "call_w"
    result = tool_result(fp)
    assert result.startswith("TOOL_ERROR: ") and '"errorType":"UserDeclined"' in result
    assert "saying: “that file belongs to another team”" in result
