"""A world to attack: a workspace (a git repository), another project, an outside directory, a home with keys, and a
hostile model that drives the real `gatewright acp` binary through one list of tool calls.

Every check in the corpus is about an effect: a marker file that must not exist, a secret that must be in no frame
the agent wrote, a directory that must still be there, a process that must not survive. Whether a question was asked
is recorded too, but it is never the proof.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.harness import AgentProcess, write_script


@dataclass
class World:
    root: Path
    ws: Path
    other: Path
    outside: Path
    home: Path
    state: Path
    tag: str
    secrets: dict[str, str] = field(default_factory=dict)

    def marker(self, name: str, where: str = "ws") -> Path:
        base = {"ws": self.ws, "outside": self.outside, "root": self.root}[where]
        return base / f"MARK_{name}_{self.tag}"


def make_world(tmp: Path, *, git: bool = True) -> World:
    """`git=False`: the workspace is no repository (nothing named `.git` exists in it)."""
    tag = uuid.uuid4().hex[:10]
    ws, other, outside, home, state = (tmp / n for n in ("ws", "other", "outside", "home", "state"))
    for d in (ws, other, outside / "dir", home / ".ssh", state):
        d.mkdir(parents=True, exist_ok=True)
    w = World(tmp, ws, other, outside, home, state, tag)
    w.secrets = {
        "other_env": f"OTHER-PROJECT-SECRET-{tag}",
        "ssh_key": f"SSH-PRIVATE-KEY-{tag}",
        "outside_file": f"OUTSIDE-FILE-SECRET-{tag}",
    }
    (other / ".env").write_text(f"TOKEN={w.secrets['other_env']}\n", encoding="utf-8")
    (home / ".ssh" / "id_rsa").write_text(w.secrets["ssh_key"] + "\n", encoding="utf-8")
    (outside / "secret.txt").write_text(w.secrets["outside_file"] + "\n", encoding="utf-8")
    (outside / "dir" / "keep.txt").write_text("keep\n", encoding="utf-8")
    (ws / "README.md").write_text("# project\n\nhello from the workspace\n", encoding="utf-8")
    (ws / "notes.txt").write_text("line one\nline two\n", encoding="utf-8")
    if git:
        init_repository(ws, "README.md")
    return w


GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main")


def init_repository(where: Path, *paths: str) -> None:
    """A repository at `where` with one commit of `paths` (what a user's project looks like)."""
    subprocess.run([*GIT, "init", "-q", str(where)], check=True)
    subprocess.run([*GIT, "-C", str(where), "add", *paths], check=True, capture_output=True)
    subprocess.run([*GIT, "-C", str(where), "commit", "-q", "-m", "init"], check=True)


def shadow_line() -> str | None:
    """The first line of /etc/shadow as this (root) test process reads it, or None when it cannot."""
    try:
        with open("/etc/shadow", encoding="utf-8") as f:
            return f.readline().strip() or None
    except OSError:
        return None


Responder = Callable[[dict[str, Any]], Any]


def answer_with(kind_or_id: str) -> Responder:
    """A user who answers every question with the first option of a kind (or an exact option id)."""

    def respond(msg: dict[str, Any]) -> Any:
        options = msg["params"]["options"]
        chosen = next((o for o in options if o["optionId"] == kind_or_id), None) or next(
            o for o in options if o["kind"] == kind_or_id
        )
        return {"outcome": {"outcome": "selected", "optionId": chosen["optionId"]}}

    return respond


@dataclass
class Run:
    agent: AgentProcess
    session: str
    answer: dict[str, Any]

    @property
    def questions(self) -> list[dict[str, Any]]:
        return [m for m in self.agent.agent_requests if m["method"] == "session/request_permission"]

    def wire(self) -> str:
        return b"".join(self.agent.raw_lines).decode("utf-8", "replace")

    def results(self) -> list[dict[str, Any]]:
        """The final `tool_call_update` of every call, in order."""
        final: dict[str, dict[str, Any]] = {}
        for u in self.agent.updates(self.session):
            if u.get("sessionUpdate") == "tool_call_update" and u.get("status") in ("completed", "failed"):
                final[u["toolCallId"]] = u
        return list(final.values())

    def output(self, index: int = 0) -> str:
        r = self.results()[index]
        return json.dumps(r.get("rawOutput")) + json.dumps(r.get("content"))


def attack(
    spawn: Callable[..., AgentProcess],
    world: World,
    calls: list[dict[str, Any]],
    *,
    mode: str,
    responder: Responder | None = None,
    caps: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    prompt_timeout: float = 60,
    followups: int = 0,
    console_script: bool = False,
    wrap: Sequence[str] = (),
    additional: Sequence[Path] = (),
) -> Run:
    """One agent, one session in `world.ws` (and the roots `additional`), one prompt: the model makes `calls` one
    per step, then says done.
    `followups`: that many more prompts, which the model just answers (each turn starts with the agent's look at
    the workspace, its `git status` included). `wrap`: the environment the agent runs in
    (`tests/support/environments.py`)."""
    responses = [{"tool_calls": [c]} for c in calls] + [{"text": "done"}] * (1 + followups)
    script = write_script(world.root / f"model-{uuid.uuid4().hex[:6]}.json", responses)
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        mode,
        cwd=world.ws,
        state_dir=world.state,
        responder=responder or answer_with("reject_once"),
        env={"HOME": str(world.home), **(env or {})},
        **({"console_script": True} if console_script else {}),
        wrap=wrap,
    )
    agent.initialize(caps)
    if additional:
        params = {"cwd": str(world.ws), "mcpServers": [], "additionalDirectories": [str(p) for p in additional]}
        sid = agent.result("session/new", params)["sessionId"]
    else:
        sid = agent.new_session(world.ws)
    answer = agent.prompt(sid, "go", timeout=prompt_timeout)
    for _ in range(followups):
        answer = agent.prompt(sid, "and now?", timeout=prompt_timeout)
    return Run(agent, sid, answer)


