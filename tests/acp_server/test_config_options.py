"""The config options editors show (in process; every frame checked against the schema): the model picker whenever
a model is configured, even one; how hard a thinking model thinks (`thought_level`), applied from the next model
call and kept with the session; and the one boolean option, automatic compaction, only for a client that shows
boolean options."""

from __future__ import annotations

import json

from tests.support.fake_providers import ANTHROPIC_PATH, OPENAI_PATH, Reply, anthropic_stream, openai_stream
from tests.support.harness import write_script

BOOLEANS = {"session": {"configOptions": {"boolean": {}}}}


def options(result: dict) -> dict[str, dict]:
    return {o["id"]: o for o in result["configOptions"]}


def new(agent, ws) -> tuple[str, dict[str, dict]]:
    result = agent.result("session/new", {"cwd": str(ws), "mcpServers": []})
    return result["sessionId"], options(result)


def set_option(agent, sid: str, config_id: str, value, boolean: bool = False) -> dict:
    params = {"sessionId": sid, "configId": config_id, "value": value}
    if boolean:
        params["type"] = "boolean"
    return agent.request("session/set_config_option", params)


def test_one_configured_model_is_still_a_model_picker(inproc, workspace):
    agent = inproc("--model", "openai:gpt-4.1", env={"OPENAI_API_KEY": "sk-test"})
    agent.initialize()
    _, opts = new(agent, workspace)
    model = opts["model"]
    assert model["category"] == "model" and model["currentValue"] == "openai:gpt-4.1"
    assert [o["value"] for o in model["options"]] == ["openai:gpt-4.1"]
    assert "thought_level" not in opts  # gpt-4.1 does not reason


def test_a_thinking_model_offers_levels_and_the_next_call_thinks_at_the_chosen_one(inproc, workspace, fp, tmp_path):
    fp.anthropic(Reply(frames=anthropic_stream("one")), Reply(frames=anthropic_stream("two")))
    env = {"ANTHROPIC_BASE_URL": fp.url, "ANTHROPIC_API_KEY": "sk-ant-test"}
    agent = inproc("--model", "anthropic:claude-sonnet-4-5", env=env, state_dir=tmp_path / "state")
    agent.initialize()
    sid, opts = new(agent, workspace)
    thought = opts["thought_level"]
    assert thought["category"] == "thought_level" and thought["currentValue"] == "off"
    assert [o["value"] for o in thought["options"]] == ["off", "low", "medium", "high"]
    agent.prompt(sid, "first")
    answer = set_option(agent, sid, "thought_level", "high")
    assert options(answer["result"])["thought_level"]["currentValue"] == "high"
    agent.prompt(sid, "second")
    first, second = (r.body for r in fp.requests_to(ANTHROPIC_PATH))
    assert "thinking" not in first
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 24_576}
    assert set_option(agent, sid, "thought_level", "galaxy-brain")["error"]["code"] == -32602
    # Kept with the session: a load brings the level back.
    loaded = agent.result("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert options(loaded)["thought_level"]["currentValue"] == "high"


def test_a_reasoning_model_takes_an_effort(inproc, workspace, fp):
    fp.openai(Reply(frames=openai_stream("ok")))
    env = {"OPENAI_BASE_URL": f"{fp.url}/v1", "OPENAI_API_KEY": "sk-test"}
    agent = inproc("--model", "openai:gpt-5-mini", env=env)
    agent.initialize()
    sid, opts = new(agent, workspace)
    assert opts["thought_level"]["currentValue"] == "default"
    set_option(agent, sid, "thought_level", "low")
    agent.prompt(sid, "hi")
    (request,) = fp.requests_to(OPENAI_PATH)
    assert request.body["reasoning_effort"] == "low"


def test_automatic_compaction_is_a_boolean_only_for_clients_that_show_booleans(inproc, workspace, tmp_path):
    model = write_script(tmp_path / "m.json", [{"text": json.dumps({"goal": "g"})} for _ in range(40)])
    agent = inproc("--model", f"scripted:{model}", env={"GATEWRIGHT_CONTEXT_WINDOW": "4000"})
    agent.initialize()
    sid, opts = new(agent, workspace)
    assert "auto_compact" not in opts and all(o["type"] == "select" for o in opts.values())
    assert set_option(agent, sid, "auto_compact", False, boolean=True)["error"]["code"] == -32602
    agent.close()

    agent = inproc("--model", f"scripted:{model}", env={"GATEWRIGHT_CONTEXT_WINDOW": "4000"})
    agent.initialize(BOOLEANS)
    sid, opts = new(agent, workspace)
    assert opts["auto_compact"] == {
        **opts["auto_compact"],
        "type": "boolean",
        "currentValue": True,
    }
    assert set_option(agent, sid, "auto_compact", "false")["error"]["code"] == -32602  # a boolean is sent as one
    answer = set_option(agent, sid, "auto_compact", False, boolean=True)
    assert options(answer["result"])["auto_compact"]["currentValue"] is False
    filler = "lorem ipsum dolor sit amet " * 70
    for i in range(8):
        agent.prompt(sid, f"message {i}: {filler}")
    assert "Context compacted" not in json.dumps(agent.updates(sid))
