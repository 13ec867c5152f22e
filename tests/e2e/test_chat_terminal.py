"""`gatewright chat` driven the way a person uses it: in a pseudo-terminal (pexpect), keys and Ctrl-C, with the
scripted model; then the same session continued in the terminal and loaded by an editor over ACP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.fake_providers import OPENAI_PATH, FakeProviders, Reply, openai_stream
from tests.support.harness import AgentProcess, allow_once

REPO = str(Path(__file__).resolve().parents[2])
# CSI and OSC sequences, and the two-byte escapes prompt_toolkit and rich write: what is left is the text.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
PROMPT = r"\n› "  # the input line, drawn at the start of a line (a question's key prompt is indented)
SLEEP_MARK = "317.25"  # the argument of the long command, to find its process whatever its pid namespace


class Term:
    """`gatewright chat …` in a pseudo-terminal; `expect` matches the text on screen without escape sequences."""

    def __init__(
        self,
        *args: str,
        cwd: Path,
        state: Path,
        timeout: float = 30,
        command: tuple[str, ...] = ("chat",),
        env: dict[str, str] | None = None,
    ) -> None:
        full = dict(
            os.environ,
            PYTHONPATH=REPO,
            GATEWRIGHT_STATE_DIR=str(state),
            TERM="xterm-256color",
            PROMPT_TOOLKIT_NO_CPR="1",
            COLUMNS="150",
            LINES="50",
        )
        for name in ("GATEWRIGHT_MODEL", "GATEWRIGHT_MODE", "NO_COLOR"):
            full.pop(name, None)
        full.update(env or {})
        self.child = pexpect.spawn(
            sys.executable,
            ["-c", "from acp_server.cli import main; raise SystemExit(main())", *command, *args],
            cwd=str(cwd),
            env=full,
            dimensions=(50, 150),
            encoding="utf-8",
            codec_errors="replace",
            timeout=timeout,
        )
        self.timeout = timeout
        self.raw = ""
        self.text = ""
        self.pos = 0

    def expect(self, pattern: str, timeout: float | None = None) -> re.Match[str]:
        rx = re.compile(pattern)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            m = rx.search(self.text, self.pos)
            if m:
                self.pos = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{pattern!r} not on screen; the screen ends with:\n{self.text[-3000:]}")
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=min(left, 0.5))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                raise AssertionError(
                    f"chat exited before {pattern!r}; the screen ends with:\n{self.text[-3000:]}"
                ) from None
            self.text = ANSI.sub("", self.raw)

    def prompt(self) -> None:
        self.expect(PROMPT)

    def say(self, text: str) -> None:
        self.prompt()
        self.child.send(text + "\r")

    def wait_exit(self, timeout: float = 20) -> int:
        self.child.expect(pexpect.EOF, timeout=timeout)
        self.raw += self.child.before or ""
        self.text = ANSI.sub("", self.raw)
        self.child.close()
        assert self.child.exitstatus is not None, "chat was killed by a signal"
        return self.child.exitstatus

    def kill(self) -> None:
        if self.child.isalive():
            self.child.kill(9)


def script(path: Path, responses: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"responses": responses}), encoding="utf-8")
    return f"scripted:{path}"


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# demo\n", encoding="utf-8")
    return ws


def sleepers() -> list[int]:
    """The processes running the long command of the Ctrl-C test."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", SLEEP_MARK.encode()]:
                out.append(int(entry))
    return out


