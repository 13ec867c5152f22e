"""gatewright driven by a real third-party ACP client: the npm package `acpx`, non-interactive.

Covered: a one-shot prompt with tool calls, permissions answered by `--approve-all` / `--deny-all`, writes through the
client's `fs/*` methods; a persistent session (`sessions new`, `prompt`) with a local command, a cancelled prompt
(`acpx cancel`, which also closes the provider's HTTP stream) and a resume in a fresh agent process that keeps the
conversation.

acpx is installed with npm into `.ci/acpx` (what `.ci/run` does, so CI has it); the tests skip only when Node or npm
is missing, and `GATEWRIGHT_REQUIRE_ACPX=1` (set by `.ci/run`) turns that skip into a failure. `GATEWRIGHT_ACPX` may
name an acpx binary to use instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_providers import OPENAI_PATH, FakeProviders, Hang, Reply, openai_stream
from tests.support.harness import REPO

ACPX_VERSION = "0.19.1"
PREFIX = Path(REPO) / ".ci" / "acpx"
MIN_NODE = 20

pytestmark = pytest.mark.timeout(240)


def _unavailable(reason: str) -> None:
    if os.environ.get("GATEWRIGHT_REQUIRE_ACPX") == "1":
        pytest.fail(f"GATEWRIGHT_REQUIRE_ACPX=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def acpx() -> str:
    explicit = os.environ.get("GATEWRIGHT_ACPX")
    if explicit:
        if not os.access(explicit, os.X_OK):
            pytest.fail(f"GATEWRIGHT_ACPX={explicit} is not an executable")
        return explicit
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("Node.js and npm are not installed (the acpx end-to-end tests need them)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < MIN_NODE:
        _unavailable(f"Node.js {version} is older than {MIN_NODE}")
    try:
        return str(install_acpx(npm))
    except RuntimeError as exc:
        pytest.fail(str(exc))


def install_acpx(npm: str = "npm") -> Path:
    """Install the pinned acpx into `.ci/acpx` with npm, once (what `.ci/run` calls before the tests)."""
    binary = PREFIX / "node_modules" / ".bin" / "acpx"
    PREFIX.mkdir(parents=True, exist_ok=True)
    with open(PREFIX / ".lock", "w") as lock:  # one installer at a time (parallel test sessions)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            proc = subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                    str(PREFIX),
                    f"acpx@{ACPX_VERSION}",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if proc.returncode != 0 or not binary.exists():
                raise RuntimeError(f"npm could not install acpx@{ACPX_VERSION}:\n{proc.stdout}\n{proc.stderr}")
    return binary


class Acpx:
    """Runs acpx against `python -m acp_server` in a private HOME (acpx keeps its sessions under ~/.acpx)."""

    def __init__(self, binary: str, tmp: Path, model: str, *agent_args: str, env: dict[str, str] | None = None):
        self.binary = binary
        self.tmp = tmp
        self.ws = tmp / "ws"
        self.ws.mkdir(exist_ok=True)
        (tmp / "home").mkdir(exist_ok=True)
        (tmp / "empty.toml").write_text("", encoding="utf-8")  # no user config can change the run
        self.state = tmp / "state"
        self.agent = " ".join(
            [sys.executable, "-m", "acp_server", "--model", model, "--state-dir", str(self.state), *agent_args]
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWRIGHT_", "OPENAI_", "ANTHROPIC_"))}
        self.env.update(
            HOME=str(tmp / "home"),
            PYTHONPATH=REPO,
            XDG_CONFIG_HOME=str(tmp / "xdg"),
            GATEWRIGHT_CONFIG=str(tmp / "empty.toml"),
            NO_COLOR="1",
            **(env or {}),
        )

    def argv(self, *args: str, fmt: str = "json", ttl: str = "1") -> list[str]:
        return [
            self.binary,
            "--format",
            fmt,
            "--ttl",
            ttl,
            "--timeout",
            "60",
            "--cwd",
            str(self.ws),
            "--agent",
            self.agent,
            *args,
        ]

    def run(self, *args: str, fmt: str = "json", timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args, fmt=fmt),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )

    def ours(self) -> list[int]:
        """Processes of this test still alive (acpx's queue owners and the agents it started): their command line
        or environment names this test's directory."""
        marker = str(self.tmp).encode()
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if f.read().split(b") ", 1)[1][:1] == b"Z":
                        continue
            except OSError:
                continue
            if marker in cmdline or marker in environ:
                pids.append(int(entry))
        return pids

    def wait_until_gone(self, timeout: float = 30) -> list[int]:
        deadline = time.monotonic() + timeout
        left = self.ours()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)  # polling a condition with a deadline (the owners leave after their TTL)
            left = self.ours()
        return left

    def cleanup(self) -> list[int]:
        with contextlib.suppress(Exception):
            self.run("sessions", "close", fmt="quiet", timeout=30)
        left = self.wait_until_gone()
        for pid in left:  # only processes this test started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left


