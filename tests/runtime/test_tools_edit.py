"""edit: exact unique replacement, clear errors, line endings kept, diff content, compare-before-write, one
read per call, and no write over a file that changed since the model read it."""

from __future__ import annotations

import os

import pytest

from runtime.tools.base import ToolFailure
from tests.support.tools_helpers import TOOLS, FakeEditor, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]


async def test_edit_replaces_a_unique_match_and_returns_the_diff(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("def f():\n    return 1\n")
    res = await run("edit", {"path": "a.py", "old_string": "return 1", "new_string": "return 2"}, make_ctx(tmp_path))
    assert f.read_text() == "def f():\n    return 2\n"
    assert res.content == (
        {
            "type": "diff",
            "path": str(f.resolve()),
            "oldText": "def f():\n    return 1\n",
            "newText": "def f():\n    return 2\n",
        },
    )
    assert res.locations == ({"path": str(f.resolve()), "line": 2},)
    assert "-    return 1" in res.output and "+    return 2" in res.output


async def test_edit_with_no_match_says_to_copy_the_exact_text(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    with pytest.raises(ToolFailure, match="old_string was not found in a.txt") as err:
        await run("edit", {"path": "a.txt", "old_string": "beta", "new_string": "gamma"}, make_ctx(tmp_path))
    assert err.value.error_type == "NoMatch"


async def test_edit_with_several_matches_counts_them_and_suggests_context(tmp_path):
    (tmp_path / "a.txt").write_text("x = 1\nx = 1\nx = 1\n")
    with pytest.raises(ToolFailure, match="found 3 occurrences.*more surrounding lines.*replaceAll") as err:
        await run("edit", {"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"}, make_ctx(tmp_path))
    assert err.value.error_type == "AmbiguousMatch"
    assert (tmp_path / "a.txt").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_edit_replace_all_changes_every_occurrence(tmp_path):
    (tmp_path / "a.txt").write_text("x = 1\nx = 1\n")
    res = await run(
        "edit", {"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replaceAll": True}, make_ctx(tmp_path)
    )
    assert (tmp_path / "a.txt").read_text() == "x = 2\nx = 2\n"
    assert res.raw_output["replacements"] == 2


async def test_edit_with_identical_strings_is_an_error(tmp_path):
    (tmp_path / "a.txt").write_text("same\n")
    with pytest.raises(ToolFailure, match="identical") as err:
        await run("edit", {"path": "a.txt", "old_string": "same", "new_string": "same"}, make_ctx(tmp_path))
    assert err.value.error_type == "NoChange"


async def test_edit_of_a_missing_file_says_it_does_not_exist(tmp_path):
    with pytest.raises(ToolFailure, match="does not exist") as err:
        await run("edit", {"path": "nope.txt", "old_string": "a", "new_string": "b"}, make_ctx(tmp_path))
    assert err.value.error_type == "FileNotFound"


async def test_edit_keeps_crlf_line_endings_when_the_model_wrote_lf(tmp_path):
    f = tmp_path / "win.txt"
    f.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await run("edit", {"path": "win.txt", "old_string": "one\ntwo", "new_string": "uno\ndos"}, make_ctx(tmp_path))
    assert f.read_bytes() == b"uno\r\ndos\r\nthree\r\n"


async def test_edit_keeps_the_file_mode_and_undecodable_bytes(tmp_path):
    f = tmp_path / "run.sh"
    f.write_bytes(b"#!/bin/sh\necho \xff\xfe\n")
    os.chmod(f, 0o755)
    await run("edit", {"path": "run.sh", "old_string": "#!/bin/sh", "new_string": "#!/bin/bash"}, make_ctx(tmp_path))
    assert f.read_bytes() == b"#!/bin/bash\necho \xff\xfe\n"
    assert os.stat(f).st_mode & 0o777 == 0o755


async def test_edit_refuses_binary_files(tmp_path):
    (tmp_path / "b.bin").write_bytes(b"\x00\x01abc")
    with pytest.raises(ToolFailure) as err:
        await run("edit", {"path": "b.bin", "old_string": "abc", "new_string": "x"}, make_ctx(tmp_path))
    assert err.value.error_type == "BinaryFile"


async def test_edit_preview_shows_the_diff_before_approval(tmp_path):
    (tmp_path / "a.txt").write_text("old\n")
    content = await TOOLS["edit"].preview(
        {"path": "a.txt", "old_string": "old", "new_string": "new"}, make_ctx(tmp_path)
    )
    assert content[0]["oldText"] == "old\n" and content[0]["newText"] == "new\n"
    assert (tmp_path / "a.txt").read_text() == "old\n"


async def test_edit_through_the_editor_reads_its_buffer_and_writes_through_it(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("on disk\n")
    editor = FakeEditor()
    editor.buffers[str(f.resolve())] = "unsaved buffer\n"
    await run(
        "edit", {"path": "a.txt", "old_string": "unsaved", "new_string": "edited"}, make_ctx(tmp_path, editor=editor)
    )
    assert editor.buffers[str(f.resolve())] == "edited buffer\n"
    assert f.read_text() == "on disk\n"  # the editor owns the write
    assert "fs/write_text_file" in editor.methods()


async def test_edit_through_the_editor_refuses_to_clobber_typing_done_after_the_model_read(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("v1\n")
    editor = FakeEditor()
    key = str(f.resolve())
    editor.buffers[key] = "v1\n"
    ctx = make_ctx(tmp_path, editor=editor)
    await run("read_file", {"path": "a.txt"}, ctx)
    editor.buffers[key] = "v1 plus the user's typing\n"  # the user types between two tool calls
    with pytest.raises(ToolFailure, match="changed since you last read it.*read it again") as err:
        await run("edit", {"path": "a.txt", "old_string": "v1", "new_string": "v2"}, ctx)
    assert err.value.error_type == "FileChanged"
    assert editor.buffers[key] == "v1 plus the user's typing\n"
    assert "fs/write_text_file" not in editor.methods()
    # Once read again, the edit goes through.
    await run("read_file", {"path": "a.txt"}, ctx)
    await run("edit", {"path": "a.txt", "old_string": "v1", "new_string": "v2"}, ctx)
    assert editor.buffers[key] == "v2 plus the user's typing\n"


async def test_one_edit_reads_the_file_once_through_the_editor_preview_included(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one\n")
    editor = FakeEditor()
    ctx = make_ctx(tmp_path, editor=editor)
    args = {"path": "a.txt", "old_string": "one", "new_string": "two"}
    tool = TOOLS["edit"]
    await tool.precheck(args, ctx)  # what the approval describer does before asking
    assert (await tool.preview(args, ctx))[0]["newText"] == "two\n"
    await run("edit", args, ctx)
    assert editor.methods() == ["fs/read_text_file", "fs/write_text_file"]
    assert editor.buffers[str(f.resolve())] == "two\n"


async def test_a_second_edit_in_the_same_call_scratch_reads_again_after_this_session_wrote(tmp_path):
    (tmp_path / "a.txt").write_text("a b\n")
    editor = FakeEditor()
    ctx = make_ctx(tmp_path, editor=editor)
    await run("edit", {"path": "a.txt", "old_string": "a", "new_string": "x"}, ctx)
    await run("edit", {"path": "a.txt", "old_string": "b", "new_string": "y"}, ctx)
    assert editor.buffers[str((tmp_path / "a.txt").resolve())] == "x y\n"
    assert editor.methods().count("fs/read_text_file") == 2


async def test_edit_on_disk_refuses_a_file_a_command_rewrote_after_the_model_read_it(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("v1\n")
    ctx = make_ctx(tmp_path)
    await run("read_file", {"path": "a.txt"}, ctx)
    f.write_text("v1, and a formatter rewrote this line\n")
    with pytest.raises(ToolFailure, match="changed since you last read it") as err:
        await run("edit", {"path": "a.txt", "old_string": "v1", "new_string": "v2"}, ctx)
    assert err.value.error_type == "FileChanged"
    assert f.read_text() == "v1, and a formatter rewrote this line\n"


async def test_edit_needs_no_earlier_read_and_its_own_write_counts_as_seen(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("v1\n")
    ctx = make_ctx(tmp_path)
    await run("edit", {"path": "a.txt", "old_string": "v1", "new_string": "v2"}, ctx)
    await run("edit", {"path": "a.txt", "old_string": "v2", "new_string": "v3"}, ctx)
    await run("write_file", {"path": "a.txt", "content": "v4\n"}, ctx)
    assert f.read_text() == "v4\n"


async def test_edit_metadata_kind_title_and_rule_key(tmp_path):
    from runtime.workspace import Workspace

    tool, ws = TOOLS["edit"], Workspace(str(tmp_path))
    assert tool.kind == "edit" and tool.effect({}) == "write"
    assert tool.title({"path": "src/a.py"}, ws) == "Edit src/a.py"
    assert tool.paths({"path": "a"}) == [("a", True)]
