"""The sandbox where users are: the real `gatewright acp` in each environment a system may offer, judged by effects.

Each environment is built for real (`tests/support/environments.py`): a seccomp filter refusing user namespaces
(Docker's default profile), a real rbind chroot (where the kernel refuses them), a filter refusing mounts (a user
namespace without capabilities, as Ubuntu's AppArmor restriction leaves one), one refusing Landlock (a kernel
without it) and one refusing only its enforcement. In each, the agent must run commands under the strongest sandbox
the environment allows, say once which layers hold and why the others do not, and keep working: a write hidden from
every analysis is refused wherever Landlock holds, and an ordinary command runs everywhere.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.security.world import World, answer_with, attack, bash, make_world, processes_with
from tests.support.environments import chroot, refusing, unavailable
from tests.support.harness import AgentProcess, write_script

pytestmark = [pytest.mark.timeout(120)]


@dataclass(frozen=True)
class Expect:
    landlock: bool
    namespaces: bool
    why: str  # words the notice and /status must give for what is missing
    title: str | None  # the notice's title (None: no notice, everything holds)


ENVIRONMENTS = {
    "full": Expect(True, True, "", None),
    "seccomp-refuses-user-namespaces": Expect(True, False, "user namespaces are refused", "Weaker sandbox"),
    "chroot": Expect(True, False, "user namespaces are refused", "Weaker sandbox"),
    "mounts-refused-in-user-namespaces": Expect(True, False, "mounts inside a user namespace", "Weaker sandbox"),
    "no-landlock": Expect(False, True, "no Landlock", "No sandbox"),
    "landlock-cannot-be-enforced": Expect(False, True, "cannot be enforced", "No sandbox"),
}


def _host_has_everything() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from runtime import sandbox; s = sandbox.support(); print(s.active, s.namespaces)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()
    if out != ["True", "True"]:
        unavailable(f"this system itself lacks Landlock or namespaces ({out}): the others cannot be derived from it")


def wrapper(env: str, world: World) -> list[str]:
    _host_has_everything()
    if env == "full":
        return []
    if env == "chroot":
        return chroot(world.root / "chroot", world.ws)
    what = {
        "seccomp-refuses-user-namespaces": "userns",
        "mounts-refused-in-user-namespaces": "mount",
        "no-landlock": "landlock",
        "landlock-cannot-be-enforced": "landlock-enforce",
    }[env]
    return refusing(what)


def namespaces_of(pid: int | str) -> list[str]:
    return [os.readlink(f"/proc/{pid}/ns/{n}") for n in ("user", "pid")]


def told_once(agent: AgentProcess, sid: str, expect: Expect) -> None:
    """The session's notice: none where everything holds, else exactly one naming what is missing and why."""
    notices = [
        u["content"]["text"]
        for u in agent.updates(sid)
        if u.get("sessionUpdate") == "agent_message_chunk" and "andbox" in u["content"]["text"][:40]
    ]
    if expect.title is None:
        assert notices == [], notices
    else:
        assert len(notices) == 1 and expect.title in notices[0] and expect.why in notices[0], notices


def status_names_the_layers(agent: AgentProcess, sid: str, expect: Expect) -> None:
    before = len(agent.updates(sid))
    agent.prompt(sid, "/status")
    status = "".join(
        u["content"]["text"] for u in agent.updates(sid)[before:] if u.get("sessionUpdate") == "agent_message_chunk"
    )
    assert "Sandbox: " in status
    if expect.landlock:
        assert "Landlock ABI" in status, status
    if not expect.namespaces:
        assert "no pid namespace" in status and expect.why in status, status
    if not expect.landlock:
        assert "no Landlock" in status and expect.why in status, status


def approving_readlink(m: dict[str, Any]) -> Any:
    """A user who lets the namespace check run and says no to everything else."""
    return answer_with("allow_once" if "readlink" in json.dumps(m["params"]) else "reject_continue")(m)