def frames(output: str) -> list[dict[str, Any]]:
    out = []
    for line in output.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def updates(fs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        f["params"]["update"]
        for f in fs
        if f.get("method") == "session/update" and f["params"]["update"].get("sessionUpdate") == kind
    ]


def said(fs: list[dict[str, Any]]) -> str:
    return "".join(u["content"].get("text", "") for u in updates(fs, "agent_message_chunk"))


def requests(fs: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [f for f in fs if f.get("method") == method and "id" in f]


def answer_to(fs: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    """The client's answer to an agent request (the frame after it with its id and no method)."""
    at = fs.index(request)
    return next(f for f in fs[at + 1 :] if f.get("id") == request["id"] and "method" not in f)


def _script(tmp: Path, responses: list[dict[str, Any]]) -> str:
    path = tmp / "model.json"
    path.write_text(json.dumps({"responses": responses}))
    return f"scripted:{path}"


@pytest.fixture
def client(acpx, tmp_path):
    made: list[Acpx] = []

    def make(model: str, *agent_args: str, env: dict[str, str] | None = None) -> Acpx:
        c = Acpx(acpx, tmp_path, model, *agent_args, env=env)
        made.append(c)
        return c

    yield make
    for c in made:
        assert c.cleanup() == [], "processes outlived the test"


def test_a_one_shot_prompt_with_approved_tool_calls_writes_through_the_client(client, tmp_path):
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
        {
            "tool_calls": [
                {
                    "name": "edit",
                    "arguments": {"path": "README.md", "old_string": "hello", "new_string": "hello from acpx"},
                }
            ]
        },
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes/new.txt", "content": "made by acpx\n"}}]},
        {"text": "Done: **README.md** and notes/new.txt."},
    ]
    c = client(_script(tmp_path, script))
    (c.ws / "README.md").write_text("# project\n\nhello\n")
    proc = c.run("--approve-all", "exec", "update the readme and add a note")
    assert proc.returncode == 0, proc.stderr
    fs = frames(proc.stdout)
    assert fs[-1].get("result") == {"stopReason": "end_turn"}
    assert (c.ws / "README.md").read_text() == "# project\n\nhello from acpx\n"
    assert (c.ws / "notes" / "new.txt").read_text() == "made by acpx\n"
    assert said(fs) == "Done: **README.md** and notes/new.txt."
    titles = [u["title"] for u in updates(fs, "tool_call")]
    assert titles == ["Read README.md", "Edit README.md", "Write notes/new.txt"]
    asked = requests(fs, "session/request_permission")
    assert [q["params"]["toolCall"]["title"] for q in asked] == ["Edit README.md", "Write notes/new.txt"]
    for q in asked:
        chosen = answer_to(fs, q)["result"]["outcome"]["optionId"]
        assert next(o["kind"] for o in q["params"]["options"] if o["optionId"] == chosen).startswith("allow")
    # The writes went through the client's fs; the edit read the file once, and once more after the answer.
    assert len(requests(fs, "fs/write_text_file")) == 2
    assert len(requests(fs, "fs/read_text_file")) == 1 + 2
    finals = [u["status"] for u in updates(fs, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert finals == ["completed"] * 3
    # What acpx prints for people: the same plain titles, no Markdown quoting.
    text = c.run("--approve-all", "exec", "again", fmt="text")
    assert "[tool] Read README.md" in text.stdout and "`" not in "".join(
        ln for ln in text.stdout.splitlines() if ln.startswith("[tool]")
    )


def test_a_denied_write_is_not_made_and_the_client_shows_what_happened(client, tmp_path):
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}]},
        {"text": "never reached"},
    ]
    c = client(_script(tmp_path, script))
    proc = c.run("--deny-all", "exec", "write out.txt")
    fs = frames(proc.stdout)
    assert not (c.ws / "out.txt").exists()
    (question,) = requests(fs, "session/request_permission")
    chosen = answer_to(fs, question)["result"]["outcome"]
    assert chosen.get("outcome") == "cancelled" or next(
        o["kind"] for o in question["params"]["options"] if o["optionId"] == chosen["optionId"]
    ).startswith("reject")
    final = [u for u in updates(fs, "tool_call_update") if u.get("status") == "failed"][-1]
    shown = final["content"][0]["content"]["text"]
    assert shown in ("Rejected: not run. The turn stopped here.", "Cancelled")
    assert "never reached" not in said(fs)


