"""The OS sandbox under the processes the agent starts: real processes, checked by their effects on disk and on the
network, in every confinement the policy can decide (runtime.sandbox, through runtime.processes.run_exec)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from permissions.confinement import Confinement
from runtime import processes, sandbox
from runtime.mcp.config import SandboxWidening, parse_servers
from runtime.mcp.stdio import server_spec
from runtime.sandbox import baseline_readable, build_spec, session_tmpdir
from runtime.sandbox.launcher_env import launcher_command
from tests.support.sandbox_helpers import marker, survivors

pytestmark = [pytest.mark.timeout(30)]
ROOT = Path(__file__).resolve().parents[2]

needs_landlock = pytest.mark.skipif(not sandbox.support().active, reason="no Landlock on this system")
needs_namespaces = pytest.mark.skipif(not sandbox.support().namespaces, reason="no user namespaces here")


@pytest.fixture
def world(tmp_path):
    """A workspace with a git dir, another project beside it and a home-like dir with keys, all outside it."""
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("print('a')\n")
    other = tmp_path / "other-project"
    other.mkdir()
    (other / ".env").write_text("OTHER_SECRET=1\n")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    return ws.resolve(), other.resolve(), home.resolve()


async def run(
    ws: Path, command: str, confinement: Confinement = Confinement(), *, session: str = "sess_sandbox"
) -> processes.ExecResult:
    spec = build_spec(confinement, [str(ws)], tmpdir=session_tmpdir(session), grace=processes.EXEC_GRACE)
    return await processes.run_exec(
        ["/bin/bash", "-c", command], cwd=str(ws), env=dict(os.environ), timeout=20, spec=spec
    )


# ---- reads ---------------------------------------------------------------------------------------------------------
@needs_landlock
@pytest.mark.anyio
async def test_a_sandboxed_command_reads_nothing_outside_the_workspace_and_the_system(world):
    ws, other, home = world
    res = await run(
        ws,
        f"cat src/a.py; cat /etc/shadow; cat {other}/.env; cat {home}/.ssh/id_rsa; ls {home}; "
        "cat /etc/hostname >/dev/null && echo system-ok",
    )
    assert "print('a')" in res.stdout and "system-ok" in res.stdout
    assert "OTHER_SECRET" not in res.stdout and "PRIVATE KEY" not in res.stdout
    assert res.stderr.count("Permission denied") == 4  # shadow, the other project, the key, the home listing


@needs_landlock
@pytest.mark.anyio
async def test_a_read_approved_for_an_outside_path_is_allowed_and_only_that_one(world):
    ws, other, home = world
    res = await run(
        ws, f"cat {other}/.env; cat {home}/.ssh/id_rsa", Confinement(write=False, extra_read=(str(other / ".env"),))
    )
    assert "OTHER_SECRET=1" in res.stdout and "PRIVATE KEY" not in res.stdout


def test_baseline_readable_covers_the_system_and_toolchains_but_not_secrets(world):
    ws, other, home = world
    assert baseline_readable("/usr/bin/env") and baseline_readable(sys.executable)
    assert not baseline_readable("/etc/shadow")
    assert not baseline_readable(str(other / ".env"))
    assert not baseline_readable(os.path.expanduser("~/.ssh/id_rsa"))
    assert not baseline_readable(os.path.expanduser("~"))


# ---- writes --------------------------------------------------------------------------------------------------------
@needs_landlock
@pytest.mark.anyio
async def test_a_command_writes_the_workspace_and_its_temp_dir_and_nothing_else(world, tmp_path):
    ws, other, _ = world
    res = await run(
        ws,
        f'echo w > src/new.txt; echo t > "$TMPDIR/t"; echo o > {other}/pwned; echo o > /tmp/pwned-$$; '
        "echo h > .git/hooks/pre-commit; mkdir .git/x; echo c >> .git/config; rm -rf .git; "
        "echo $TMPDIR",
    )
    tmpdir = session_tmpdir("sess_sandbox")
    assert (ws / "src" / "new.txt").read_text() == "w\n" and (Path(tmpdir) / "t").read_text() == "t\n"
    assert res.stdout.strip() == tmpdir
    assert not (other / "pwned").exists()
    assert not (ws / ".git" / "hooks" / "pre-commit").exists() and not (ws / ".git" / "x").exists()
    assert (ws / ".git" / "hooks").is_dir() and not (ws / ".git" / "config").exists()


@needs_landlock
@pytest.mark.anyio
async def test_a_proven_read_only_command_writes_nothing_not_even_the_workspace(world):
    ws, _, _ = world
    res = await run(
        ws,
        'echo x > new.txt; echo t > "$TMPDIR/t"; rm src/a.py; touch src/b',
        Confinement(write=False),
        session="sess_ro",
    )
    assert res.exit_code != 0
    assert not (ws / "new.txt").exists() and (ws / "src" / "a.py").exists() and not (ws / "src" / "b").exists()
    assert not (Path(session_tmpdir("sess_ro")) / "t").exists()


@needs_landlock
@pytest.mark.anyio
async def test_a_write_approved_for_a_protected_or_outside_path_reaches_exactly_it(world):
    ws, other, _ = world
    (ws / ".git" / "config").write_text("[core]\n")
    res = await run(
        ws,
        f"echo '# ok' >> .git/config; echo o > {other}/approved; echo h > .git/hooks/x; echo n > {other}/.env",
        Confinement(extra_write=(str(ws / ".git" / "config"), str(other / "approved"))),
    )
    assert (ws / ".git" / "config").read_text() == "[core]\n# ok\n"
    assert (other / "approved").read_text() == "o\n"
    # the approved new file was granted through its directory (Landlock grants existing inodes only)
    assert not (ws / ".git" / "hooks" / "x").exists()
    assert ("Read-only file system" if sandbox.support().namespaces else "Permission denied") in res.stderr


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


@pytest.fixture
def worktree(tmp_path):
    """A git worktree whose repository (gitdir and common dir) lives outside it, in the main checkout."""
    main = tmp_path / "main"
    main.mkdir()
    subprocess.run([*GIT, "init", "-q", str(main)], check=True)
    (main / "f").write_text("1\n")
    subprocess.run([*GIT, "-C", str(main), "add", "f"], check=True)
    subprocess.run([*GIT, "-C", str(main), "commit", "-qm", "one"], check=True)
    wt = (tmp_path / "wt").resolve()
    subprocess.run([*GIT, "-C", str(main), "worktree", "add", "-q", str(wt)], check=True)
    (wt / "g").write_text("2\n")
    return wt


@needs_landlock
@pytest.mark.anyio
async def test_git_works_in_a_worktree_whose_repository_lives_outside_and_writes_it_only_when_approved(worktree):
    wt, git = worktree, GIT
    status = await run(wt, "git status --short --branch && echo ok")
    assert status.stdout.strip().endswith("ok"), status.stderr
    commit = f"{' '.join(git)} add g && {' '.join(git)} commit -qm two && echo committed"
    refused = await run(wt, commit)
    assert "committed" not in refused.stdout
    approved = await run(wt, commit, Confinement(extra_write=(str(wt / ".git"),)))
    assert "committed" in approved.stdout, approved.stderr


# ---- network -------------------------------------------------------------------------------------------------------
@pytest.fixture
def tcp_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(1)
            conn.sendall(b"hello\n")
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted
    srv.close()


@needs_landlock
@pytest.mark.anyio
async def test_without_network_a_command_cannot_reach_a_local_tcp_server(world, tcp_server):
    ws, _, _ = world
    port, accepted = tcp_server
    res = await run(ws, f"exec 3<>/dev/tcp/127.0.0.1/{port} && head -1 <&3")
    assert res.exit_code != 0 and "hello" not in res.stdout and accepted == []


@needs_landlock
@pytest.mark.anyio
async def test_with_network_the_same_command_reaches_it(world, tcp_server):
    ws, _, _ = world
    port, accepted = tcp_server
    res = await run(ws, f"exec 3<>/dev/tcp/127.0.0.1/{port} && head -1 <&3", Confinement(network=True))
    assert res.stdout.strip() == "hello" and accepted == [1]


# ---- the agent's process ---------------------------------------------------------------------------------------------
@needs_landlock
@pytest.mark.anyio
async def test_a_sandboxed_command_cannot_open_or_signal_the_process_that_started_it(world):
    ws, _, _ = world
    me = os.getpid()
    res = await run(
        ws,
        f"echo forged > /proc/{me}/fd/0 && echo wrote; head -c 1 /proc/{me}/environ && "
        f"echo read; kill -0 {me} && echo signalled; ls /proc | grep -qx {me} && echo visible; "
        "echo done",
        Confinement(network=True),
    )
    # Without a pid namespace the agent is visible in /proc; Landlock still keeps it from being opened or signalled.
    assert res.stdout.split() == ["done"] if sandbox.support().namespaces else ["visible", "done"]


@needs_namespaces
@pytest.mark.anyio
async def test_a_command_cannot_forge_its_own_end_through_the_init_of_its_sandbox(world):
    """The init reports the command's status to the agent on a pipe: the command can neither inherit it, nor open
    it through /proc/1/fd, nor read the init's memory or environment."""
    ws, _, _ = world
    res = await run(
        ws,
        "for f in /proc/1/fd/*; do (printf 'S0\\n' > $f) 2>/dev/null && echo wrote $f; done; "
        "head -c 1 /proc/1/mem 2>/dev/null && echo mem; head -c 1 /proc/1/environ 2>/dev/null && "
        "echo env; ls /proc/self/fd | wc -l; exit 3",
    )
    assert res.exit_code == 3
    assert "wrote" not in res.stdout and "mem" not in res.stdout and "env" not in res.stdout


