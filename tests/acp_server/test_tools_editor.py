"""The editor bridge: only advertised methods, 1-based line/limit, boundary first; and write atomicity under kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from acp_server.editor import AcpEditorBridge
from acp_server.protocol.schema import ClientCapabilities
from runtime.tools.base import ToolFailure
from runtime.tools.builtin.textio import EditorError
from tests.support.tools_helpers import FakeEditor, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]


def caps(wire: dict) -> ClientCapabilities:
    """`clientCapabilities` as `initialize` reads it."""
    return ClientCapabilities.from_wire(wire)


class RecordingConn:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    async def request(self, method, params):
        self.sent.append((method, params))
        return {"content": "x"} if method == "fs/read_text_file" else {"terminalId": "t1"}


async def test_a_bridge_exists_only_for_capabilities_the_client_advertised():
    conn = RecordingConn()
    assert AcpEditorBridge.from_capabilities(conn, "s", caps({})) is None
    assert AcpEditorBridge.from_capabilities(conn, "s", caps({"fs": {"readTextFile": "yes"}, "terminal": 1})) is None
    bridge = AcpEditorBridge.from_capabilities(conn, "s", caps({"fs": {"readTextFile": True}}))
    assert bridge is not None and bridge.can_read and not bridge.can_write and not bridge.can_terminal
    with pytest.raises(EditorError, match="did not offer fs/write_text_file"):
        await bridge.write_text_file("/x", "y")
    with pytest.raises(EditorError, match="did not offer terminal/create"):
        await bridge.create_terminal("/bin/bash", ["-c", "ls"], "/", {}, 100)
    assert conn.sent == []
    assert await bridge.read_text_file("/x", 3, 2) == "x"
    assert conn.sent == [("fs/read_text_file", {"sessionId": "s", "path": "/x", "line": 3, "limit": 2})]


async def test_terminal_create_sends_bash_argv_cwd_env_list_and_output_limit():
    conn = RecordingConn()
    bridge = AcpEditorBridge.from_capabilities(conn, "s", caps({"terminal": True}))
    assert await bridge.create_terminal("/bin/bash", ["-c", "ls"], "/ws", {"A": "1"}, 1000) == "t1"
    assert conn.sent[0] == (
        "terminal/create",
        {
            "sessionId": "s",
            "command": "/bin/bash",
            "args": ["-c", "ls"],
            "cwd": "/ws",
            "env": [{"name": "A", "value": "1"}],
            "outputByteLimit": 1000,
        },
    )


async def test_read_file_through_the_editor_asks_for_the_line_range_and_numbers_it(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("1\n2\n3\n4\n5\n")
    editor = FakeEditor(can_write=False)
    editor.buffers[str(f.resolve())] = "one\ntwo\nthree\nfour\nfive\n"
    res = await run("read_file", {"path": "a.txt", "startLine": 2, "endLine": 3}, make_ctx(tmp_path, editor=editor))
    assert editor.calls == [("fs/read_text_file", {"path": str(f.resolve()), "line": 2, "limit": 2})]
    assert res.output == "     2\ttwo\n     3\tthree\n"


async def test_read_file_through_the_editor_checks_the_boundary_first(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "secret").write_text("s\n")
    editor = FakeEditor()
    with pytest.raises(ToolFailure) as err:
        await run("read_file", {"path": "../secret"}, make_ctx(tmp_path / "ws", editor=editor))
    assert err.value.error_type == "PathOutsideWorkspace"
    assert editor.calls == []


async def test_write_file_through_the_editor_sends_an_absolute_path_and_shows_the_old_text(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("old\n")
    editor = FakeEditor()
    ctx = make_ctx(tmp_path, editor=editor)
    await run("read_file", {"path": "a.txt"}, ctx)
    res = await run("write_file", {"path": "a.txt", "content": "new\n"}, ctx)
    assert editor.buffers[str(f.resolve())] == "new\n"
    assert res.content[0]["oldText"] == "old\n" and res.content[0]["newText"] == "new\n"
    res = await run(
        "write_file", {"path": "sub/b.txt", "content": "b\n", "mode": "create"}, make_ctx(tmp_path, editor=editor)
    )
    assert editor.calls[-1] == ("fs/write_text_file", {"path": str(tmp_path.resolve() / "sub/b.txt"), "content": "b\n"})
    assert (tmp_path / "sub").is_dir()


WRITER = textwrap.dedent("""
    import sys
    from runtime.workspace import Workspace
    ws = Workspace(sys.argv[1])
    r = ws.resolve("big.txt")
    data = [b"A" * 4_000_000, b"B" * 4_000_000]
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    i = 0
    while True:
        ws.write_atomic(r, data[i % 2])
        i += 1
""")


async def test_a_writer_killed_mid_write_leaves_the_old_or_the_new_content_never_a_torn_file(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"A" * 4_000_000)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    for delay in (0.01, 0.03, 0.05, 0.08, 0.13):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        await anyio.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        data = (tmp_path / "big.txt").read_bytes()
        assert data in (b"A" * 4_000_000, b"B" * 4_000_000)
    leftovers = [p for p in os.listdir(tmp_path) if p != "big.txt"]
    assert all(p.endswith(".tmp") for p in leftovers)  # an interrupted temp file never replaces the real one