def wait_until(condition: Any, timeout: float, what: str) -> None:
    """Poll an effect outside the terminal (a file, the process table) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_conversation_in_the_terminal_with_an_always_answer_is_saved_continued_and_loaded_by_an_editor(tmp_path):
    ws = workspace(tmp_path)
    state = tmp_path / "state"
    write = {"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}
    model = script(
        tmp_path / "model.json",
        [
            {"thinking": "Nothing to look up.", "text": "First answer: **hello**.\n\n- alpha\n- beta\n"},
            {"tool_calls": [write]},
            {"tool_calls": [write]},  # the identical call again: "always" covers it, nothing is asked
            {"text": "Wrote a.txt twice.", "usage": {"input_tokens": 120, "output_tokens": 7}},
            {"text": "Third answer, after coming back."},
        ],
    )
    term = Term("--model", model, cwd=ws, state=state)
    try:
        sid = term.expect(r"new session (sess_[0-9a-f]+)").group(1)
        term.say("say hello")
        term.expect(r"∴ Thought for")  # collapsed; Ctrl-T at the prompt shows it
        term.expect(r"First answer: hello\.")
        term.expect(r"alpha")
        term.prompt()
        term.child.sendcontrol("t")
        term.expect(r"Nothing to look up\.")
        term.child.send("write a.txt\r")
        term.expect(r"Allow Write a\.txt")
        term.expect(r"\+one")  # the diff, before the question
        term.expect(r"\[a\] Always allow .*a\.txt.* in this session")
        term.expect(r"cancels the turn\) ›")
        term.child.send("a")
        term.expect(r"Wrote a\.txt twice\.")
        term.expect(r"120 in · 7 out · session 120 in · 7 out")  # usage after the turn
        term.say("/permissions")
        rule = term.expect(r"• (\S+) allow write_file: writing this content to a\.txt \(session\)").group(1)
        term.say(f"/permissions revoke {rule}")
        term.expect(f"Revoked {rule}")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert term.text.count("Allow Write a.txt") == 1
    assert (ws / "a.txt").read_text() == "one\n"
    assert f"Session {sid} is saved" in term.text

    back = Term("--continue", "--model", model, cwd=ws, state=state)
    try:
        back.expect(f"continuing {sid}")
        back.expect(r"› say hello")  # what the session held is shown again
        back.expect(r"✓ Write a\.txt")
        back.say("and now?")
        back.expect(r"Third answer, after coming back\.")  # the scripted model went on where it stood
        back.prompt()
        back.child.sendcontrol("c")  # Ctrl-C at an empty prompt leaves
        assert back.wait_exit() == 0
    finally:
        back.kill()

    editor = AgentProcess("--model", model, cwd=ws, responder=allow_once, state_dir=state)
    try:
        editor.initialize()
        listed = editor.result("session/list", {"cwd": str(ws)})["sessions"]
        assert [s["sessionId"] for s in listed] == [sid]
        assert listed[0]["title"] == "say hello"
        editor.result("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        updates = editor.updates(sid)
        editor.close()
    finally:
        if editor.proc.poll() is None:
            editor.kill()
    editor.assert_clean()
    prompts = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    assert prompts == ["say hello", "write a.txt", "/permissions", f"/permissions revoke {rule}", "and now?"]
    said = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert "First answer: **hello**." in said and "Third answer, after coming back." in said
    assert "Nothing to look up." in "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_thought_chunk"
    )
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    finals = [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert [c["title"] for c in calls] == ["Write a.txt", "Write a.txt"] and finals == ["completed", "completed"]


def test_ctrl_c_during_a_long_command_cancels_the_turn_kills_the_command_and_returns_to_the_prompt(tmp_path):
    ws = workspace(tmp_path)
    model = script(
        tmp_path / "model.json",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": f"touch started && sleep {SLEEP_MARK}"}}]},
            {"text": "Still here."},
        ],
    )
    term = Term("--model", model, "--mode", "auto", cwd=ws, state=tmp_path / "state")
    try:
        term.say("run the long thing")
        term.expect(r"Run .*running")
        wait_until(lambda: (ws / "started").exists() and sleepers(), 30, "the command did not start")
        term.child.sendintr()
        term.expect(r"Cancelled\.")
        wait_until(lambda: not sleepers(), 10, "the command outlived the cancelled turn")
        term.say("are you there?")
        term.expect(r"Still here\.")  # the next turn runs normally
        term.prompt()
        term.child.sendcontrol("c")
        assert term.wait_exit() == 0
    finally:
        term.kill()
        for pid in sleepers():
            os.kill(pid, 9)


def test_ctrl_c_at_a_question_cancels_the_turn_and_nothing_is_written(tmp_path):
    ws = workspace(tmp_path)
    model = script(
        tmp_path / "model.json",
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x\n"}}]},
            {"text": "Next turn."},
        ],
    )
    term = Term("--model", model, cwd=ws, state=tmp_path / "state")
    try:
        term.say("write it")
        term.expect(r"cancels the turn\) ›")
        term.child.send("\r")  # Enter chooses nothing
        term.child.send("q")  # nor does a key that is no option
        term.child.sendintr()
        term.expect(r"Cancelled\.")
        term.say("again")
        term.expect(r"Next turn\.")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert not (ws / "a.txt").exists()
    assert term.text.count("Allow Write a.txt") == 1


def test_closing_the_terminal_mid_command_ends_the_chat_and_the_command_and_keeps_the_session(tmp_path):
    ws = workspace(tmp_path)
    state = tmp_path / "state"
    model = script(
        tmp_path / "model.json",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": f"touch started && sleep {SLEEP_MARK}"}}]},
        ],
    )
    term = Term("--model", model, "--mode", "auto", cwd=ws, state=state)
    try:
        sid = term.expect(r"new session (sess_[0-9a-f]+)").group(1)
        term.say("run the long thing")
        wait_until(lambda: (ws / "started").exists() and sleepers(), 30, "the command did not start")
        term.child.kill(signal.SIGHUP)
        term.child.expect(pexpect.EOF, timeout=20)
        term.child.close()
        assert term.child.exitstatus == 0
    finally:
        term.kill()
        for pid in sleepers():
            os.kill(pid, 9)
    wait_until(lambda: not sleepers(), 10, "the command outlived the chat")
    editor = AgentProcess(cwd=ws, state_dir=state)
    try:
        editor.initialize()
        assert [s["sessionId"] for s in editor.result("session/list", {})["sessions"]] == [sid]
        editor.close()
    finally:
        if editor.proc.poll() is None:
            editor.kill()


def test_the_prompt_history_never_holds_a_secret_value(tmp_path):
    ws = workspace(tmp_path)
    state = tmp_path / "state"
    secret = "sk-chat-test-0f9e8d7c6b5a"
    model = script(tmp_path / "model.json", [{"text": "Noted."}])
    term = Term("--model", model, cwd=ws, state=state, env={"CHAT_TEST_API_KEY": secret})
    try:
        term.say(f"my key is {secret}")
        term.expect(r"Noted\.")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    history = (state / "chat_history").read_text(encoding="utf-8")
    assert "my key is <redacted>" in history and secret not in history
    assert all(secret.encode() not in f.read_bytes() for f in state.iterdir() if f.is_file())
    assert oct((state / "chat_history").stat().st_mode & 0o777) == "0o600"  # before: 0644, readable by all


def test_an_old_history_file_becomes_private(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "chat_history").write_text("\n# 2026-01-01\n+an old prompt\n")
    (state / "chat_history").chmod(0o644)  # as 0.1.0 left it
    term = Term("--model", script(tmp_path / "m.json", [{"text": "x"}]), cwd=workspace(tmp_path), state=state)
    try:
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert oct((state / "chat_history").stat().st_mode & 0o777) == "0o600"
    assert "an old prompt" in (state / "chat_history").read_text()


def test_a_twenty_thousand_chunk_paragraph_streams_through_the_terminal_in_seconds(tmp_path):
    """The live region redraws the end of an unfinished block only, and backs off when the terminal is slow to take
    a redraw. Measured: 0.6-0.9 s and about 0.3 MiB written to the terminal; 3.5-23 s and 1-4.6 MiB when every
    redraw rendered the whole paragraph."""
    words = " ".join(f"word{i}" for i in range(20_000))  # one paragraph: no block is final before the end
    model = script(tmp_path / "model.json", [{"text": words}])
    term = Term("--model", model, cwd=workspace(tmp_path), state=tmp_path / "state")
    try:
        term.say("go")
        t0 = time.monotonic()
        term.expect(r"word19999", timeout=60)
        term.expect(r"  \d+\.\d s(?=\r?\n)", timeout=60)  # the turn's closing line
        took = time.monotonic() - t0
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert took < 15, took
    assert len(term.raw.encode()) < 640 * 1024


def test_an_editor_session_is_continued_in_the_terminal(tmp_path):
    ws = workspace(tmp_path)
    state = tmp_path / "state"
    model = script(tmp_path / "model.json", [{"text": "Answer in the editor."}, {"text": "Answer in the terminal."}])
    editor = AgentProcess("--model", model, cwd=ws, state_dir=state)
    try:
        editor.initialize()
        sid = editor.new_session(ws)
        assert editor.prompt(sid, "from the editor")["result"]["stopReason"] == "end_turn"
        editor.close()
    finally:
        if editor.proc.poll() is None:
            editor.kill()
    term = Term("--resume", sid, "--model", model, cwd=ws, state=state)
    try:
        term.expect(f"continuing {sid}")
        term.expect(r"› from the editor")
        term.expect(r"Answer in the editor\.")
        term.say("and here")
        term.expect(r"Answer in the terminal\.")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()


def test_gatewright_alone_on_a_terminal_opens_the_chat(tmp_path):
    model = script(tmp_path / "model.json", [{"text": "Hi from the chat."}])
    term = Term(cwd=workspace(tmp_path), state=tmp_path / "state", command=(), env={"GATEWRIGHT_MODEL": model})
    try:
        term.expect(r"gatewright chat · new session")
        term.say("hello")
        term.expect(r"Hi from the chat\.")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()


@pytest.mark.parametrize("args", [["chat"], ["chat", "--resume", "sess_nope"]])
def test_chat_without_a_terminal_says_so_and_exits_2(tmp_path, args):
    model = script(tmp_path / "model.json", [{"text": "never"}])
    env = dict(os.environ, PYTHONPATH=REPO, GATEWRIGHT_STATE_DIR=str(tmp_path / "state"), GATEWRIGHT_MODEL=model)
    done = subprocess.run(
        [sys.executable, "-c", "from acp_server.cli import main; raise SystemExit(main())", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "chat needs a terminal" in done.stderr and done.stdout == ""


def test_resuming_an_unknown_session_says_so_and_exits_2(tmp_path):
    term = Term(
        "--resume",
        "sess_nope",
        "--model",
        script(tmp_path / "m.json", [{"text": "x"}]),
        cwd=tmp_path,
        state=tmp_path / "state",
    )
    try:
        term.expect(r"no stored session 'sess_nope'")
        assert term.wait_exit() == 2
    finally:
        term.kill()


# ---- a resumed chat's model and mode ---------------------------------------------------------------------------
def _first_chat(tmp_path: Path, ws: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """One turn of a new chat with `args` (a model, a mode); returns its session id."""
    term = Term(*args, cwd=ws, state=tmp_path / "state", env=env)
    try:
        sid = term.expect(r"new session (sess_[0-9a-f]+)").group(1)
        term.say("first")
        term.expect(r"First answer\.")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    return sid


def test_a_resumed_chat_comes_back_on_its_stored_scripted_model_and_mode_without_any_option(tmp_path):
    ws = workspace(tmp_path)
    model = script(tmp_path / "model.json", [{"text": "First answer."}, {"text": "Second answer, same script."}])
    sid = _first_chat(tmp_path, ws, "--model", model, "--mode", "auto")
    back = Term("--resume", sid, cwd=ws, state=tmp_path / "state")  # no --model, no --mode
    try:
        back.expect(f"continuing {sid}")
        back.expect(rf"mode auto · model {re.escape(model)}")
        back.say("again")
        back.expect(r"Second answer, same script\.")  # the stored model, where it stood
        back.prompt()
        back.child.sendcontrol("d")
        assert back.wait_exit() == 0
    finally:
        back.kill()
    assert "No model is configured" not in back.text


def test_a_resumed_chat_sends_its_next_call_to_the_stored_provider_model(tmp_path):
    ws = workspace(tmp_path)
    with FakeProviders() as fp:
        fp.openai(Reply(frames=openai_stream("First answer.")), Reply(frames=openai_stream("Still model-a.")))
        env = {"OPENAI_BASE_URL": fp.url + "/v1", "OPENAI_API_KEY": "sk-test", "XDG_CONFIG_HOME": str(tmp_path / "x")}
        sid = _first_chat(tmp_path, ws, "--model", "openai:model-a", env=env)
        back = Term("--continue", cwd=ws, state=tmp_path / "state", env=env)
        try:
            back.expect(f"continuing {sid}")
            back.say("again")
            back.expect(r"Still model-a\.")
            back.prompt()
            back.child.sendcontrol("d")
            assert back.wait_exit() == 0
        finally:
            back.kill()
        models = [r.body["model"] for r in fp.requests_to(OPENAI_PATH)]
    assert models == ["model-a", "model-a"]


def test_a_model_and_mode_given_on_resume_switch_the_session_and_say_so(tmp_path):
    ws = workspace(tmp_path)
    with FakeProviders() as fp:
        fp.openai(Reply(frames=openai_stream("First answer.")), Reply(frames=openai_stream("From model-b.")))
        env = {"OPENAI_BASE_URL": fp.url + "/v1", "OPENAI_API_KEY": "sk-test", "XDG_CONFIG_HOME": str(tmp_path / "x")}
        sid = _first_chat(tmp_path, ws, "--model", "openai:model-a", env=env)
        back = Term(
            "--resume",
            sid,
            "--model",
            "openai:model-b",
            "--mode",
            "read-only",
            cwd=ws,
            state=tmp_path / "state",
            env=env,
        )
        try:
            back.expect(f"continuing {sid}")
            back.expect(r"model: openai:model-b, was openai:model-a")
            back.expect(r"mode: read-only, was safe")
            back.say("again")
            back.expect(r"From model-b\.")
            back.say("/status")
            back.expect(r"read-only")
            back.prompt()
            back.child.sendcontrol("d")
            assert back.wait_exit() == 0
        finally:
            back.kill()
        models = [r.body["model"] for r in fp.requests_to(OPENAI_PATH)]
    assert models == ["model-a", "model-b"]


def test_a_run_session_is_continued_in_the_chat(tmp_path):
    ws = workspace(tmp_path)
    model = script(tmp_path / "model.json", [{"text": "Answered by run."}, {"text": "Answered in the chat."}])
    env = dict(os.environ, PYTHONPATH=REPO, GATEWRIGHT_STATE_DIR=str(tmp_path / "state"))
    env.pop("GATEWRIGHT_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-c", "from acp_server.cli import main; raise SystemExit(main())"]
        + ["run", "--json", "--model", model, "from a script"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    sid = json.loads(done.stdout.splitlines()[-1])["sessionId"]
    back = Term("--resume", sid, cwd=ws, state=tmp_path / "state")
    try:
        back.expect(f"continuing {sid}")
        back.expect(r"› from a script")
        back.expect(r"Answered by run\.")
        back.say("and now?")
        back.expect(r"Answered in the chat\.")
        back.prompt()
        back.child.sendcontrol("d")
        assert back.wait_exit() == 0
    finally:
        back.kill()


def test_chat_record_writes_a_transcript_that_replays(tmp_path):
    """`chat --help` offered --record, and chat refused it; now it records as `acp --record` does."""
    ws = workspace(tmp_path)
    write = {"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}
    model = script(tmp_path / "model.json", [{"tool_calls": [write]}, {"text": "Wrote hello.txt."}, {"text": "Bye."}])
    record = tmp_path / "chat.jsonl"
    term = Term("--model", model, "--record", str(record), cwd=ws, state=tmp_path / "state")
    try:
        term.say("write hello")
        term.expect(r"Allow Write hello\.txt")
        term.expect(r"cancels the turn\) ›")
        term.child.send("y")
        term.expect(r"Wrote hello\.txt\.")
        term.say("and say bye")
        term.expect(r"Bye\.")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines[0]["meta"]["host"] == "chat" and "scripted_model" in lines[0]["meta"]
    methods = [e["msg"].get("method") for e in lines[1:]]
    assert methods.count("session/prompt") == 2 and methods.count("session/request_permission") == 1
    answers = [e["msg"] for e in lines[1:] if e["dir"] == "out" and "result" in e["msg"]]
    assert [a["result"]["stopReason"] for a in answers] == ["end_turn", "end_turn"]
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("GATEWRIGHT_MODEL", None)
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "from acp_server.cli import main; raise SystemExit(main())",
            "replay",
            "--check",
            str(record),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_help_in_the_chat_lists_exit(tmp_path):
    term = Term("--model", script(tmp_path / "m.json", [{"text": "x"}]), cwd=workspace(tmp_path), state=tmp_path / "s")
    try:
        term.say("/help")
        term.expect(r"/compact")
        term.expect(r"/exit: Leave the chat")  # before: /help did not say how to leave
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
