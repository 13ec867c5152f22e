"""`gatewright run` says plainly what went wrong, at the command line boundary: model failures on
stderr with the provider's text and the URL (exit 1), configuration problems before the first call (exit 2), a
rejected approval (exit 3), Ctrl-C and an unanswered approval prompt that end at once in a real pseudo-terminal
(exit 130 / 3), `--record` and GATEWRIGHT_RECORD, `-` for stdin, `--json`; and no traceback for any of it."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fake_providers import OPENAI_PATH, FakeProviders, Reply, error_body, openai_stream
from tests.support.harness import REPO, AgentProcess
from tests.support.sdk_client import check_recorded_frames

pytestmark = pytest.mark.timeout(60)

CLI = "from acp_server.cli import main; raise SystemExit(main())"
KEYS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GATEWRIGHT_MODEL",
    "GATEWRIGHT_MODE",
    "GATEWRIGHT_RECORD",
    "GATEWRIGHT_CONFIG",
    "GATEWRIGHT_PERMISSION_TIMEOUT",
)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    # No retries, so a failing provider fails at once; a config of our own, so the user's never applies.
    config = tmp / "config.toml"
    if not config.exists():
        config.write_text("[providers.openai]\nmax_retries = 0\n\n[providers.anthropic]\nmax_retries = 0\n")
    env.update(
        PYTHONPATH=REPO,
        GATEWRIGHT_STATE_DIR=str(tmp / "state"),
        GATEWRIGHT_CONFIG=str(config),
        XDG_CONFIG_HOME=str(tmp / "xdg"),
    )
    env.update(extra)
    return env


def gw(
    tmp: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        cwd=ws,
        env=env or _env(tmp),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _script(tmp: Path, responses: list) -> str:
    path = tmp / "model.json"
    path.write_text(json.dumps({"responses": responses}))
    return f"scripted:{path}"


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# ---- model failures: exit 1, the provider's text and the URL on stderr ------------------------------------------
@pytest.mark.parametrize(
    ("status", "text"),
    [
        (404, "The model `gpt-x` does not exist"),
        (429, "Rate limit reached for requests"),
        (500, "The server had an error while processing your request"),
    ],
)
def test_a_failed_model_call_goes_to_stderr_with_the_providers_text_and_the_url_and_exits_1(tmp_path, status, text):
    with FakeProviders() as fp:
        fp.openai(*[Reply(status, body=error_body("openai", status, text))] * 4)
        env = _env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY="sk-test-key-123")
        proc = gw(tmp_path, "run", "--model", "openai:gpt-x", "hello", env=env)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gatewright: the model call failed: ") and text in last and fp.url in last
    assert text not in proc.stdout and "failed" not in proc.stdout
    assert "sk-test-key-123" not in proc.stderr + proc.stdout


def test_an_unreachable_provider_names_the_url_and_exits_1(tmp_path):
    with FakeProviders() as fp:
        url = fp.url  # a port nothing listens on once the server is closed
    env = _env(tmp_path, OPENAI_BASE_URL=url + "/v1", OPENAI_API_KEY="sk-test")
    proc = gw(tmp_path, "run", "--model", "openai:gpt-x", "hello", env=env)
    no_traceback(proc)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gatewright: the model call failed: ") and url in last


def test_a_rejected_key_is_a_model_failure_with_the_url(tmp_path):
    with FakeProviders() as fp:
        fp.anthropic(Reply(401, body=error_body("anthropic", 401, "invalid x-api-key")))
        env = _env(tmp_path, ANTHROPIC_BASE_URL=fp.url, ANTHROPIC_API_KEY="sk-ant-wrong")
        proc = gw(tmp_path, "run", "--model", "anthropic:claude-x", "hello", env=env)
    no_traceback(proc)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gatewright: authentication failed: ") and fp.url in last


# ---- configuration: exit 2 before any call ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "var"), [("openai:gpt-4.1", "OPENAI_API_KEY"), ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY")]
)
def test_a_missing_key_for_the_chosen_provider_is_found_before_the_first_call(tmp_path, spec, var):
    proc = gw(tmp_path, "run", "--model", spec, "hello")
    no_traceback(proc)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"gatewright: {var} is not set, and {spec} needs it: set {var} in the environment gatewright runs in, or, "
        f"for a local server that needs no key, point {var.replace('API_KEY', 'BASE_URL')} (or base_url) at it"
    ]


def test_a_configured_provider_whose_key_variable_is_unset_is_refused_before_any_call(tmp_path):
    """Before, its base URL made it look keyless: it was called anyway and answered 401 (exit 1)."""
    with FakeProviders() as fp:
        (tmp_path / "config.toml").write_text(
            f'[providers.team]\nkind = "openai"\nbase_url = "{fp.url}/v1"\napi_key_env = "TEAM_KEY"\n'
        )
        proc = gw(tmp_path, "run", "--model", "team:big", "hello")
        assert fp.requests == []
    no_traceback(proc)
    assert proc.returncode == 2
    assert proc.stderr == (
        "gatewright: TEAM_KEY is not set, and team:big needs it: set TEAM_KEY in the environment gatewright runs "
        "in, or, if the server needs no key, remove api_key_env from [providers.team] in the config file\n"
    )


def test_the_built_in_provider_at_a_remote_base_url_needs_its_key(tmp_path):
    env = _env(tmp_path, OPENAI_BASE_URL="https://openrouter.invalid/api/v1")
    proc = gw(tmp_path, "run", "--model", "openai:some/model", "hello", env=env)
    assert proc.returncode == 2 and proc.stderr.startswith("gatewright: OPENAI_API_KEY is not set")


def test_a_provider_without_a_key_variable_needs_no_key(tmp_path):
    with FakeProviders() as fp:
        fp.openai(Reply(frames=openai_stream("keyless answer")))
        (tmp_path / "config.toml").write_text(f'[providers.lan]\nkind = "openai"\nbase_url = "{fp.url}/v1"\n')
        proc = gw(tmp_path, "run", "--model", "lan:qwen", "hello")
        (request,) = fp.requests_to(OPENAI_PATH)
    assert proc.returncode == 0, proc.stderr
    assert "keyless answer" in proc.stdout and "authorization" not in {k.lower() for k in request.headers}


def test_a_local_server_needs_no_key(tmp_path):
    with FakeProviders() as fp:
        fp.openai(Reply(frames=openai_stream("local answer")))
        proc = gw(
            tmp_path, "run", "--model", "openai:llama", "hello", env=_env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1")
        )
        assert len(fp.requests_to(OPENAI_PATH)) == 1
    assert proc.returncode == 0, proc.stderr
    assert "local answer" in proc.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "nosuchmodel"],
        ["--model", ":x"],
        ["--model", "scripted:/nope.json"],
        ["--model", "mystery:x"],
        ["--mode", "yolo"],
        ["--cwd", "/no/such/dir"],
        [],
    ],
    ids=["unknown-name", "malformed", "missing-script", "unknown-provider", "bad-mode", "bad-cwd", "no-model"],
)
def test_bad_usage_or_configuration_is_one_line_and_exit_2(tmp_path, args):
    proc = gw(tmp_path, "run", *args, "hello")
    no_traceback(proc)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_an_empty_prompt_is_bad_usage(tmp_path):
    model = _script(tmp_path, [{"text": "never"}])
    for args, stdin in ((["   "], None), (["-"], " \n\n")):
        proc = gw(tmp_path, "run", "--model", model, *args, stdin=stdin)
        assert proc.returncode == 2 and proc.stderr == "gatewright: the prompt is empty\n"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_an_unwritable_transcript_is_one_line_and_exit_2_in_run_and_acp(tmp_path, how):
    model = _script(tmp_path, [{"text": "never"}])
    bad = str(tmp_path / "no" / "such" / "dir" / "t.jsonl")
    for command in ("run", "acp"):
        extra = ["--record", bad] if how == "flag" else []
        env = _env(tmp_path, **({"GATEWRIGHT_RECORD": bad} if how == "env" else {}))
        args = [command, "--model", model, *extra, *(["hello"] if command == "run" else [])]
        proc = gw(tmp_path, *args, env=env)
        no_traceback(proc)
        assert proc.returncode == 2, (command, proc.stderr)
        assert proc.stderr == f"gatewright: cannot write the transcript {bad}: No such file or directory\n"


def test_permissions_without_an_action_is_one_line(tmp_path):
    proc = gw(tmp_path, "permissions")
    assert proc.returncode == 2
    assert proc.stderr == "gatewright: permissions needs an action: `permissions list` or `permissions revoke ID`\n"


@pytest.mark.parametrize("action", [["list"], ["revoke", "rule-1"]])
def test_permissions_on_a_state_dir_that_cannot_be_opened_is_said_in_plain_lines(tmp_path, action):
    (tmp_path / "file").write_text("not a directory")
    proc = gw(tmp_path, "permissions", *action, "--state-dir", str(tmp_path / "file" / "state"))
    no_traceback(proc)
    assert proc.returncode in (0, 1, 2)
    assert 1 <= len(proc.stderr.splitlines()) <= 2, proc.stderr


# ---- the turn's own outcomes --------------------------------------------------------------------------------------
WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "written\n"}}]}


def test_without_a_terminal_a_call_that_asks_is_not_run_and_exits_3_without_saying_you_rejected_it(tmp_path):
    proc = gw(tmp_path, "run", "--model", _script(tmp_path, [WRITE, {"text": "never"}]), "write")
    no_traceback(proc)
    assert proc.returncode == 3
    assert "there is no terminal to ask on: not run" in proc.stderr
    assert "there was no terminal to ask you about Write out.txt, so it was not run" in proc.stdout + proc.stderr
    assert "rejected" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "gatewright: stopped because a tool call was not approved."
    assert not (tmp_path / "ws" / "out.txt").exists()


def test_the_prompt_can_come_from_stdin(tmp_path):
    with FakeProviders() as fp:
        fp.openai(Reply(frames=openai_stream("ok")))
        env = _env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY="sk-test")
        prompt = "a prompt\nover two lines, with $(no expansion)\n"
        proc = gw(tmp_path, "run", "--model", "openai:gpt-x", "-", env=env, stdin=prompt)
        (request,) = fp.requests_to(OPENAI_PATH)
    assert proc.returncode == 0, proc.stderr
    user = [m for m in request.body["messages"] if m["role"] == "user"][-1]
    content = user["content"] if isinstance(user["content"], str) else "".join(p["text"] for p in user["content"])
    assert prompt in content


def test_json_writes_one_object_per_event_and_ends_with_the_exit_code(tmp_path):
    model = _script(
        tmp_path, [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}, WRITE, {"text": "never"}]
    )
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    proc = gw(tmp_path, "run", "--json", "--model", model, "go")
    no_traceback(proc)
    assert proc.returncode == 3
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events and all(isinstance(e, dict) and "type" in e for e in events)
    kinds = [(e["type"], e.get("update", {}).get("sessionUpdate")) for e in events]
    assert kinds[:3] == [("update", "tool_call"), ("update", "tool_call_update"), ("update", "tool_call_update")]
    assert ("permission", None) in kinds
    permission = next(e for e in events if e["type"] == "permission")
    assert permission["title"] == "Write out.txt" and permission["answer"] is None
    assert permission["unasked"] == "there was no terminal to ask you"
    end = events[-1]
    assert end == {"type": "end", "stopReason": "end_turn", "exitCode": 3, "sessionId": end["sessionId"]}
    assert end["sessionId"].startswith("sess_")


def test_json_reports_a_model_failure_as_an_error_event(tmp_path):
    with FakeProviders() as fp:
        fp.openai(Reply(500, body=error_body("openai", 500, "upstream exploded")))
        env = _env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY="sk-test")
        proc = gw(tmp_path, "run", "--json", "--model", "openai:gpt-x", "hi", env=env)
    assert proc.returncode == 1
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    error = next(e for e in events if e["type"] == "error")
    assert "upstream exploded" in error["message"] and error["url"].startswith(fp.url)
    assert {k: v for k, v in events[-1].items() if k != "sessionId"} == {
        "type": "end",
        "stopReason": "end_turn",
        "exitCode": 1,
    }


@pytest.mark.parametrize("how", ["flag", "env"])
def test_record_writes_the_transcript_in_run_too(tmp_path, how):
    model = _script(
        tmp_path,
        [
            {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
            WRITE,
            {"text": "never"},
        ],
    )
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    out = tmp_path / "t.jsonl"
    env = _env(tmp_path, **({"GATEWRIGHT_RECORD": str(out)} if how == "env" else {}))
    extra = ["--record", str(out)] if how == "flag" else []
    proc = gw(tmp_path, "run", "--model", model, *extra, "go", env=env)
    assert proc.returncode == 3
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["meta"]["host"] == "run"
    frames = [
        (e["dir"], e["msg"].get("method"), (e["msg"].get("params") or {}).get("update", {}).get("sessionUpdate"))
        for e in lines[1:]
    ]
    assert frames[0] == ("in", "session/prompt", None)
    assert ("out", "session/update", "agent_message_chunk") in frames
    assert ("out", "session/request_permission", None) in frames
    # No terminal: recorded as an editor that cannot show the question answers it.
    answer = next(e["msg"] for e in lines[1:] if e["dir"] == "in" and "id" in e["msg"] and "method" not in e["msg"])
    assert answer["error"] == {"code": -32601, "message": "Method not found: there was no terminal to ask you"}
    assert lines[-1]["msg"] == {"jsonrpc": "2.0", "id": "prompt", "result": {"stopReason": "end_turn"}}
    check_recorded_frames(out)  # every frame is what the ACP schema allows


# ---- in a real pseudo-terminal ------------------------------------------------------------------------------------
class Pty:
    """`gatewright run` with a pseudo-terminal as its controlling terminal (stdin, stdout, stderr)."""

    def __init__(self, tmp: Path, *args: str, env: dict[str, str]) -> None:
        ws = tmp / "ws"
        ws.mkdir(exist_ok=True)
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes gatewright (nothing else runs here)
            os.chdir(ws)
            os.execve(sys.executable, [sys.executable, "-c", CLI, *args], env)
        self.pid, self.fd, self.out = pid, fd, b""

    def read_until(self, marker: bytes, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.out:
            left = deadline - time.monotonic()
            assert left > 0, f"{marker!r} not seen; output so far:\n{self.out.decode(errors='replace')}"
            if select.select([self.fd], [], [], left)[0]:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                assert chunk, f"exited before {marker!r}:\n{self.out.decode(errors='replace')}"
                self.out += chunk

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float = 15) -> int:
        """The exit code, reading the rest of the output meanwhile; fails if the run does not end in time."""
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                raise AssertionError(f"still running after {timeout}s:\n{self.out.decode(errors='replace')}")
            if select.select([self.fd], [], [], 0.05)[0]:
                try:
                    self.out += os.read(self.fd, 4096)
                except OSError:
                    pass
        try:
            while select.select([self.fd], [], [], 0.2)[0]:
                chunk = os.read(self.fd, 4096)
                if not chunk:
                    break
                self.out += chunk
        except OSError:
            pass
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace")


def test_y_at_the_prompt_approves_in_a_terminal(tmp_path):
    term = Pty(
        tmp_path, "run", "--model", _script(tmp_path, [WRITE, {"text": "all done"}]), "write", env=_env(tmp_path)
    )
    term.read_until(b"Approve? [y/N] ")
    term.send(b"y\n")
    assert term.wait() == 0, term.text
    assert (tmp_path / "ws" / "out.txt").read_text() == "written\n"
    assert "all done" in term.text


def test_n_at_the_prompt_rejects_and_exits_3(tmp_path):
    term = Pty(tmp_path, "run", "--model", _script(tmp_path, [WRITE, {"text": "never"}]), "write", env=_env(tmp_path))
    term.read_until(b"Approve? [y/N] ")
    term.send(b"n\n")
    assert term.wait() == 3, term.text
    assert not (tmp_path / "ws" / "out.txt").exists() and "Traceback" not in term.text


def test_ctrl_c_at_the_approval_prompt_exits_130_at_once_without_waiting_for_enter(tmp_path):
    term = Pty(tmp_path, "run", "--model", _script(tmp_path, [WRITE, {"text": "never"}]), "write", env=_env(tmp_path))
    term.read_until(b"Approve? [y/N] ")
    t0 = time.monotonic()
    term.send(b"\x03")  # the terminal turns it into SIGINT for the foreground process group
    assert term.wait(timeout=10) == 130, term.text
    assert time.monotonic() - t0 < 5
    assert not (tmp_path / "ws" / "out.txt").exists() and "Traceback" not in term.text


@pytest.mark.parametrize("where", ["model", "command"])
def test_ctrl_c_while_the_model_thinks_or_a_command_runs_exits_130(tmp_path, where):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("a\n")
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}
    wait = (
        {"text": "late", "delay_ms": 60_000}
        if where == "model"
        else {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 60"}}]}
    )
    term = Pty(
        tmp_path,
        "run",
        "--mode",
        "auto",
        "--model",
        _script(tmp_path, [read, wait, {"text": "never"}]),
        "go",
        env=_env(tmp_path),
    )
    term.read_until("✓ Read a.txt".encode() if where == "model" else b"Run sleep 60")
    t0 = time.monotonic()
    term.send(b"\x03")
    assert term.wait(timeout=10) == 130, term.text
    assert time.monotonic() - t0 < 5 and "Traceback" not in term.text


def test_a_permission_timeout_at_the_prompt_ends_the_run_without_any_key(tmp_path):
    env = _env(tmp_path, GATEWRIGHT_PERMISSION_TIMEOUT="0.5")
    term = Pty(tmp_path, "run", "--model", _script(tmp_path, [WRITE, {"text": "never"}]), "write", env=env)
    term.read_until(b"Approve? [y/N] ")
    assert term.wait(timeout=10) == 3, term.text  # nothing was typed: the question ran out of time
    assert "no answer within 0.5 s" in term.text and "Traceback" not in term.text
    assert not (tmp_path / "ws" / "out.txt").exists()


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_a_reader_that_goes_away_stops_the_turn_without_a_traceback(tmp_path, fmt):
    model = _script(tmp_path, [{"text": "word " * 200_000, "chunks": 20_000}, {"text": "never"}])
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "run", *fmt, "--model", model, "talk"],
        cwd=ws,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert proc.stdout.read(100)
    finally:
        proc.stdout.close()  # like `| head -c 100`
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(30) == 130 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_run_on_a_terminal_shows_a_status_line_while_waiting_and_a_commands_output_as_it_runs(tmp_path):
    """Progress where people wait: a spinner with the elapsed time while the model thinks or a command runs, and
    the command's output line by line before it finishes; the reply itself is not mixed with the status line."""
    model = _script(
        tmp_path,
        [
            {
                "delay_ms": 600,
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": "echo first-line; sleep 1.6; echo second-line"}}
                ],
            },
            {"text": "All done."},
        ],
    )
    term = Pty(tmp_path, "run", "--model", model, "--mode", "auto", "go", env=_env(tmp_path))
    term.read_until(b"waiting for the model")  # before: "thinking 15.9 s" while no byte had come yet
    term.read_until(b"\xe2\x94\x82 first-line")  # "│ first-line", shown while the command still sleeps
    assert b"\xe2\x94\x82 second-line" not in term.out
    term.read_until(b"running Run echo")
    assert term.wait() == 0
    text = term.out.decode(errors="replace")
    assert "All done." in text and " s" in text
    assert text.index("first-line") < text.index("All done.")


