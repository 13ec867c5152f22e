"""Signing in as a person does it: `gatewright setup` in a pseudo-terminal against a local provider stub, then
`gatewright acp` with no flags answering with the chosen model and the stored key, then `gatewright logout`. Checked
by effects: the credentials file and its mode, the config file (the user's comments kept), what the provider
received, and that the key is in no frame, record or log."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.e2e.test_chat_terminal import REPO, Term
from tests.support.fake_providers import OPENAI_PATH, Reply, openai_stream
from tests.support.harness import AgentProcess

pytestmark = pytest.mark.timeout(90)

KEY = "sk-setup-test-0123456789abcdef"
USER_CONFIG = """# my gatewright settings: keep this comment
[permissions]
mode = "safe"   # and this one
"""


def home_env(tmp: Path, **extra: str) -> dict[str, str]:
    """An empty home: the config dir and the credentials under tmp, no provider key in the environment."""
    home = tmp / "home"
    (home / ".config").mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "GATEWRIGHT_CONFIG": ""}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        env[name] = ""
    return {**env, **extra}


def clean(env: dict[str, str]) -> dict[str, str]:
    """The environment a process gets: the empty values above mean "not set"."""
    full = {k: v for k, v in {**os.environ, **env}.items() if v != ""}
    full["PYTHONPATH"] = REPO
    return full


def setup_term(tmp: Path, env: dict[str, str], *command: str) -> Term:
    term = Term.__new__(Term)  # Term's screen reading, in the empty home (Term's own environment is the test's)
    term.timeout, term.raw, term.text, term.pos = 30, "", "", 0
    term.child = pexpect.spawn(
        sys.executable,
        ["-c", "from acp_server.cli import main; raise SystemExit(main())", *(command or ("setup",))],
        cwd=str(tmp),
        env={**clean(env), "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"},
        dimensions=(50, 150),
        encoding="utf-8",
        codec_errors="replace",
        timeout=30,
    )
    return term


def config_dir(tmp: Path) -> Path:
    return tmp / "home" / ".config" / "gatewright"


@pytest.mark.parametrize("command", [("setup",), ("acp", "setup")])
def test_setup_signs_in_and_then_acp_with_no_flags_answers_with_the_stored_key(tmp_path, fp, command):
    fp.serve_models(["gpt-4.1", "gpt-4o-mini", "text-embedding-3-small"], keys={KEY})
    fp.openai(Reply(frames=openai_stream("hello from the chosen model")))
    env = home_env(tmp_path, OPENAI_BASE_URL=f"{fp.url}/v1")
    config_dir(tmp_path).mkdir(parents=True)
    (config_dir(tmp_path) / "config.toml").write_text(USER_CONFIG)
    term = setup_term(tmp_path, env, *command)
    term.expect("Which provider")
    term.child.send("1")  # OpenAI
    term.child.send("\r")
    term.expect(r"OpenAI API key \(hidden\):")
    term.child.send("sk-wrong-key-000000000000\r")
    term.expect("refused the key")
    term.expect(r"\(hidden\):")
    term.child.send(KEY + "\r")
    term.expect("The key works")
    term.expect("Default model")
    term.child.send("\x15gpt-4o-mini\r")  # Ctrl-U clears the suggested model
    term.expect("Signed in")
    assert term.wait_exit() == 0
    assert KEY not in term.raw and "sk-wrong-key" not in term.raw  # typed hidden
    stored = config_dir(tmp_path) / "credentials.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text()) == {"keys": {"OPENAI_API_KEY": KEY}}
    text = (config_dir(tmp_path) / "config.toml").read_text()
    assert text.startswith("# my gatewright settings: keep this comment\n")
    assert 'mode = "safe"   # and this one' in text and 'default_model = "openai:gpt-4o-mini"' in text
    assert [r.headers.get("authorization") for r in fp.requests_to("/v1/models")] == [
        "Bearer sk-wrong-key-000000000000",
        f"Bearer {KEY}",
    ]

    # `gatewright acp` with no flags: the chosen model, the stored key; the key is nowhere in what it wrote.
    record = tmp_path / "rec.jsonl"
    agent = AgentProcess("--record", str(record), cwd=tmp_path, env=clean(env), state_dir=tmp_path / "state")
    try:
        init = agent.initialize()
        assert [m["id"] for m in init["authMethods"]] == ["env:OPENAI_API_KEY"]
        sid = agent.new_session(tmp_path)
        assert agent.prompt(sid, "hi")["result"]["stopReason"] == "end_turn"
        assert agent.result("authenticate", {"methodId": "env:OPENAI_API_KEY"}) == {}
    finally:
        agent.close()
    (post,) = fp.requests_to(OPENAI_PATH)
    assert post.headers["authorization"] == f"Bearer {KEY}" and post.body["model"] == "gpt-4o-mini"
    assert KEY not in record.read_text() and KEY not in agent.stderr
    assert KEY not in json.dumps(agent.frames)

    logout = "from acp_server.cli import main; raise SystemExit(main(['logout']))"
    out = subprocess.run([sys.executable, "-c", logout], env=clean(env), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "Signed out" in out.stdout and KEY not in out.stdout
    assert not stored.exists()
    assert 'default_model = "openai:gpt-4o-mini"' in (config_dir(tmp_path) / "config.toml").read_text()


def test_a_keyless_local_server_is_not_asked_for_a_key(tmp_path, fp):
    fp.serve_models(["qwen3:8b", "llama3.2:3b"])
    env = home_env(tmp_path)
    term = setup_term(tmp_path, env)
    term.expect("Which provider")
    term.child.send("3\r")
    term.expect("Server URL")
    term.child.send("\x15" + f"{fp.url}/v1\r")
    term.expect("answers without a key")
    term.expect("Default model")
    term.child.send("\x15qwen3:8b\r")
    term.expect("Signed in")
    assert term.wait_exit() == 0
    assert not (config_dir(tmp_path) / "credentials.json").exists()
    text = (config_dir(tmp_path) / "config.toml").read_text()
    assert 'default_model = "local:qwen3:8b"' in text
    assert "[providers.local]" in text and f'base_url = "{fp.url}/v1"' in text and "api_key_env" not in text


def test_ctrl_c_in_setup_changes_nothing(tmp_path, fp):
    env = home_env(tmp_path)
    term = setup_term(tmp_path, env)
    term.expect("Which provider")
    term.child.send("\r")
    term.expect(r"\(hidden\):")
    term.child.sendintr()
    term.expect("nothing was changed")
    assert term.wait_exit() == 1
    assert not config_dir(tmp_path).exists() or not any(config_dir(tmp_path).iterdir())


def test_setup_with_anthropic_verifies_the_key_its_way_and_picks_from_its_models(tmp_path, fp):
    fp.serve_models(["claude-haiku-4-5", "claude-sonnet-4-5"], keys={KEY})
    env = home_env(tmp_path, ANTHROPIC_BASE_URL=fp.url)
    term = setup_term(tmp_path, env)
    term.expect("Which provider")
    term.child.send("2\r")
    term.expect(r"Anthropic API key \(hidden\):")
    term.child.send(KEY + "\r")
    term.expect("The key works")
    term.expect("Default model")
    term.child.send("\r")  # the suggestion: the preferred model the provider lists
    term.expect("Signed in")
    assert term.wait_exit() == 0
    (listed,) = fp.requests_to("/v1/models")
    assert listed.headers["x-api-key"] == KEY and listed.headers["anthropic-version"]
    assert 'default_model = "anthropic:claude-sonnet-4-5"' in (config_dir(tmp_path) / "config.toml").read_text()
    stored = json.loads((config_dir(tmp_path) / "credentials.json").read_text())
    assert stored == {"keys": {"ANTHROPIC_API_KEY": KEY}}
