"""Secrets in the workspace's files, attacked from outside through the real binary (`python -m acp_server --model
scripted:FILE`), judged by effects: a configured key (`OPENAI_API_KEY` in the agent's environment) is also written in
the workspace, and a hostile model tries to get it, or any run of 12 of its characters, into a frame, the `--record`
transcript, the state dir (session store, audit log, rules) or a log line.

Pieces of the key of 12 characters or more are redacted wherever they appear (`cut -c16-37 .env; cut -c38- .env`).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.security.test_security_secrets import places
from tests.support.harness import AgentProcess, write_script

pytestmark = [pytest.mark.timeout(120)]
RUN = 12


def make_key() -> str:
    return f"sk-proj-{uuid.uuid4().hex}{uuid.uuid4().hex[:14]}"


def leaks(data: bytes, key: str) -> list[str]:
    """Every run of RUN characters of `key` found in `data`."""
    return [key[i : i + RUN] for i in range(len(key) - RUN + 1) if key[i : i + RUN].encode() in data]


def run_calls(
    spawn: Any,
    ws: Path,
    tmp: Path,
    key: str,
    calls: list[dict[str, Any]],
    *,
    mode: str,
    responder: Any = None,
) -> tuple[AgentProcess, str, dict[str, bytes]]:
    """One agent with `key` configured as OPENAI_API_KEY, one prompt whose model makes `calls` one per step."""
    steps = [{"tool_calls": [c]} for c in calls] + [{"text": "ok"}]
    script = write_script(tmp / f"m-{uuid.uuid4().hex[:6]}.json", steps)
    record, state = tmp / "t.jsonl", tmp / "state"
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        mode,
        "--record",
        str(record),
        "--log-level",
        "DEBUG",
        env={"OPENAI_API_KEY": key},
        state_dir=state,
        **({"responder": responder} if responder else {}),
    )
    agent.initialize()
    sid = agent.new_session(ws)
    agent.prompt(sid, "go", timeout=90)
    assert agent.close() == 0
    return agent, sid, places(agent, record, state)


def outputs(agent: AgentProcess, sid: str) -> list[str]:
    final: dict[str, dict[str, Any]] = {}
    for u in agent.updates(sid):
        if u.get("sessionUpdate") == "tool_call_update" and u.get("status") in ("completed", "failed"):
            final[u["toolCallId"]] = u
    return [str(u.get("rawOutput")) + str(u.get("content")) for u in final.values()]


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


@pytest.mark.req("gw:secrets:runs-redacted")
def test_pieces_of_a_key_of_twelve_characters_or_more_reach_no_sink(spawn, workspace, tmp_path):
    """The user allows everything: the model cuts the key out of `.env` in pieces of 22 and 35 characters, greps it
    out of a file of another name, takes its middle with `head | tail`, and passes a piece as a tool argument. Every
    piece is redacted in every sink; the commands ran (their outputs carry the redaction marker)."""
    key = make_key()
    (workspace / ".env").write_text(f"OPENAI_API_KEY={key}\nDEBUG=0\n", encoding="utf-8")
    (workspace / "settings.ini").write_text(f"[llm]\nkey = {key}\n", encoding="utf-8")
    calls = [
        bash("cut -c16-37 .env; cut -c38- .env"),
        bash("grep -o 'sk-proj-[0-9a-f]*' settings.ini | cut -c5-30"),
        bash("head -c 50 .env | tail -c 30"),
        bash(f"echo {key[8:30]} > /dev/null"),
        {"name": "read_file", "arguments": {"path": "settings.ini"}},
    ]
    agent, sid, found = run_calls(spawn, workspace, tmp_path, key, calls, mode="auto")
    shown = outputs(agent, sid)
    assert len(shown) == len(calls) and all("<redacted>" in s for s in shown[:3]), shown
    assert all(found.values()), [k for k, v in found.items() if not v]
    assert {where: leaks(data, key) for where, data in found.items()} == dict.fromkeys(found, [])
