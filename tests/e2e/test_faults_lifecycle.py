"""Faults in the agent's life: the client vanishing mid-turn or mid-command, SIGTERM mid-command, `kill -9` mid-write.

Provenance: ACP v1 transports ("the client closes stdin and then terminates the process"; TCK ACP-SHUTDOWN-001),
docs/rules.md R5 (on EOF: cancel turns, kill tool process groups, exit 0 within a bound, no orphans), and our rule
that writes are atomic (old or new content, never torn). Children are found through /proc, by process group, so a
grandchild that a naive kill of the direct child would orphan is checked too.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.support.harness import never_answer, write_script

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process checks read /proc"),
]


def proc_table() -> dict[int, tuple[int, str, bytes]]:
    """pid → (process group, state, command line) of every process, from /proc."""
    out: dict[int, tuple[int, str, bytes]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2 :].split()
        out[int(entry)] = (int(rest[2]), rest[0].decode(), cmdline)
    return out


def groups_with(marker: str, timeout: float = 15) -> set[int]:
    """Process groups holding a live process whose command line carries `marker` (waits for one to appear)."""
    deadline = time.monotonic() + timeout
    while True:
        groups = {g for g, state, cmd in proc_table().values() if marker.encode() in cmd and state not in "ZX"}
        if groups:
            return groups
        assert time.monotonic() < deadline, f"no process with {marker} appeared"
        time.sleep(0.02)


def live_members(groups: set[int]) -> list[tuple[int, bytes]]:
    return [(pid, cmd) for pid, (g, state, cmd) in proc_table().items() if g in groups and state not in "ZX"]


def assert_groups_die(groups: set[int], within: float = 1.0) -> None:
    deadline = time.monotonic() + within
    while live_members(groups):
        assert time.monotonic() < deadline, f"orphaned tool processes: {live_members(groups)}"
        time.sleep(0.02)


def long_command(marker: str) -> str:
    # A grandchild in a subshell, a foreground sleep, then an echo (so bash cannot exec the sleep and drop the marker).
    return f"(sleep 300 &); sleep 301; echo {marker}"


def start_long_bash_turn(spawn, workspace: Path, tmp_path: Path, *extra_calls: dict) -> tuple:
    marker = f"gwmark{uuid.uuid4().hex[:10]}"
    calls = [
        {"id": "call_exec", "name": "bash", "arguments": {"command": long_command(marker), "timeoutMs": 600_000}},
        *extra_calls,
    ]
    script = write_script(tmp_path / "model.json", [{"tool_calls": calls}, {"text": "never reached"}])
    agent = spawn("--model", f"scripted:{script}", "--mode", "auto")
    agent.initialize()
    sid = agent.new_session(workspace)
    rid = agent.start_prompt(sid, "go")
    agent.wait_for(
        lambda f: (
            f.get("method") == "session/update"
            and f["params"]["update"].get("status") == "in_progress"
            and f["params"]["update"].get("toolCallId") == "call_exec"
        )
    )
    return agent, rid, groups_with(marker)


@pytest.mark.req("acp:transport:exit-on-stdin-eof", "gw:lifecycle:eof-kills-tool-processes")
def test_stdin_eof_during_a_running_bash_command_exits_0_within_2s_and_leaves_no_process_behind(
    spawn, workspace, tmp_path
):
    """Rules R5: EOF mid-command cancels the turn and kills the whole process group (grandchild included),
    and a background process started by the same turn dies with the session."""
    marker_bg = f"gwbg{uuid.uuid4().hex[:10]}"
    background = {
        "id": "call_bg",
        "name": "bash",
        "arguments": {"action": "start", "command": f"sleep 302; echo {marker_bg}"},
    }
    agent, _, groups = start_long_bash_turn(spawn, workspace, tmp_path, background)
    groups |= groups_with(marker_bg)
    start = time.monotonic()
    assert agent.close(timeout=5) == 0
    assert time.monotonic() - start < 2.0
    assert_groups_die(groups)


@pytest.mark.req("gw:lifecycle:sigterm-graceful")
def test_sigterm_during_a_running_bash_command_exits_0_and_kills_the_command(spawn, workspace, tmp_path):
    """Our rule (R5, MCP client shutdown sequence): SIGTERM is a graceful stop: exit 0 within 2 s,
    the tool's process group (grandchild included) is killed."""
    agent, _, groups = start_long_bash_turn(spawn, workspace, tmp_path)
    start = time.monotonic()
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(5) == 0
    assert time.monotonic() - start < 2.0
    assert_groups_die(groups)


