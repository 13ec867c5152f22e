"""What schema 1.25 added, as clients see it (in process; every frame checked against the vendored schema): the new
optional fields go to every client (`name` on tool calls and permission questions, `messageId` on chunks and the same
ids on `session/load`, `cost` in `usage_update` when prices are known, `updatedAt` in `session_info_update`), while
the new update kinds (`notice`, `compaction_update`, `compaction_summary_chunk`) go only to a client that advertises
`session.notices` / `session.compaction`; the others get today's words."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.fake_providers import Reply, openai_stream
from tests.support.harness import write_script

NOTICES = {"session": {"notices": {}}}
COMPACTION = {"session": {"compaction": {}, "notices": {}}}


def kinds(updates: list[dict]) -> list[str]:
    return [u["sessionUpdate"] for u in updates]


def since(agent, sid: str, start: int) -> list[dict]:
    return [
        f["params"]["update"]
        for f in agent.frames[start:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
    ]


def load(agent, sid: str, ws: Path) -> list[dict]:
    start = len(agent.frames)
    assert "result" in agent.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
    return since(agent, sid, start)


def test_tool_calls_and_permission_questions_carry_the_tools_name(inproc, tmp_path, workspace):
    model = write_script(
        tmp_path / "m.json",
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "n"}}]}, {"text": "ok"}],
    )
    agent = inproc("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "write")["result"]["stopReason"] == "end_turn"
    (call,) = [u for u in agent.updates(sid) if u["sessionUpdate"] == "tool_call"]
    assert call["name"] == "write_file"
    (question,) = [r for r in agent.agent_requests if r["method"] == "session/request_permission"]
    assert question["params"]["toolCall"]["name"] == "write_file"


def test_chunks_of_one_message_share_an_id_and_load_replays_the_same_ids(inproc, tmp_path, workspace):
    model = write_script(
        tmp_path / "m.json",
        [
            {
                "thinking": "look first",
                "text": "Reading it now.",
                "chunks": 3,
                "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
            },
            {"text": "It says hello.", "chunks": 3},
        ],
    )
    agent = inproc("--model", f"scripted:{model}", state_dir=tmp_path / "state")
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "read the readme")
    live = [u for u in agent.updates(sid) if u["sessionUpdate"].endswith("_chunk")]
    by_message: dict[str, set[str]] = {}
    for u in live:
        by_message.setdefault(u["messageId"], set()).add(u["sessionUpdate"])
    # thought, text before the tool call, text after it: three messages, each of one kind, several chunks each
    assert len(by_message) == 3 and all(len(k) == 1 for k in by_message.values())
    texts = {mid: "".join(u["content"]["text"] for u in live if u["messageId"] == mid) for mid in by_message}
    replayed = [u for u in load(agent, sid, workspace) if u["sessionUpdate"].endswith("_chunk")]
    assert {u["messageId"]: u["content"]["text"] for u in replayed if u["sessionUpdate"] != "user_message_chunk"} == (
        texts
    )
    (user,) = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert user["messageId"] not in texts
    again = [u for u in load(agent, sid, workspace) if u["sessionUpdate"].endswith("_chunk")]
    assert [u["messageId"] for u in again] == [u["messageId"] for u in replayed]


def test_a_command_reply_is_a_message_of_its_own(inproc, workspace):
    agent = inproc()
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "/help")
    agent.prompt(sid, "/status")
    ids = [u["messageId"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
    assert len(ids) == 2 and ids[0] != ids[1]


def test_usage_carries_the_cost_when_the_model_has_prices_and_info_updates_say_when(inproc, tmp_path, workspace, fp):
    fp.openai(Reply(frames=openai_stream("hi", usage=(1000, 500))))
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "m"\n[models.m]\nmodel = "openai:gpt-test"\ncontext_window = 9000\n'
        "prices = { input = 3.0, output = 15.0 }\n"
    )
    env = {"GATEWRIGHT_CONFIG": str(config), "OPENAI_BASE_URL": f"{fp.url}/v1", "OPENAI_API_KEY": "sk-test"}
    agent = inproc(env=env)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "hello there")
    ups = agent.updates(sid)
    (usage,) = [u for u in ups if u["sessionUpdate"] == "usage_update"]
    assert usage["cost"] == {"amount": 0.0105, "currency": "USD"} and usage["size"] == 9000
    infos = [u for u in ups if u["sessionUpdate"] == "session_info_update"]
    assert infos[0]["title"] == "hello there" and all("updatedAt" in u for u in infos)
    assert kinds(ups)[-1] == "session_info_update"  # the turn's end: the session's last activity
    assert infos[-1]["updatedAt"].endswith("Z") and infos[-1]["updatedAt"] >= infos[0]["updatedAt"]


def _compacted(inproc, tmp_path: Path, workspace: Path, caps: dict) -> tuple:
    """A conversation long enough to be compacted (the checkpoint names PLUM), for a client with `caps`."""
    checkpoint = json.dumps({"goal": "keep talking", "criticalContext": ["the magic word is PLUM"]})
    model = write_script(tmp_path / "m.json", [{"text": checkpoint} for _ in range(40)])
    agent = inproc("--model", f"scripted:{model}", env={"GATEWRIGHT_CONTEXT_WINDOW": "4000"})
    agent.initialize(caps)
    sid = agent.new_session(workspace)
    filler = "lorem ipsum dolor sit amet " * 70  # ~470 tokens per prompt
    for i in range(8):
        assert agent.prompt(sid, f"message {i}: {filler}")["result"]["stopReason"] == "end_turn"
    return agent, sid, agent.updates(sid)


def test_a_compaction_is_shown_as_one_to_a_client_that_advertises_it(inproc, tmp_path, workspace):
    agent, sid, ups = _compacted(inproc, tmp_path, workspace, COMPACTION)
    compactions = [u for u in ups if u["sessionUpdate"].startswith("compaction_")]
    first = compactions[0]["compactionId"]
    one = [u for u in compactions if u["compactionId"] == first]
    assert [(u["sessionUpdate"], u.get("status")) for u in one] == [
        ("compaction_update", "in_progress"),
        ("compaction_summary_chunk", None),
        ("compaction_update", "completed"),
    ]
    assert "PLUM" in one[1]["content"]["text"]
    assert not [u for u in ups if "Context compacted" in json.dumps(u)]  # no words, and no notice of it either
    replayed = [u for u in load(agent, sid, workspace) if u["sessionUpdate"].startswith("compaction_")]
    assert replayed[0]["compactionId"] == first and replayed[0]["status"] == "completed"
    assert "PLUM" in replayed[0]["summary"][0]["text"]


def test_a_client_without_the_compaction_capability_gets_todays_words(inproc, tmp_path, workspace):
    agent, sid, ups = _compacted(inproc, tmp_path, workspace, NOTICES)
    assert not [u for u in ups if u["sessionUpdate"].startswith("compaction_")]
    assert [u["title"] for u in ups if u["sessionUpdate"] == "notice"][:1] == ["Context compacted"]
    assert not [u for u in load(agent, sid, workspace) if u["sessionUpdate"].startswith("compaction_")]


def test_compact_on_demand_is_a_compaction_too_for_a_client_that_shows_them(inproc, tmp_path, workspace):
    agent, sid, _ = _compacted(inproc, tmp_path, workspace, COMPACTION)
    start = len(agent.frames)
    agent.prompt(sid, "/compact")
    ups = since(agent, sid, start)
    statuses = [u.get("status") for u in ups if u["sessionUpdate"] == "compaction_update"]
    assert statuses[0] == "in_progress" and statuses[-1] in ("completed", "failed")
    assert any(u["sessionUpdate"] == "agent_message_chunk" for u in ups)  # the command's reply as well