# ---- containment ---------------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_setsid_and_double_forked_children_are_gone_when_exec_returns(world):
    ws, _, _ = world
    m = marker()
    res = await run(ws, f"setsid sleep {m} & (setsid sleep {m} &); (sleep {m} &) ; echo started")
    assert "started" in res.stdout and res.leftovers_killed
    assert survivors(m) == []


@pytest.mark.anyio
async def test_output_written_by_leftovers_within_the_drain_grace_is_kept(world):
    ws, _, _ = world
    res = await run(ws, "(sleep 0.05; echo late) & echo early")
    assert res.stdout.split() == ["early", "late"]


@pytest.mark.anyio
async def test_a_background_process_keeps_what_it_started_until_stopped_and_then_loses_all_of_it(world):
    ws, _, _ = world
    m = marker()
    spec = build_spec(Confinement(), [str(ws)], tmpdir=session_tmpdir("sess_bg_sb"), grace=None)
    table = processes.ProcessTable("sess_bg_sb")
    proc = table.start(
        ["/bin/bash", "-c", f"setsid sleep {m} & echo up"], command="x", cwd=str(ws), env=dict(os.environ), spec=spec
    )
    try:
        with anyio.fail_after(5):
            while not survivors(m) or proc.status != "running":  # noqa: ASYNC110 - another process's state
                await anyio.sleep(0.01)
        await table.stop(proc.id, grace=0.3)
        assert proc.status == "stopped" and survivors(m) == []
    finally:
        table.kill_all()


