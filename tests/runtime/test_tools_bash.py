"""bash: exec in a process group with timeouts and caps, background processes, cleanup on cancel and close."""

from __future__ import annotations

import os
import sys
import tempfile

import anyio
import pytest

from runtime import processes
from runtime.tools.base import ToolFailure
from runtime.workspace import Workspace
from tests.support.sandbox_helpers import eventually, marker, survivors
from tests.support.tools_helpers import TOOLS, FakeEditor, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]


def group_gone(pgid: int) -> bool:
    return not processes.group_alive(pgid)


async def test_exec_reports_stdout_stderr_and_exit_code(tmp_path):
    res = await run("bash", {"command": "echo out; echo err >&2; exit 3"}, make_ctx(tmp_path))
    assert "out" in res.output and "[stderr]\nerr" in res.output and "[exit code 3]" in res.output
    assert res.raw_output["exitCode"] == 3 and res.raw_output["timedOut"] is False
    assert not res.is_error


async def test_exec_runs_in_session_cwd_with_stdin_closed(tmp_path):
    res = await run("bash", {"command": "pwd; cat; echo done"}, make_ctx(tmp_path))
    assert res.output.splitlines()[0] == os.path.realpath(tmp_path)
    assert "done" in res.output  # `cat` read EOF at once instead of hanging


async def test_exec_runs_in_cwd_argument_resolved_in_the_workspace(tmp_path):
    (tmp_path / "sub").mkdir()
    res = await run("bash", {"command": "pwd", "cwd": "sub"}, make_ctx(tmp_path))
    assert res.output.splitlines()[0] == os.path.realpath(tmp_path / "sub")


async def test_exec_cwd_outside_the_workspace_is_refused_without_a_grant(tmp_path):
    (tmp_path / "ws").mkdir()
    with pytest.raises(ToolFailure) as err:
        await run("bash", {"command": "pwd", "cwd": str(tmp_path)}, make_ctx(tmp_path / "ws"))
    assert err.value.error_type == "PathOutsideWorkspace"


async def test_exec_cwd_that_does_not_exist_says_so(tmp_path):
    with pytest.raises(ToolFailure, match="not an existing directory"):
        await run("bash", {"command": "pwd", "cwd": "nope"}, make_ctx(tmp_path))


async def test_exec_timeout_kills_everything_it_started_setsid_included(tmp_path):
    m = marker()
    res = await run("bash", {"command": f"setsid sleep {m} & sleep {m}", "timeoutMs": 300}, make_ctx(tmp_path))
    assert res.raw_output["timedOut"] is True and res.is_error
    assert "timed out" in res.output
    assert survivors(m) == []  # not the shell's sleep, not the one that left the process group
    assert res.raw_output["pid"] not in processes._groups


async def test_exec_stops_background_children_left_behind_after_a_normal_exit(tmp_path):
    m = marker()
    res = await run("bash", {"command": f"sleep {m} & (setsid sleep {m} &); echo started"}, make_ctx(tmp_path))
    assert "started" in res.output and res.raw_output["exitCode"] == 0
    assert "left running were stopped" in res.output
    assert survivors(m) == []


async def test_cancelling_an_exec_kills_everything_it_started(tmp_path):
    m = marker()
    ctx = make_ctx(tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "bash", {"command": f"setsid sleep {m} & sleep {m}"}, ctx)
        assert await eventually(lambda: len(survivors(m)) >= 2, 5)
        tg.cancel_scope.cancel()
    assert survivors(m) == []
    assert not processes._groups


async def test_exec_output_keeps_head_and_tail_with_a_marker(tmp_path):
    res = await run("bash", {"command": "seq 1 20000"}, make_ctx(tmp_path))
    assert res.output.startswith("1\n2\n")
    assert "19999\n20000" in res.output
    assert "bytes truncated" in res.output and res.raw_output["truncated"] is True


async def test_exec_environment_drops_the_agents_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("GATEWRIGHT_MODEL", "scripted:x")
    monkeypatch.setenv("HARMLESS_VALUE", "visible")
    res = await run("bash", {"command": "env"}, make_ctx(tmp_path))
    assert "sk-secret-value" not in res.output and "GATEWRIGHT_MODEL" not in res.output
    assert "HARMLESS_VALUE=visible" in res.output


