"""Sign-in as editors and the ACP Registry see it (in process; frames checked against the schema): the terminal
method `gatewright setup` only for a client that enables terminal auth, in the shape it reads (`auth.terminal`: ACP's
`type: "terminal"` with `args: ["setup"]`; `_meta["terminal-auth"]` only: the older shape with the launch command
under `_meta`), with no model or key configured; `authenticate` with an agent method succeeding only when its
credentials are usable; `logout` forgetting what `gatewright setup` stored."""

from __future__ import annotations

import json
import os

import pytest

from runtime import credentials
from tests.support.fake_providers import OPENAI_PATH, Reply, openai_stream

TERMINAL = {"auth": {"terminal": True}}
LEGACY = {"_meta": {"terminal-auth": True}}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty config dir, and no provider key in the environment."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("GATEWRIGHT_CONFIG", raising=False)
    return tmp_path / "config"


def test_a_client_that_enables_terminal_auth_is_offered_setup_without_any_model(inproc, home):
    agent = inproc()
    init = agent.initialize(TERMINAL)
    assert init["authMethods"] == [
        {
            "type": "terminal",
            "id": "gatewright-setup",
            "name": "Sign in",
            "description": init["authMethods"][0]["description"],
            "args": ["setup"],
        }
    ]
    assert init["agentCapabilities"]["auth"] == {"logout": {}}


def test_a_client_that_signals_terminal_auth_in_meta_gets_the_older_shape(inproc, home):
    agent = inproc()
    (method,) = agent.initialize(LEGACY)["authMethods"]
    assert "type" not in method and method["id"] == "gatewright-setup"
    launch = method["_meta"]["terminal-auth"]
    assert launch["args"][-1] == "setup" and launch["label"] == "gatewright setup"
    assert os.path.isabs(launch["command"]) and os.path.exists(launch["command"])


def test_nothing_terminal_is_offered_to_a_client_that_did_not_enable_it(inproc, home):
    agent = inproc()
    assert agent.initialize({"terminal": True})["authMethods"] == []  # ACP terminals are not terminal auth


def test_authenticate_succeeds_only_with_usable_credentials(inproc, home, tmp_path):
    agent = inproc("--model", "openai:gpt-4.1")
    methods = {m["id"] for m in agent.initialize(LEGACY)["authMethods"]}
    assert methods == {"gatewright-setup", "env:OPENAI_API_KEY"}
    for method in methods:
        error = agent.request("authenticate", {"methodId": method})["error"]
        assert error["code"] == -32000 and "gatewright setup" in error["message"]
    agent.close()
    credentials.store("OPENAI_API_KEY", "sk-stored-0123456789")
    agent = inproc("--model", "openai:gpt-4.1")
    agent.initialize(LEGACY)
    for method in methods:
        assert agent.result("authenticate", {"methodId": method}) == {}
    assert agent.request("authenticate", {"methodId": "nope"})["error"]["code"] == -32602


def test_logout_forgets_the_stored_key_and_the_sessions_stop_using_it(inproc, home, fp):
    credentials.store("OPENAI_API_KEY", "sk-stored-0123456789")
    agent = inproc("--model", "openai:gpt-4.1", env={"OPENAI_BASE_URL": f"{fp.url}/v1"})
    agent.initialize()
    sid = agent.new_session(home.parent)
    assert agent.result("logout", {}) == {}
    assert not credentials.path().exists()
    fp.openai(Reply(frames=openai_stream("ok")))
    agent.prompt(sid, "hi")
    (post,) = fp.requests_to(OPENAI_PATH)
    assert "authorization" not in post.headers  # the forgotten key is not sent any more
    assert agent.result("logout", {}) == {}  # nothing stored: still fine


def test_a_stored_key_is_in_no_childs_environment_and_no_frame(inproc, home, fp, workspace):
    key = "sk-stored-child-0123456789"
    credentials.store("OPENAI_API_KEY", key)
    show_env = json.dumps({"command": "env; cat ~/.config/gatewright/credentials.json || true"})
    fp.openai(
        Reply(frames=openai_stream(tool_calls=[("c1", "bash", [show_env])])),
        Reply(frames=openai_stream("done")),
    )
    agent = inproc("--model", "openai:gpt-4.1", "--mode", "auto", env={"OPENAI_BASE_URL": f"{fp.url}/v1"})
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "show me the environment")
    first, second = fp.requests_to(OPENAI_PATH)
    assert first.headers["authorization"] == f"Bearer {key}"
    tool_result = next(m for m in second.body["messages"] if m.get("role") == "tool")["content"]
    assert "PATH=" in tool_result and key not in tool_result  # env ran; the key was never in it, nor readable
    assert key not in json.dumps(agent.frames)