def test_run_without_a_terminal_prints_no_status_line(tmp_path):
    model = _script(
        tmp_path, [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}, {"text": "done"}]
    )
    proc = gw(tmp_path, "run", "--model", model, "--mode", "auto", "go")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[K" not in proc.stderr and "waiting for the model" not in proc.stderr


def test_run_reads_a_line_longer_than_a_page_in_pieces_with_start_column(tmp_path):
    """A minified file's one line: the first call shows a page of it and names the next call; that call shows the
    rest (before, every call answered 'continue with startLine=1' and the model looped)."""
    (tmp_path / "ws").mkdir()
    line = "".join(f"{i:05d}," for i in range(12_000))  # 72,000 characters on one line
    (tmp_path / "ws" / "app.min.js").write_text(line + "\n")
    first = {"path": "app.min.js"}
    second = {"path": "app.min.js", "startLine": 1, "startColumn": 49_993}
    model = _script(
        tmp_path,
        [{"tool_calls": [{"name": "read_file", "arguments": a}]} for a in (first, second)] + [{"text": "read"}],
    )
    proc = gw(tmp_path, "run", "--json", "--model", model, "read app.min.js")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(row) for row in proc.stdout.splitlines()]
    done = [
        e["update"]["rawOutput"]
        for e in events
        if e.get("update", {}).get("sessionUpdate") == "tool_call_update" and e["update"].get("status") == "completed"
    ]
    assert [r.get("next") for r in done] == [second, None]
    texts = [
        c["content"]["text"]
        for e in events
        if e.get("update", {}).get("status") == "completed"
        for c in e["update"].get("content") or []
        if c.get("type") == "content"
    ]
    # The editor is shown the start of each piece (its display of a tool's output is capped).
    assert texts[0].startswith("     1\t00000,00001,") and texts[1].startswith("     1\t" + line[49_992:50_100])


