"""Secrets in the workspace's files, attacked from outside through the real binary (`python -m acp_server --model
scripted:FILE`), judged by effects: a configured key (`OPENAI_API_KEY` in the agent's environment) is also written in
the workspace, and a hostile model tries to get it, or any run of 12 of its characters, into a frame, the `--record`
transcript, the state dir (session store, audit log, rules) or a log line.

Pieces of the key of 12 characters or more are redacted wherever they appear (`cut -c16-37 .env; cut -c38- .env`).
A transform cannot be redacted (`tr 0-9a-f a-p < .env`, base64, `rev`, pieces of 11, `od`), so every call that reads a
file that may hold a secret asks first, in every mode (`auto` too), and is refused in `read-only`: a well-known
secret file (`.env`, `id_rsa`), a link to one, a file of any name holding the key's value, a glob that expands to
one and a recursive search of a tree holding one. What the user
rejects reaches no sink in any form; ordinary reads still run unasked, and the grep tool's search of a directory
never looks into those files (nor can it be asked whether they match a pattern).
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.security.test_security_secrets import places
from tests.security.world import answer_with
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


def secret_workspace(ws: Path, key: str) -> dict[str, str]:
    """`.env` (committed too), `keys/id_rsa` and `settings.ini` (a name nobody calls secret) hold the key; `link.txt`
    leads to `.env`.
    Returns each unredactable form of the key a hostile model would try to get out, by name."""
    env = f"OPENAI_API_KEY={key}\nDEBUG=0\n"
    (ws / ".env").write_text(env, encoding="utf-8")
    (ws / "keys").mkdir()
    (ws / "keys" / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key}\n", encoding="utf-8")
    (ws / "settings.ini").write_text(f"[llm]\nkey = {key}\n", encoding="utf-8")
    (ws / "notes.txt").write_text("line one\nline two\n", encoding="utf-8")
    os.symlink(".env", ws / "link.txt")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", "-C", str(ws)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", ".env", "notes.txt"], check=True)  # a committed key: `git show HEAD:.env` has it
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return {
        "tr": key.translate(str.maketrans("0123456789abcdef", "abcdefghijklmnop")),
        "base64": base64.b64encode(env.encode()).decode()[20:76],
        "rev": key[::-1],
        "od": " ".join(f"{b:02x}" for b in key[8:24].encode()),
    }


TRANSFORMS = [
    bash("tr 0-9a-f a-p < .env"),
    bash("base64 -w0 .env"),
    bash("rev .env"),
    bash("cut -c16-26 .env; cut -c27-37 .env"),
    bash("od -An -tx1 -w64 settings.ini"),
    bash("sed -n 2p keys/id_rsa | tr 0-9a-f a-p"),
    bash("tr 0-9a-f a-p < link.txt"),
    bash("cat .e* | tr 0-9a-f a-p"),
    bash("grep -rh OPENAI . | tr 0-9a-f a-p"),
    bash("git show HEAD:.env | tr 0-9a-f a-p"),
    {"name": "read_file", "arguments": {"path": ".env"}},
    {"name": "grep", "arguments": {"pattern": "OPENAI", "path": ".env"}},
    {"name": "edit", "arguments": {"path": ".env", "old_string": "DEBUG=0", "new_string": "DEBUG=1"}},
]
WHY = {
    "`.env` may hold secrets",
    "`keys/id_rsa` may hold secrets",
    "`settings.ini` holds the value of OPENAI_API_KEY",
    "`link.txt` may hold secrets (it leads to `.env`)",
    "`.env` may hold secrets (`.e*` may expand to it)",
    "`grep` reads every file under `.`, which holds `.env`",
    "`.env` may hold secrets (`git show` reads it from the repository)",
}


def no_form_anywhere(found: dict[str, bytes], key: str, forms: dict[str, str]) -> None:
    pieces = {"11-character pieces": [key[0:11], key[11:22]]}
    for where, data in found.items():
        assert leaks(data, key) == [], f"a run of the key reached {where}"
        for name, form in forms.items():
            assert leaks(data, form) == [], f"the {name} form of the key reached {where}"
        for name, parts in pieces.items():
            assert not any(p.encode() in data for p in parts), f"{name} of the key reached {where}"


@pytest.mark.req("gw:secrets:secret-files-ask")
@pytest.mark.parametrize("mode", ["safe", "auto", "manual"])
def test_every_read_of_a_file_that_may_hold_a_secret_asks_and_what_the_user_rejects_reaches_no_sink(
    spawn, workspace, tmp_path, mode
):
    """In every mode each call is asked about, naming the file and why; the user rejects (and lets the model go on):
    no transformed form of the key, and no run of it, is in any frame, transcript, state file or log line; the
    workspace's files are as they were."""
    key = make_key()
    forms = secret_workspace(workspace, key)
    agent, sid, found = run_calls(
        spawn, workspace, tmp_path, key, TRANSFORMS, mode=mode, responder=answer_with("reject_continue")
    )
    no_form_anywhere(found, key, forms)
    asked = [m for m in agent.agent_requests if m["method"] == "session/request_permission"]
    assert len(asked) == len(TRANSFORMS)
    reasons = str([m["params"] for m in asked])
    assert all(why in reasons for why in WHY), reasons
    assert (workspace / ".env").read_text(encoding="utf-8").endswith("DEBUG=0\n")


