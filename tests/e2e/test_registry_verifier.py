"""What the ACP Registry's verifier documents (its AUTHENTICATION.md and `--auth-check`): the agent started as the
manifest says (`gatewright acp`, default arguments), with an empty HOME and TERM=dumb, answers the verifier's
`initialize` (a client that signals terminal auth only through `_meta["terminal-auth"]`) with at least one auth
method of type `agent` or `terminal`, the type read as the verifier reads it: the `type` field, else a
`terminal-auth` / `agent-auth` key of `_meta`, else `agent`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.acp_schema import agent_frame_errors
from tests.support.registry import VERIFIER_INITIALIZE, method_type

pytestmark = pytest.mark.timeout(60)


def console_script() -> list[str]:
    """The `gatewright` the install put beside this interpreter (what uvx runs), else `python -m acp_server`."""
    script = Path(sys.executable).with_name("gatewright")
    return [str(script)] if script.exists() else [sys.executable, "-m", "acp_server"]


def test_the_registry_verifier_finds_a_terminal_or_agent_auth_method_with_an_empty_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWRIGHT_", "XDG_", "OPENAI_", "ANTHROPIC_"))}
    env.update(HOME=str(home), TERM="dumb")
    proc = subprocess.run(
        [*console_script(), "acp"],
        input=json.dumps(VERIFIER_INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.splitlines()[0])
    assert agent_frame_errors(answer, "initialize") == []
    methods = answer["result"]["authMethods"]
    assert any(method_type(m) in ("agent", "terminal") for m in methods), methods
    (setup,) = [m for m in methods if method_type(m) == "terminal"]
    launch = setup["_meta"]["terminal-auth"]
    # What a client would start: the same program, as setup (it must exist and run without a terminal's answers).
    ran = subprocess.run(
        [launch["command"], *launch["args"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert ran.returncode == 2 and "run it in a terminal" in ran.stderr  # here, without one: a clear line
    assert not any(home.iterdir())  # asking the agent wrote nothing into the user's home