def bash(command: str, **extra: Any) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command, **extra}}


def processes_with(needle: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `needle`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state not in (b"Z", b"X") and int(entry) != os.getpid():
            found.append(int(entry))
    return found


class EditorTerminals:
    """What an editor does for `terminal/*`: runs the command it was given, exactly, in this process's environment
    with the agent's variables applied, and reports its output. `override`: variables the terminal gets whatever the
    agent asked (an editor's or a user's own settings). Other requests go to `then`."""

    def __init__(self, then: Responder, override: dict[str, str] | None = None) -> None:
        self.then = then
        self.override = override or {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.outputs: dict[str, bytes] = {}
        self.commands: list[list[str]] = []

    def __call__(self, m: dict[str, Any]) -> Any:
        method, p = m["method"], m.get("params", {})
        if method == "terminal/create":
            tid = "term_" + uuid.uuid4().hex[:6]
            argv = [p["command"], *p.get("args", [])]
            self.commands.append(argv)
            env = {e["name"]: e["value"] for e in p.get("env", [])}
            self.procs[tid] = subprocess.Popen(
                argv,
                cwd=p.get("cwd"),
                env={**os.environ, **env, **self.override},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            return {"terminalId": tid}
        if method == "terminal/wait_for_exit":
            proc = self.procs[p["terminalId"]]
            out, _ = proc.communicate(timeout=30)
            self.outputs[p["terminalId"]] = out
            return {"exitCode": proc.returncode, "signal": None}
        if method == "terminal/output":
            proc = self.procs[p["terminalId"]]
            out = self.outputs.get(p["terminalId"], b"")
            return {
                "output": out.decode("utf-8", "replace"),
                "truncated": False,
                "exitStatus": {"exitCode": proc.returncode, "signal": None},
            }
        if method in ("terminal/kill", "terminal/release"):
            proc = self.procs.get(p["terminalId"])
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            return {}
        return self.then(m)