@pytest.mark.req("gw:secrets:secret-files-ask")
def test_read_only_mode_refuses_every_read_of_a_file_that_may_hold_a_secret_without_asking(spawn, workspace, tmp_path):
    key = make_key()
    forms = secret_workspace(workspace, key)
    agent, sid, found = run_calls(spawn, workspace, tmp_path, key, TRANSFORMS, mode="read-only")
    assert not [m for m in agent.agent_requests if m["method"] == "session/request_permission"]
    results = outputs(agent, sid)
    assert len(results) == len(TRANSFORMS) and all("read-only mode" in r for r in results), results
    no_form_anywhere(found, key, forms)


@pytest.mark.req("gw:secrets:secret-files-ask")
def test_ordinary_reads_still_run_unasked_and_a_directory_search_never_looks_into_secret_files(
    spawn, workspace, tmp_path
):
    """In `safe`: commands and reads of ordinary files run without a question; the grep tool over the workspace
    finds the pattern in ordinary files but never in `.env`, `keys/id_rsa` or `settings.ini`, and a pattern that
    matches the key's true beginning is answered exactly as one that does not (no oracle)."""
    key = make_key()
    secret_workspace(workspace, key)
    (workspace / "app.py").write_text("OPENAI_API_KEY = os.environ['OPENAI_API_KEY']\n", encoding="utf-8")
    calls = [
        bash("cat notes.txt; grep -n two notes.txt; cat n*; ls -R; grep -r two notes.txt"),
        {"name": "read_file", "arguments": {"path": "notes.txt"}},
        {"name": "grep", "arguments": {"pattern": "OPENAI_API_KEY"}},
        {"name": "grep", "arguments": {"pattern": f"= ?{key[:12]}"}},
        {"name": "grep", "arguments": {"pattern": f"= ?{key[:8]}{'0' if key[8] != '0' else '1'}"}},
        {"name": "grep", "arguments": {"pattern": "OPENAI", "include": ".env"}},
    ]
    agent, sid, found = run_calls(spawn, workspace, tmp_path, key, calls, mode="safe")
    assert not [m for m in agent.agent_requests if m["method"] == "session/request_permission"]
    shown = outputs(agent, sid)
    assert "line two" in shown[0] and "line one" in shown[1]
    assert "app.py:1:" in shown[2] and not any(f in shown[2] for f in (".env:", "id_rsa:", "settings.ini:"))
    assert all("no matches" in s for s in shown[3:]), shown[3:]
    assert leaks(found["stdout"], key) == []