# ---- run sessions: stored, listed, resumable, audited under their id -------------------------------------------
LONG = "echo " + " ".join(f"word{i:03d}" for i in range(45))  # a 284-character command, as the issue's


def test_a_run_is_a_stored_session_listed_resumable_and_audited_whole_under_its_id(tmp_path):
    model = _script(tmp_path, [{"tool_calls": [{"name": "bash", "arguments": {"command": LONG}}]}, {"text": "Ran it."}])
    proc = gw(tmp_path, "run", "--json", "--mode", "auto", "--model", model, "run the long echo")
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout.splitlines()[-1])["sessionId"]
    assert sid.startswith("sess_")
    audit = gw(tmp_path, "audit", "--json", "--session", sid)
    (row,) = [json.loads(line) for line in audit.stdout.splitlines()]
    assert row["session_id"] == sid and json.loads(row["summary"])["command"] == LONG  # not "<284 characters>"
    agent = AgentProcess("--model", model, cwd=tmp_path / "ws", state_dir=tmp_path / "state")
    try:
        agent.initialize()
        listed = agent.result("session/list", {"cwd": str(tmp_path / "ws")})["sessions"]
        assert [(s["sessionId"], s["title"]) for s in listed] == [(sid, "run the long echo")]
        agent.result("session/load", {"sessionId": sid, "cwd": str(tmp_path / "ws"), "mcpServers": []})
        said = [u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert said == ["Ran it."]
        assert agent.close() == 0
    finally:
        if agent.proc.poll() is None:
            agent.kill()


def test_a_failed_run_prints_nothing_on_stdout(tmp_path):
    with FakeProviders() as fp:
        fp.openai(Reply(500, body=error_body("openai", 500, "upstream exploded")))
        env = _env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY="sk-test")
        proc = gw(tmp_path, "run", "--model", "openai:gpt-x", "hi", env=env)
    assert proc.returncode == 1 and proc.stdout == ""  # before: a stray empty line