async def test_background_process_start_logs_write_status_stop(tmp_path):
    ctx = make_ctx(tmp_path, session_id="sess_bg1")
    try:
        started = await run("bash", {"action": "start", "command": "echo ready; cat"}, ctx)
        pid = started.raw_output["processId"]
        assert started.raw_output["status"] == "running"
        proc = processes.session_table("sess_bg1").get(pid)
        assert await eventually(lambda: "ready" in proc.log.read(0, 100)[0], 5)
        await run("bash", {"action": "write", "processId": pid, "input": "echoed back\n"}, ctx)
        assert await eventually(lambda: "echoed back" in proc.log.read(0, 100)[0], 5)
        logs = await run("bash", {"action": "logs", "processId": pid, "offset": 6}, ctx)
        assert logs.raw_output["content"] == "echoed back\n" and logs.raw_output["offset"] == 6
        assert logs.raw_output["nextOffset"] == 18
        listed = await run("bash", {"action": "list"}, ctx)
        assert pid in listed.output and "running" in listed.output
        stopped = await run("bash", {"action": "stop", "processId": pid}, ctx)
        assert stopped.raw_output["status"] == "stopped" and proc.exit_code is not None
        status = await run("bash", {"action": "status", "processId": pid}, ctx)
        assert "stopped" in status.output
    finally:
        processes.close_session("sess_bg1")


async def test_logs_read_by_offset_report_dropped_output_and_next_offset():
    log = processes.RingLog(capacity=10)
    log.append("0123456789")
    log.append("abcde")
    text, start, nxt, lost = log.read(0, 100)
    assert (text, start, nxt, lost) == ("56789abcde", 5, 15, True)
    assert log.read(12, 2) == ("cd", 12, 14, False)


async def test_stop_kills_a_process_that_ignores_sigterm(tmp_path):
    ctx = make_ctx(tmp_path, session_id="sess_bg2")
    try:
        started = await run("bash", {"action": "start", "command": "trap '' TERM; echo up; sleep 100"}, ctx)
        table = processes.session_table("sess_bg2")
        proc = table.get(started.raw_output["processId"])
        assert await eventually(lambda: "up" in proc.log.read(0, 10)[0], 5)
        await table.stop(proc.id, grace=0.2)
        assert proc.exit_code is not None
    finally:
        processes.close_session("sess_bg2")


async def test_background_processes_die_when_the_session_closes(tmp_path):
    m = marker()
    ctx = make_ctx(tmp_path, session_id="sess_bg3")
    started = await run("bash", {"action": "start", "command": f"setsid sleep {m} & sleep {m}"}, ctx)
    assert await eventually(lambda: len(survivors(m)) >= 2, 5)
    processes.close_session("sess_bg3")
    assert await eventually(lambda: not survivors(m), 5)
    assert started.raw_output["pid"] not in processes._groups


async def test_unknown_process_id_lists_the_known_ones(tmp_path):
    with pytest.raises(ToolFailure, match="no background process 'proc_x'") as err:
        await run("bash", {"action": "status", "processId": "proc_x"}, make_ctx(tmp_path, session_id="sess_bg4"))
    assert err.value.error_type == "ProcessNotFound"


async def test_exec_through_an_editor_terminal_embeds_it_and_releases_it(tmp_path):
    editor = FakeEditor(can_read=False, can_write=False, can_terminal=True)
    updates = []

    async def progress(partial):
        updates.append(partial)

    res = await run("bash", {"command": "pytest -q"}, make_ctx(tmp_path, editor=editor, progress=progress))
    assert editor.methods() == ["terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"]
    create = editor.calls[0][1]
    # The editor runs the sandbox launcher, which confines the shell the same way a local exec is confined.
    assert create["command"] == sys.executable
    # (an isolated interpreter of the install: tests/security/test_launcher_isolation.py proves what that holds)
    assert create["args"][:3] == ["-I", "-S", "-c"] and "runtime.sandbox.__main__" in create["args"][3]
    assert create["args"][5] == "--spec"
    assert create["args"][7:] == ["--", "/bin/bash", "-c", "pytest -q"]
    assert create["env"]["TMPDIR"].startswith(tempfile.gettempdir())
    assert create["cwd"] == os.path.realpath(tmp_path)
    assert updates[0].content == ({"type": "terminal", "terminalId": "term_1"},)
    assert res.content[0] == {"type": "terminal", "terminalId": "term_1"}
    assert "terminal says hi" in res.output and "[exit code 0]" in res.output


