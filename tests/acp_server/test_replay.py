"""Recorded transcripts as a user feature: `gatewright replay FILE` shows a `--record` transcript
readably, `gatewright replay --check FILE` re-drives it against the current agent and names the first divergence
(exit 0 none, 1 diverged, 2 not a transcript or not checkable), `--record` writes the meta line a replay needs, and
a transcript from someone else never acts outside its temporary workspace unless `--trust` says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.replay import CheckError, check, untrusted_actions
from acp_server.transcript import load, parse
from acp_server.transcript_view import render_text
from tests.support.harness import REPO, AgentProcess, allow_once

pytestmark = pytest.mark.timeout(90)

TRANSCRIPTS = Path(__file__).parents[1] / "transcripts"
CLI = "from acp_server.cli import main; raise SystemExit(main())"
CLEARED = ("GATEWRIGHT_MODEL", "GATEWRIGHT_MODE", "GATEWRIGHT_RECORD", "GATEWRIGHT_CONFIG", "NO_COLOR")


def gw(tmp: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(PYTHONPATH=REPO, GATEWRIGHT_STATE_DIR=str(tmp / "gw-state"), XDG_CONFIG_HOME=str(tmp / "xdg"))
    return subprocess.run(
        [sys.executable, "-c", CLI, "replay", *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def edited_copy(tmp: Path, name: str, edit) -> Path:
    lines = (TRANSCRIPTS / name).read_text(encoding="utf-8").splitlines()
    out = tmp / f"edited-{name}"
    out.write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")
    return out


# ---- rendering ----------------------------------------------------------------------------------------------------
def test_replay_shows_a_transcript_as_a_conversation_in_plain_text_when_not_on_a_terminal(tmp_path):
    proc = gw(tmp_path, str(TRANSCRIPTS / "02_approve_and_write.jsonl"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out  # a pipe gets plain text
    expected_in_order = [
        "gatewright 0.1.0",
        "mode safe",
        "client tests 0",
        "→ initialize (protocol 1, client tests 0)",
        "→ session/new in <WORKSPACE>",
        '→ prompt: "Add a greeting module."',
        "💭 Read first.",
        "🔧 Read README.md (read) pending",
        "✓ Read README.md: completed",
        "│      3\tA sample project.",
        "🤖 Adding it now.",  # the streamed chunks, joined
        "┌ permission asked: Write src/greet.py (edit)",
        "new file <WORKSPACE>/src/greet.py",
        "│ +def greet():",
        "│ options:",
        "│   [Allow once]",
        "│   [Reject, and let the agent try another way]",
        "└ answer: Allow once  (allow_once)",
        "✓ Write src/greet.py: completed",
        "🤖 Created src/greet.py.",
        "← end_turn (",
    ]
    at = 0
    for piece in expected_in_order:
        found = out.find(piece, at)
        assert found >= 0, f"{piece!r} missing (or out of order) in:\n{out}"
        at = found + len(piece)
    assert '"jsonrpc"' not in out  # no raw frames
    assert out.count("🤖 Adding it now.") == 1


def test_replay_shows_rejections_cancellations_errors_and_refusals():
    reject = render_text(load(TRANSCRIPTS / "03_reject_write.jsonl"))
    assert "└ answer: Reject once and stop  (reject_once)" in reject
    assert "✗ Write README.md: failed" in reject
    cancel = render_text(load(TRANSCRIPTS / "04_cancel_pending_permission.jsonl"))
    assert "→ cancel" in cancel and "└ answer: cancelled" in cancel and "← cancelled (" in cancel
    errors = render_text(load(TRANSCRIPTS / "01_handshake_and_errors.jsonl"))
    assert "→ (not JSON) this is not json" in errors
    assert "✗ error: Parse error: the line is not valid JSON [-32700]" in errors
    assert "✗ no/such/method failed: Method not found: no/such/method [-32601]" in errors
    assert '✗ session/new failed: Invalid params: "cwd" must be an absolute path [-32602]' in errors
    modes = render_text(load(TRANSCRIPTS / "05_modes_and_remembered_rules.jsonl"))
    assert "✗ Write notes.txt: failed  (refused by mode:read-only" in modes
    assert "(allowed by rule:" in modes  # the remembered answer, said where it applied


def test_replay_colours_on_request_and_never_when_told_not_to(tmp_path):
    pytest.importorskip("rich")
    path = str(TRANSCRIPTS / "02_approve_and_write.jsonl")
    coloured = gw(tmp_path, "--color", "always", path)
    assert coloured.returncode == 0 and "\x1b[" in coloured.stdout
    assert "permission asked: Write src/greet.py" in coloured.stdout
    plain = gw(tmp_path, "--color", "never", path)
    assert plain.returncode == 0 and "\x1b[" not in plain.stdout


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("this is not a transcript\n", "line 1 is not JSON"),
        ('{"dir": "sideways", "t": 0, "msg": {}}\n', "`dir` must be"),
        ('{"meta": {"gatewright": "0.1.0"}}\n', "no recorded frames"),
        ("", "no recorded frames"),
    ],
    ids=["not-json", "bad-dir", "meta-only", "empty"],
)
def test_a_file_that_is_not_a_transcript_is_exit_2_with_one_line(tmp_path, content, why):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    for args in ([str(bad)], ["--check", str(bad)]):
        proc = gw(tmp_path, *args)
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.startswith("gatewright replay: ") and why in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    missing = gw(tmp_path, str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "cannot be read" in missing.stderr


# ---- --check ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(TRANSCRIPTS.glob("*.jsonl")), ids=lambda p: p.stem)
def test_check_passes_on_every_recorded_transcript(tmp_path, path):
    proc = gw(tmp_path, "--check", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"{path}: no divergence: ") and " frames match " in proc.stdout


def test_check_names_a_changed_tool_result_with_the_lines_that_differ(tmp_path):
    def change(lines):
        return [ln.replace("A sample project.", "A changed project.") if '"completed"' in ln else ln for ln in lines]

    edited = edited_copy(tmp_path, "02_approve_and_write.jsonl", change)
    line = next(n for n, ln in enumerate(edited.read_text().splitlines(), 1) if "A changed project." in ln)
    proc = gw(tmp_path, "--check", str(edited))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"{edited}: diverged at frame ") and f"(line {line})" in first
    assert "session/update tool_call_update (completed) differs at params.update.content[0].content.text" in first
    assert "-     3\tA changed project." in proc.stdout and "+     3\tA sample project." in proc.stdout
    assert "matched; the last: session/update tool_call_update (in_progress)" in proc.stdout


def test_check_names_a_frame_missing_from_the_recording(tmp_path):
    def drop_first_in_progress(lines):
        at = next(i for i, ln in enumerate(lines) if '"in_progress"' in ln)
        return lines[:at] + lines[at + 1 :]

    edited = edited_copy(tmp_path, "02_approve_and_write.jsonl", drop_first_in_progress)
    proc = gw(tmp_path, "--check", str(edited))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert (
        "the agent sent session/update tool_call_update (in_progress), which the recording does not have here" in first
    ), proc.stdout


def test_check_names_the_answer_the_recording_lacks_and_does_not_hang(tmp_path):
    def drop_permission_answer(lines):
        return [ln for ln in lines if not ('"dir": "in"' in ln and '"outcome"' in ln)]

    edited = edited_copy(tmp_path, "02_approve_and_write.jsonl", drop_permission_answer)
    proc = gw(tmp_path, "--check", "--timeout", "1", str(edited), timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "differs at params.update.status" in proc.stdout.splitlines()[0]
    assert '"in_progress"' in proc.stdout and '"failed"' in proc.stdout
    assert (
        "note: the agent wrote nothing for 1 s while the check waited for the rest of the recorded frames"
        in proc.stdout
    )


def test_check_answers_the_agents_requests_by_method_and_position_with_this_runs_ids(tmp_path):
    """The editor side of a recording (fs and terminal answers) is played back: the agent reads two files and runs
    a command in the editor's terminal; nothing of it happens on this machine."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("disk a\n")
    (ws / "b.txt").write_text("disk b\n")
    marker = tmp_path / "ran-here"
    record = tmp_path / "editor.jsonl"
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    # One call per step: parallel calls may reach the editor in either order
                    # (see the README's Transcripts).
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "b.txt"}}]},
                    {"tool_calls": [{"name": "bash", "arguments": {"command": f"touch {marker}"}}]},
                    {"text": "Read both and ran it."},
                ]
            }
        )
    )
    terminal = {
        "terminal/create": {"terminalId": "term-7"},
        "terminal/wait_for_exit": {"exitCode": 0},
        "terminal/output": {"output": "ok from the editor\n", "truncated": False, "exitStatus": {"exitCode": 0}},
        "terminal/release": {},
        "terminal/kill": {},
    }

    def editor(msg):
        method = msg["method"]
        if method == "fs/read_text_file":
            return {"content": "editor says " + Path(msg["params"]["path"]).name + "\n"}
        if method in terminal:
            return terminal[method]
        return allow_once(msg)

    agent = AgentProcess(
        "--record", str(record), "--model", f"scripted:{script}", cwd=ws, responder=editor, state_dir=tmp_path / "state"
    )
    try:
        agent.initialize({"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True})
        sid = agent.new_session(ws)
        assert agent.prompt(sid, "read and run")["result"]["stopReason"] == "end_turn"
        assert agent.close() == 0
    finally:
        if agent.proc.poll() is None:
            agent.kill()
    assert not marker.exists()
    shown = render_text(load(record))
    assert "⇄ the agent asks the editor to read " + str(ws / "a.txt") in shown
    assert "└ the editor gave 1 line" in shown and "│ editor says b.txt" in shown
    assert "⇄ the agent asks the editor for a terminal: $ " in shown and f" -c 'touch {marker}'" in shown
    assert "└ terminal term-7" in shown and "└ exit code 0" in shown
    assert "│ ok from the editor" in shown
    # The command runs in the editor: checking needs no --trust, and the command does not run here either.
    assert untrusted_actions(load(record), [str(ws)]) == []
    proc = gw(tmp_path, "--check", "--workspace", str(ws), str(record))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not marker.exists()


# ---- the user's flow: record with --record, check the file --------------------------------------------------------
def test_a_users_recording_replays_on_its_own(tmp_path):
    """A user runs `gatewright acp --record` from their editor; the file alone (meta: version, model, mode, client,
    the scripted model's text) is enough for `replay --check` elsewhere, in another workspace path."""
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "README.md").write_text("# project\n")
    script = tmp_path / "bug-model.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {
                        "thinking": "Look first.",
                        "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
                    },
                    {
                        "text": "Adding a file.",
                        "tool_calls": [
                            {"name": "write_file", "arguments": {"path": str(ws / "NOTES.md"), "content": "notes\n"}}
                        ],
                    },
                    {"text": "Done."},
                ]
            }
        )
    )
    record = tmp_path / "bug-report.jsonl"
    agent = AgentProcess(
        "--record",
        str(record),
        "--model",
        f"scripted:{script}",
        "--mode",
        "manual",
        cwd=ws,
        responder=allow_once,
        state_dir=tmp_path / "state",
        env={"GW_REPLAY_TEST_API_KEY": "sk-live-secret-in-the-env"},
    )
    try:
        agent.result(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "zed", "version": "0.190"}},
        )
        sid = agent.new_session(ws)
        assert (
            agent.prompt(sid, "Add notes; the key is sk-live-secret-in-the-env")["result"]["stopReason"] == "end_turn"
        )
        assert agent.close() == 0
    finally:
        if agent.proc.poll() is None:
            agent.kill()
    text = record.read_text()
    assert "sk-live-secret-in-the-env" not in text  # recorder redaction (runtime.secrets) covers the prompt too
    meta = json.loads(text.splitlines()[0])["meta"]
    assert meta["gatewright"] and meta["host"] == "acp" and meta["mode"] == "manual"
    assert meta["model"] == f"scripted:{script}" and json.loads(meta["scripted_model"])["responses"]
    assert meta["client"] == {"name": "zed", "version": "0.190"}
    assert meta["state_dir"] == str(tmp_path / "state")

    # Elsewhere: the model file and the project are gone; only the transcript and a copy of the files remain.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "README.md").write_text("# project\n")
    script.unlink()
    proc = gw(tmp_path, "--check", "--workspace", str(elsewhere), str(record))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (elsewhere / "NOTES.md").exists()  # the check works on a copy
    shown = gw(tmp_path, str(record))
    assert shown.returncode == 0 and "client zed 0.190" in shown.stdout and "mode manual" in shown.stdout