def test_a_retry_is_said_once_naming_the_provider_once(tmp_path):
    with FakeProviders() as fp:
        fp.openai(Reply(503, body=error_body("openai", 503, "overloaded")), Reply(frames=openai_stream("second try")))
        (tmp_path / "config.toml").write_text("[providers.openai]\nmax_retries = 1\nretry_base_delay = 0.01\n")
        env = _env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY="sk-test")
        proc = gw(tmp_path, "run", "--model", "openai:gpt-x", "hi", env=env)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "retrying" in ln]
    assert "openai failed (HTTP 503)" in line and "openai: openai" not in line  # before: "openai: openai failed"


def test_git_config_global_is_asked_about_with_the_file_it_writes(tmp_path):
    """Before, the question's reason was "…/ws/.git is a protected path": the wrong file."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".git").mkdir()
    call = {"name": "bash", "arguments": {"command": "git config --global user.name 'A B'"}}
    proc = gw(tmp_path, "run", "--json", "--model", _script(tmp_path, [{"tool_calls": [call]}, {"text": "x"}]), "go")
    (asked,) = [e for e in map(json.loads, proc.stdout.splitlines()) if e["type"] == "permission"]
    assert ".gitconfig" in asked["reason"] and "/.git " not in asked["reason"] + " ", asked["reason"]


# ---- transcripts that replay on their own -----------------------------------------------------------------------
def _check(record: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWRIGHT_")}
    env.update(PYTHONPATH=REPO)
    return subprocess.run(
        [sys.executable, "-c", CLI, "replay", "--check", str(record)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_a_run_record_replays_from_any_directory_with_nothing_else(tmp_path):
    """Before: "diverged at frame 4 … README.md does not exist" unless the old workspace was restored by hand."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# demo\n\nhello\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("def main():\n    return 'hello'\n")
    calls = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"tool_calls": [{"name": "grep", "arguments": {"pattern": "hello"}}]},
        {
            "tool_calls": [
                {"name": "edit", "arguments": {"path": "README.md", "old_string": "hello", "new_string": "hi"}}
            ]
        },
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}]},
        {"text": "Done."},
    ]
    record = tmp_path / "run.jsonl"
    proc = gw(tmp_path, "run", "--mode", "auto", "--record", str(record), "--model", _script(tmp_path, calls), "go")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads(record.read_text().splitlines()[0])["meta"]
    assert meta["workspace_files"] == {
        "README.md": "# demo\n\nhello\n",
        "src/app.py": "def main():\n    return 'hello'\n",
    }
    shutil.rmtree(ws)  # the workspace is gone, the recording moved: it replays anyway
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / "bug.jsonl"
    record.rename(moved)
    check = _check(moved, elsewhere)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_secret_file_the_recording_read_is_never_embedded_and_the_replay_says_it_lacks_it(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".env").write_text("DB_PASSWORD=hunter2-not-in-the-record\n")
    (ws / "notes.txt").write_text("notes\n")
    calls = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": ".env"}}]},
        {"text": "Done."},
    ]
    record = tmp_path / "run.jsonl"
    proc = gw(tmp_path, "run", "--mode", "auto", "--record", str(record), "--model", _script(tmp_path, calls), "go")
    assert proc.returncode in (0, 3), proc.stderr  # reading .env may ask; without a terminal it is refused
    text = record.read_text()
    assert "hunter2-not-in-the-record" not in text
    meta = json.loads(text.splitlines()[0])["meta"]
    assert meta["workspace_files"] == {"notes.txt": "notes\n"}
    assert meta["workspace_files_missing"] == {".env": "a secret file (never embedded)"}