async def test_editor_terminal_exec_is_killed_after_its_timeout(tmp_path):
    editor = FakeEditor(can_read=False, can_write=False, can_terminal=True)
    editor.wait_forever = True
    res = await run("bash", {"command": "sleep 100", "timeoutMs": 100}, make_ctx(tmp_path, editor=editor))
    assert editor.methods() == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]
    assert res.raw_output["timedOut"] is True


async def test_cancelling_an_editor_terminal_exec_kills_and_releases_it(tmp_path):
    editor = FakeEditor(can_read=False, can_write=False, can_terminal=True)
    editor.wait_forever = True
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "bash", {"command": "sleep 100"}, make_ctx(tmp_path, editor=editor))
        with anyio.fail_after(5):
            await editor.waiting.wait()
        tg.cancel_scope.cancel()
    assert editor.methods()[-2:] == ["terminal/kill", "terminal/release"]


async def test_bash_metadata_kind_effect_title_and_paths(tmp_path):
    tool, ws = TOOLS["bash"], Workspace(str(tmp_path))
    assert tool.kind == "execute"
    assert tool.effect({"command": "ls"}) == "execute"
    assert tool.effect({"action": "logs", "processId": "p"}) == "read"
    assert tool.effect({"action": "stop", "processId": "p"}) == "execute"
    assert tool.title({"command": "npm test"}, ws) == "Run npm test"
    assert tool.title({"action": "start", "command": "npm run dev"}, ws) == "Start npm run dev in the background"
    assert tool.paths({"command": "ls", "cwd": "sub"}) == [("sub", True)]
    assert tool.paths({"action": "list"}) == []
    assert tool.timeout_seconds({"command": "x", "timeoutMs": 5000}) == 5
    assert tool.timeout_seconds({"command": "x"}) == 30


async def test_rule_key_binds_the_command_and_its_working_directory(tmp_path):
    tool, ws = TOOLS["bash"], Workspace(str(tmp_path))
    (tmp_path / "a").mkdir()
    assert tool.rule_key({"command": "git status"}, ws) != tool.rule_key({"command": "git status; rm x"}, ws)
    assert tool.rule_key({"command": "make"}, ws) != tool.rule_key({"command": "make", "cwd": "a"}, ws)


async def test_shell_analysis_drives_the_approval_facts(tmp_path):
    from permissions.policy import decide
    from runtime.approval import make_describer
    from runtime.tools.base import ToolCall, ToolRegistry
    from runtime.tools.builtin import builtin_tools

    describe = make_describer(ToolRegistry(builtin_tools()))
    ctx = make_ctx(tmp_path)
    read_only = await describe(ToolCall("c1", "bash", {"command": "ls -la"}, "{}"), ctx)
    assert read_only.facts.proven_read_only and decide(read_only.facts, "safe").action == "allow"
    chained = await describe(ToolCall("c2", "bash", {"command": "git status; rm x"}, "{}"), ctx)
    assert not chained.facts.proven_read_only and chained.facts.dangerous
    assert decide(chained.facts, "auto").action == "ask"
    started = await describe(ToolCall("c3", "bash", {"action": "start", "command": "ls"}, "{}"), ctx)
    assert not started.facts.proven_read_only  # a background process is never "read-only"
    spaced = await describe(ToolCall("c4", "bash", {"command": "ls   -la"}, "{}"), ctx)
    assert spaced.facts.rule_key == read_only.facts.rule_key  # the canonical command is the identity