def test_a_persistent_session_answers_commands_locally_cancels_and_resumes_in_a_new_process(client, tmp_path):
    with FakeProviders() as fp:
        fp.openai(
            Reply(frames=openai_stream("first answer")),
            Reply(frames=(Hang(),)),
            Reply(frames=openai_stream("third answer")),
        )
        c = client("openai:gpt-test", env={"OPENAI_BASE_URL": fp.url + "/v1", "OPENAI_API_KEY": "sk-acpx-test"})
        created = c.run("sessions", "new", fmt="quiet")
        assert created.returncode == 0, created.stderr
        sid = created.stdout.strip().splitlines()[-1]
        assert sid.startswith("sess_")

        first = frames(c.run("prompt", "hello").stdout)
        assert said(first) == "first answer"

        status = frames(c.run("prompt", "/status").stdout)
        assert said(status).startswith(f"**Session** `{sid}`")
        assert len(fp.requests_to(OPENAI_PATH)) == 1  # the command cost no model call

        slow = c.start("prompt", "think slowly")
        deadline = time.monotonic() + 30
        while len(fp.requests_to(OPENAI_PATH)) < 2:  # the turn is waiting for the model
            assert time.monotonic() < deadline and slow.poll() is None, slow.stderr.read() if slow.stderr else ""
            time.sleep(0.05)
        cancel = c.run("cancel", fmt="text")
        assert cancel.returncode == 0, cancel.stderr
        out, err = slow.communicate(timeout=30)
        cancelled = frames(out)
        assert any(f.get("result") == {"stopReason": "cancelled"} for f in cancelled), out[-2000:] + err
        assert fp.disconnected.wait(10)  # the agent closed the provider's stream

        # Once the agent process is gone, the next prompt starts a new one that resumes the stored session.
        assert c.wait_until_gone() == []
        resumed = frames(c.run("prompt", "and now?").stdout)
        opened = [f for f in resumed if f.get("method") in ("session/resume", "session/load")]
        assert opened and opened[0]["params"]["sessionId"] == sid
        assert said(resumed).endswith("third answer")
        third = fp.requests_to(OPENAI_PATH)[2].body["messages"]
        history = json.dumps(third)
        assert "hello" in history and "first answer" in history and "and now?" in history