def test_a_gatewright_run_recording_is_checked_through_the_same_runtime(tmp_path):
    """`gatewright run --record` has no handshake in its transcript; the check opens the session an editor would
    have had and compares what the run host recorded (here a rejected write: no terminal to approve on)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# hi\n")
    script = tmp_path / "m.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
                    {
                        "text": "Writing.",
                        "tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}],
                    },
                    {"text": "never"},
                ]
            }
        )
    )
    record = tmp_path / "run.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(PYTHONPATH=REPO, GATEWRIGHT_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "x"))
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            CLI,
            "run",
            "--cwd",
            str(ws),
            "--model",
            f"scripted:{script}",
            "--record",
            str(record),
            "write it",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 3, run.stderr
    meta = json.loads(record.read_text().splitlines()[0])["meta"]
    assert meta["host"] == "run" and meta["cwd"] == str(ws) and "scripted_model" in meta
    shown = gw(tmp_path, str(record))
    assert "`gatewright run` in " + str(ws) in shown.stdout and "└ not asked (the editor answered" in shown.stdout
    proc = gw(tmp_path, "--check", "--workspace", str(ws), str(record))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- someone else's transcript ------------------------------------------------------------------------------------
def _transcript(responses: list, session_params: dict | None = None) -> str:
    meta = {"meta": {"gatewright": "0.1.0", "mode": "auto", "scripted_model": json.dumps({"responses": responses})}}
    frames = [
        {
            "dir": "in",
            "t": 0,
            "msg": {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}},
            },
        },
        {
            "dir": "in",
            "t": 0,
            "msg": {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/new",
                "params": {"cwd": "/home/someone/proj", "mcpServers": [], **(session_params or {})},
            },
        },
    ]
    return "\n".join(json.dumps(x) for x in [meta, *frames]) + "\n"


def test_a_transcript_that_would_run_commands_here_is_refused_without_trust(tmp_path):
    rec_ws = tmp_path / "theirs"
    rec_ws.mkdir()
    script = tmp_path / "m.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"tool_calls": [{"name": "bash", "arguments": {"command": "echo pwned > made-by-bash"}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    path = tmp_path / "someone-elses.jsonl"
    agent = AgentProcess(
        "--record",
        str(path),
        "--model",
        f"scripted:{script}",
        "--mode",
        "auto",
        cwd=rec_ws,
        state_dir=tmp_path / "state",
    )
    try:
        agent.initialize()
        agent.prompt(agent.new_session(rec_ws), "go")
        assert agent.close() == 0
    finally:
        if agent.proc.poll() is None:
            agent.kill()
    transcript = load(path)
    work = tmp_path / "work"
    with pytest.raises(CheckError, match="runs a command: 'echo pwned > made-by-bash'"):
        check(transcript, workdir=work)
    assert not (work / "ws" / "made-by-bash").exists()
    assert not (work / "state").exists()  # no agent was even started
    proc = gw(tmp_path, "--check", str(path))
    assert proc.returncode == 2 and "--trust" in proc.stderr and "echo pwned" in proc.stderr
    # Trusted: it runs, in the temporary workspace, and matches the recording.
    result = check(transcript, workdir=tmp_path / "trusted", trust=True, idle=15)
    assert result.ok, result.divergence
    assert (tmp_path / "trusted" / "ws" / "made-by-bash").read_text() == "pwned\n"


@pytest.mark.parametrize(
    ("responses", "params", "why"),
    [
        (
            [{"tool_calls": [{"name": "write_file", "arguments": {"path": "/etc/cron.d/x", "content": "x"}}]}],
            None,
            "writes '/etc/cron.d/x', outside the workspace",
        ),
        (
            [
                {
                    "tool_calls": [
                        {"name": "edit", "arguments": {"path": "../../.bashrc", "old_string": "a", "new_string": "b"}}
                    ]
                }
            ],
            None,
            "writes '../../.bashrc'",
        ),
        (
            [
                {
                    "tool_calls": [
                        {
                            "name": "apply_patch",
                            "arguments": {"patch": "*** Begin Patch\n*** Add File: ~/.profile\n+x\n*** End Patch"},
                        }
                    ]
                }
            ],
            None,
            "patches '~/.profile'",
        ),
        (
            [{"tool_calls": [{"name": "bash", "arguments": {"action": "start", "command": "sleep 1000"}}]}],
            None,
            "runs a command: 'sleep 1000'",
        ),
        (
            [],
            {"mcpServers": [{"name": "srv", "command": "/usr/bin/evil", "args": [], "env": []}]},
            "starts the MCP server 'srv' (/usr/bin/evil)",
        ),
    ],
    ids=["absolute-write", "dotdot-edit", "home-patch", "background-process", "mcp-server"],
)
def test_what_acts_outside_the_temporary_workspace_is_named(responses, params, why):
    found = untrusted_actions(parse(_transcript(responses, params)), ["/home/someone/proj"])
    assert any(why in f for f in found), found


def test_reads_and_writes_inside_the_recorded_workspace_need_no_trust():
    responses = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "/home/someone/proj/a.txt", "content": "x"}},
                {"name": "write_file", "arguments": {"path": "src/b.txt", "content": "x"}},
                {"name": "read_file", "arguments": {"path": "/etc/hostname"}},
                {"name": "bash", "arguments": {"action": "list"}},
            ]
        }
    ]
    assert untrusted_actions(parse(_transcript(responses)), ["/home/someone/proj"]) == []


def test_workspace_files_of_a_transcript_cannot_escape_the_workspace(tmp_path):
    text = _transcript([{"text": "hi"}]).replace(
        '"mode": "auto"', '"mode": "safe", "workspace_files": {"../../escaped.txt": "x"}'
    )
    with pytest.raises(ValueError, match="not a relative path inside the workspace"):
        check(parse(text), workdir=tmp_path / "w")
    assert not (tmp_path / "escaped.txt").exists()


def test_recordings_appended_to_one_file_are_checked_in_turn_and_a_later_one_loads_an_earlier_session(tmp_path):
    """`--record` appends: an editor that recorded two runs of the agent into one file, the second loading the
    session of the first, replays as two agents on one state dir, with the first run's session id mapped."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "m.json"
    script.write_text(json.dumps({"responses": [{"text": "First answer."}]}))
    record = tmp_path / "both.jsonl"
    sid = None
    for run in range(2):
        agent = AgentProcess(
            "--record", str(record), "--model", f"scripted:{script}", cwd=ws, state_dir=tmp_path / "state"
        )
        try:
            agent.initialize()
            if run == 0:
                sid = agent.new_session(ws)
                agent.prompt(sid, "Hello there")
            else:
                agent.result("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
            assert agent.close() == 0
        finally:
            if agent.proc.poll() is None:
                agent.kill()
    transcript = load(record)
    assert len(transcript.segments) == 2
    shown = render_text(transcript)
    assert "── recording 2 of 2" in shown and f"→ session/load {sid} in {ws}" in shown
    assert "👤 Hello there" in shown  # the loaded conversation, as the agent replayed it
    result = check(transcript, workdir=tmp_path / "check", idle=15)
    assert result.ok, (result.divergence.summary, result.divergence.detail)