@pytest.mark.parametrize("env", list(ENVIRONMENTS))
def test_each_environment_runs_commands_under_the_strongest_sandbox_it_allows_and_says_which(spawn, tmp_path, env):
    expect = ENVIRONMENTS[env]
    world = make_world(tmp_path)
    (world.ws / "sub").mkdir()
    hidden = world.root / f"MARK_hidden_{world.tag}"
    calls = [
        # Which namespaces the command runs in (no path in its words: without Landlock, a named outside path asks).
        bash(
            'python3 -c \'import os; print(*(os.readlink(os.path.join(os.sep, "proc", "self", "ns", n)) '
            'for n in ("user", "pid")))\''
        ),
        # A path no analysis can see (it is built inside the interpreter): only Landlock can refuse it.
        bash(
            "python3 -c 'import os; open(os.path.join(os.path.dirname(os.getcwd()), \"MARK_hidden_"
            + world.tag
            + '"), "w")\''
        ),
        bash("echo made > sub/out.txt && cat sub/out.txt"),
    ]
    run = attack(
        spawn, world, calls, mode="auto", responder=approving_readlink, wrap=wrapper(env, world), prompt_timeout=90
    )
    agent = run.agent
    try:
        assert run.answer["result"]["stopReason"] == "end_turn"
        out = [run.output(i) for i in range(len(run.results()))]
        assert len(out) == 3, out
        ours = namespaces_of("self")
        theirs = str(run.results()[0]["rawOutput"]["stdout"]).split()
        if expect.namespaces:
            assert all(t != o for t, o in zip(theirs, ours, strict=True)), (theirs, ours)
        else:
            assert theirs == ours, "the command runs in the agent's own user, pid and net namespaces"
        assert not hidden.exists(), "a write outside the workspace, hidden from the analysis, was not refused"
        asked = [
            q["params"]["toolCall"]["rawInput"]["command"] for q in agent.agent_requests if "toolCall" in q["params"]
        ]
        if expect.landlock:
            assert "Permission denied" in out[1], out[1]  # it ran unasked, and Landlock refused it
            assert asked == [], asked
        else:  # nothing would hold it: the code asks even in auto, and the user said no
            assert asked == [calls[0]["arguments"]["command"], calls[1]["arguments"]["command"]], asked
        assert "made" in out[2] and (world.ws / "sub" / "out.txt").read_text() == "made\n"
        told_once(agent, run.session, expect)
        status_names_the_layers(agent, run.session, expect)
        assert "Broken pipe" not in agent.stderr and "Traceback" not in agent.stderr, agent.stderr[-2000:]
    finally:
        agent.close()


@pytest.mark.parametrize("env", ["chroot", "seccomp-refuses-user-namespaces"])
def test_without_namespaces_nothing_a_command_starts_outlives_the_agent(spawn, tmp_path, env):
    """Containment by process group and marker: a `setsid` child and a double fork are ended with the command and
    with the agent, without the pid namespace that guarantees it elsewhere."""
    world = make_world(tmp_path)
    tag = str(int(world.tag, 16))[:8]
    calls = [
        bash(f"setsid sleep 61.{tag}1 & (setsid sh -c 'sleep 61.{tag}2 &' &); echo started"),
        bash(f"setsid sleep 61.{tag}3 & sleep 61.{tag}4", action="start"),
        bash("sleep 0.3"),
    ]
    run = attack(spawn, world, calls, mode="auto", responder=answer_with("allow_once"), wrap=wrapper(env, world))
    agent = run.agent
    try:
        assert "started" in run.output(0)
        assert not _alive(f"61.{tag}1") and not _alive(f"61.{tag}2"), "an exec left a process behind"
        assert _alive(f"61.{tag}4"), "the background process never started"
    finally:
        os.kill(agent.proc.pid, signal.SIGKILL)
        agent.proc.wait(10)
        agent.close()
    deadline = time.monotonic() + 5
    while (_alive(f"61.{tag}3") or _alive(f"61.{tag}4")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(f"61.{tag}3") and not _alive(f"61.{tag}4"), "a process outlived the agent"


def _alive(needle: str) -> bool:
    return bool(processes_with(needle))


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _helpers_of(pid: int) -> list[int]:
    """The agent's sandbox helpers: its children running the helper's boot line."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"runtime.sandbox.helper" in cmdline:
            found.append(int(entry))
    return found


def test_a_helper_killed_mid_session_is_restarted_and_the_session_and_the_command_say_so(spawn, tmp_path):
    world = make_world(tmp_path)
    script = write_script(
        world.root / "model.json",
        [
            {"tool_calls": [bash("echo one")]},
            {"text": "done"},
            {"tool_calls": [bash("echo two")]},
            {"text": "done"},
        ],
    )
    agent = spawn(
        "--model",
        f"scripted:{script}",
        "--mode",
        "auto",
        cwd=world.ws,
        state_dir=world.state,
        env={"HOME": str(world.home)},
    )
    agent.initialize()
    sid = agent.new_session(world.ws)
    agent.prompt(sid, "first")
    helpers = _helpers_of(agent.proc.pid)
    assert len(helpers) == 1, helpers
    os.kill(helpers[0], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _running(helpers[0]) and time.monotonic() < deadline:  # dead between two turns, not during the next
        time.sleep(0.01)
    before = len(agent.updates(sid))
    agent.prompt(sid, "second")
    later = agent.updates(sid)[before:]
    final = [u for u in later if u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "completed"]
    text = json.dumps(final)
    assert "two" in text, text[-2000:]  # it runs: a new helper started (the first spawn after it carries its note)
    notices = [
        u["content"]["text"]
        for u in later
        if u.get("sessionUpdate") == "agent_message_chunk" and "Sandbox restarted" in u["content"]["text"]
    ]
    assert len(notices) == 1 and "killed by signal 9" in notices[0], notices
    assert _helpers_of(agent.proc.pid) != helpers