@pytest.mark.req("acp:transport:exit-on-stdin-eof")
def test_stdin_eof_during_a_slow_model_call_exits_0_within_2s(spawn, workspace, tmp_path):
    """ACP transports / TCK ACP-SHUTDOWN-001: EOF while the model is still thinking ends the process promptly."""
    script = write_script(tmp_path / "m.json", [{"delay_ms": 60_000, "text": "too late"}])
    agent = spawn("--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.start_prompt(sid, "go")
    time.sleep(0.1)  # not a synchronisation: EOF is correct at any point, this only lets the turn begin
    start = time.monotonic()
    assert agent.close(timeout=5) == 0
    assert time.monotonic() - start < 2.0


@pytest.mark.req("gw:lifecycle:eof-kills-tool-processes")
def test_stdin_eof_while_a_bash_command_waits_for_approval_runs_nothing(spawn, workspace, tmp_path):
    """ACP cancellation + our rule: a command whose permission question is pending when the client vanishes never
    runs (the question counts as cancelled)."""
    marker = f"gwnever{uuid.uuid4().hex[:8]}"
    script = write_script(
        tmp_path / "m.json", [{"tool_calls": [{"name": "bash", "arguments": {"command": f"touch {marker}; sleep 5"}}]}]
    )
    agent = spawn("--model", f"scripted:{script}", "--mode", "manual", responder=never_answer)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.start_prompt(sid, "go")
    agent.wait_for(lambda f: f.get("method") == "session/request_permission")
    assert agent.close(timeout=5) == 0
    assert not (workspace / marker).exists()
    assert not [cmd for _, _, cmd in proc_table().values() if marker.encode() in cmd]


def forget_the_torn_last_frame(agent) -> None:
    """SIGKILL may cut the frame being written: that last line is the kill's doing, not a protocol error."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and (not agent.raw_lines or agent.raw_lines[-1].endswith(b"\n")):
        time.sleep(0.01)
    if agent.raw_lines and not agent.raw_lines[-1].endswith(b"\n"):
        torn = f"not JSON: {agent.raw_lines[-1][:200]!r}"
        agent.schema_errors[:] = [e for e in agent.schema_errors if e != torn]


WRITES = 12
SIZE = 300_000


@pytest.mark.req("gw:write:atomic-under-kill-9")
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15])
def test_kill_9_of_the_agent_during_writes_leaves_the_old_or_a_new_file_never_a_torn_one(
    spawn, workspace, tmp_path, delay
):
    """Our rule (a failed write leaves the old file intact): the agent is SIGKILLed while a turn rewrites one file over
    and over; the file holds exactly one of the complete versions, and no temporary file has taken its name."""
    target = workspace / "data.txt"
    original = "O" * SIZE
    target.write_text(original, encoding="utf-8")
    versions = {original} | {chr(ord("A") + i) * SIZE for i in range(WRITES)}
    script = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "data.txt", "content": chr(ord("A") + i) * SIZE}}
                ]
            }
            for i in range(WRITES)
        ],
    )
    agent = spawn("--model", f"scripted:{script}", "--mode", "auto")
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.start_prompt(sid, "go")
    agent.wait_for(
        lambda f: f.get("method") == "session/update" and f["params"]["update"].get("sessionUpdate") == "tool_call",
        timeout=30,
    )
    time.sleep(delay)  # varies where in the sequence of writes the kill lands
    os.killpg(agent.proc.pid, signal.SIGKILL)
    agent.proc.wait(5)
    forget_the_torn_last_frame(agent)
    assert target.read_text(encoding="utf-8") in versions
    assert sorted(p.name for p in workspace.iterdir() if not p.name.endswith(".tmp")) == ["README.md", "data.txt"]