# ---- modes of the system -------------------------------------------------------------------------------------------
def test_status_names_the_landlock_abi_and_namespaces():
    text = sandbox.support().describe()
    assert text.startswith("sandbox: ")
    if sandbox.support().active:
        assert f"Landlock ABI {sandbox.support().landlock_abi}" in text


@pytest.mark.anyio
async def test_gatewright_sandbox_off_runs_commands_unconfined_and_still_contained(world, monkeypatch):
    ws, other, _ = world
    monkeypatch.setenv("GATEWRIGHT_SANDBOX", "off")
    m = marker()
    res = await run(ws, f"cat {other}/.env; setsid sleep {m} & echo ok")
    assert "OTHER_SECRET=1" in res.stdout
    assert survivors(m) == []  # the marker sweep found the process that left the group


@needs_landlock
@pytest.mark.anyio
async def test_landlock_without_namespaces_keeps_protected_paths_read_only_and_says_why_new_root_files_fail(
    world, monkeypatch
):
    ws, _, _ = world
    monkeypatch.setenv("GATEWRIGHT_SANDBOX", "landlock")
    notes: list[str] = []
    spec = build_spec(Confinement(), [str(ws)], tmpdir=session_tmpdir("sess_sandbox"), grace=0.3)
    res = await processes.run_exec(
        ["/bin/bash", "-c", "echo h > .git/hooks/x; echo y > src/ok; echo r > root.txt"],
        cwd=str(ws),
        env=dict(os.environ),
        timeout=20,
        spec=spec,
        note=notes,
    )
    assert (ws / "src" / "ok").exists()
    assert not (ws / ".git" / "hooks" / "x").exists() and not (ws / "root.txt").exists()
    assert any("new files directly in" in n for n in notes)
    assert res.exit_code != 0


# ---- the editor-terminal launcher ----------------------------------------------------------------------------------
def _launch(ws: Path, command: str, confinement: Confinement = Confinement()) -> subprocess.CompletedProcess[str]:
    spec = build_spec(confinement, [str(ws)], tmpdir=session_tmpdir("sess_sandbox"), grace=0.3)
    exe, args = launcher_command(spec, ["/bin/bash", "-c", command])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([exe, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=30)


@needs_landlock
def test_the_editor_terminal_launcher_confines_the_command_the_same_way(world):
    ws, other, _ = world
    m = marker()
    p = _launch(ws, f"cat {other}/.env; echo h > .git/hooks/x; echo w > src/ok.txt; setsid sleep {m} & exit 5")
    assert p.returncode == 5
    assert "OTHER_SECRET" not in p.stdout and (ws / "src" / "ok.txt").exists()
    assert not (ws / ".git" / "hooks" / "x").exists()
    assert survivors(m) == []


def test_the_launcher_refuses_to_run_a_command_without_a_spec(world):
    ws, _, _ = world
    p = subprocess.run(
        [sys.executable, "-m", "runtime.sandbox", "--", "/bin/bash", "-c", "touch ran"],
        cwd=ws,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 126 and "refusing" in p.stderr and not (ws / "ran").exists()


# ---- MCP servers ---------------------------------------------------------------------------------------------------
def test_an_mcp_entry_widens_its_servers_sandbox_in_meta_and_a_bad_value_refuses_the_server(tmp_path):
    entries = [
        {
            "name": "a",
            "command": "srv",
            "_meta": {"gatewright": {"sandbox": {"read": ["~/data"], "write": ["out"], "network": False}}},
        },
        {"name": "b", "command": "srv", "_meta": {"gatewright": {"sandbox": {"read": "/etc"}}}},
    ]
    specs, problems = parse_servers(entries, {"id": "s", "cwd": str(tmp_path)})
    assert specs[0].sandbox == SandboxWidening(
        (os.path.realpath(os.path.expanduser("~/data")),), (os.path.realpath(tmp_path / "out"),), False
    )
    assert [p.name for p in problems] == ["b"]


@needs_landlock
@pytest.mark.anyio
async def test_an_mcp_server_reads_its_own_install_dir_and_the_widened_paths_only(world, tmp_path):
    ws, other, home = world
    tool_dir = tmp_path / "tool"
    tool_dir.mkdir()
    (tool_dir / "data.txt").write_text("tool-data\n")
    script = tool_dir / "srv.py"
    script.write_text(
        f"import pathlib\nprint(pathlib.Path({str(tool_dir / 'data.txt')!r}).read_text().strip())\n"
        f"print(pathlib.Path({str(other / '.env')!r}).read_text().strip())\n"
        f"print(pathlib.Path({str(home / '.ssh' / 'id_rsa')!r}).read_text().strip())\n"
    )
    spec = server_spec(
        sys.executable,
        [str(script)],
        str(ws),
        os.environ,
        session_tmpdir("sess_mcp"),
        SandboxWidening(read=(str(other / ".env"),)),
    )
    res = await processes.run_exec(
        [sys.executable, str(script)], cwd=str(ws), env=dict(os.environ), timeout=20, spec=spec
    )
    assert res.stdout.splitlines() == ["tool-data", "OTHER_SECRET=1"]
    assert "PermissionError" in res.stderr  # the key stays out of reach


def test_the_spec_has_a_json_form_the_helper_reads_back(world):
    ws, _, _ = world
    spec = build_spec(Confinement(network=True), [str(ws)], tmpdir=session_tmpdir("sess_sandbox"), grace=0.3)
    assert sandbox.SandboxSpec.from_json(spec.to_json()) == spec
    assert json.loads(spec.to_json())["protected"] == [str(ws / ".git")]


@pytest.mark.anyio
async def test_if_the_sandbox_helper_dies_everything_it_started_dies_and_the_next_command_gets_a_new_one(world):
    from runtime.sandbox.client import Spawner

    ws, _, _ = world
    m = marker()
    table = processes.ProcessTable("sess_helper_death")
    table.start(
        ["/bin/bash", "-c", f"setsid sleep {m} & sleep {m}"],
        command="x",
        cwd=str(ws),
        env=dict(os.environ),
        spec=build_spec(Confinement(), [str(ws)], tmpdir=None, grace=None),
    )
    try:
        with anyio.fail_after(5):
            while len(survivors(m)) < 3:  # noqa: ASYNC110 - another process's state
                await anyio.sleep(0.01)
        helper = Spawner.get().proc
        helper.kill()
        helper.wait(5)
        with anyio.fail_after(5):
            while survivors(m):  # noqa: ASYNC110 - another process's state
                await anyio.sleep(0.01)
        res = await run(ws, "echo again")
        assert res.stdout == "again\n" and Spawner.get().proc is not helper
    finally:
        table.kill_all()
