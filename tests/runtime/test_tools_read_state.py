"""What the model has seen of each file in a session decides whether a write may go over it: `write_file` does not
overwrite an existing file the model never read, and no write (`write_file`, `edit`, `apply_patch`) goes over a file
that changed since the model last read or wrote it. Creating, appending and the model's own writes stay free."""

from __future__ import annotations

import pytest

from runtime.tools.base import ToolFailure
from tests.support.tools_helpers import TOOLS, FakeEditor, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

PATCH = "*** Begin Patch\n*** Update File: a.txt\n-one\n+uno\n*** End Patch"


async def test_write_file_refuses_to_overwrite_an_existing_file_the_model_never_read(tmp_path):
    (tmp_path / "a.txt").write_text("precious\n")
    ctx = make_ctx(tmp_path)
    with pytest.raises(ToolFailure, match="you have not read it in this session: read it with read_file") as err:
        await run("write_file", {"path": "a.txt", "content": "blind\n"}, ctx)
    assert err.value.error_type == "NotRead"
    assert (tmp_path / "a.txt").read_text() == "precious\n"
    # The same refusal comes before any question: the approval describer calls precheck.
    with pytest.raises(ToolFailure):
        await TOOLS["write_file"].precheck({"path": "a.txt", "content": "blind\n"}, ctx)


async def test_creating_appending_and_overwriting_what_the_model_wrote_or_read_are_allowed(tmp_path):
    (tmp_path / "log.txt").write_text("one\n")
    (tmp_path / "seen.txt").write_text("old\n")
    ctx = make_ctx(tmp_path)
    await run("write_file", {"path": "new.txt", "content": "1\n"}, ctx)
    await run("write_file", {"path": "new.txt", "content": "2\n"}, ctx)  # its own write counts as seen
    await run("write_file", {"path": "log.txt", "content": "two\n", "mode": "append"}, ctx)
    await run("read_file", {"path": "seen.txt", "startLine": 1, "endLine": 1}, ctx)  # a partial read counts
    await run("write_file", {"path": "seen.txt", "content": "new\n"}, ctx)
    assert [(tmp_path / n).read_text() for n in ("new.txt", "log.txt", "seen.txt")] == ["2\n", "one\ntwo\n", "new\n"]
    # An append to a file it never read does not make the model know the file.
    with pytest.raises(ToolFailure) as err:
        await run("write_file", {"path": "log.txt", "content": "blind\n"}, ctx)
    assert err.value.error_type == "NotRead"


async def test_write_file_refuses_a_file_changed_on_disk_since_the_model_read_it(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("v1\n")
    ctx = make_ctx(tmp_path)
    await run("read_file", {"path": "a.txt"}, ctx)
    f.write_text("v1 and more\n")
    with pytest.raises(ToolFailure, match="changed since you last read it") as err:
        await TOOLS["write_file"].precheck({"path": "a.txt", "content": "v2\n"}, ctx)
    assert err.value.error_type == "FileChanged"
    with pytest.raises(ToolFailure):
        await run("write_file", {"path": "a.txt", "content": "v2\n"}, ctx)
    assert f.read_text() == "v1 and more\n"
    await run("read_file", {"path": "a.txt"}, ctx)
    await run("write_file", {"path": "a.txt", "content": "v2\n"}, ctx)
    assert f.read_text() == "v2\n"


async def test_a_file_deleted_since_the_read_may_be_written_again(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("v1\n")
    ctx = make_ctx(tmp_path)
    await run("read_file", {"path": "a.txt"}, ctx)
    f.unlink()
    await run("write_file", {"path": "a.txt", "content": "v2\n"}, ctx)
    assert f.read_text() == "v2\n"


async def test_apply_patch_refuses_a_file_changed_since_the_model_read_it_and_changes_nothing(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("bee\n")
    ctx = make_ctx(tmp_path)
    await run("read_file", {"path": "a.txt"}, ctx)
    (tmp_path / "a.txt").write_text("one\nand a line the user added\n")
    patch = "*** Begin Patch\n*** Delete File: b.txt\n*** Update File: a.txt\n-one\n+uno\n*** End Patch"
    with pytest.raises(ToolFailure, match="a.txt changed since you last read it") as err:
        await TOOLS["apply_patch"].precheck({"patch": patch}, ctx)
    assert err.value.error_type == "FileChanged"
    with pytest.raises(ToolFailure):
        await run("apply_patch", {"patch": patch}, ctx)
    assert (tmp_path / "b.txt").exists()
    assert (tmp_path / "a.txt").read_text() == "one\nand a line the user added\n"


async def test_apply_patch_needs_no_earlier_read_and_its_writes_count_as_seen(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    ctx = make_ctx(tmp_path)
    await run("apply_patch", {"patch": PATCH}, ctx)
    await run("write_file", {"path": "a.txt", "content": "overwritten\n"}, ctx)
    assert (tmp_path / "a.txt").read_text() == "overwritten\n"


async def test_a_range_read_through_the_editor_guards_its_lines_and_the_disk(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one\ntwo\nthree\n")
    key = str(f.resolve())
    editor = FakeEditor()
    editor.buffers[key] = "one\ntwo\nthree\n"
    ctx = make_ctx(tmp_path, editor=editor)
    await run("read_file", {"path": "a.txt", "startLine": 2, "endLine": 2}, ctx)
    editor.buffers[key] = "one\nTWO typed\nthree\n"  # the user types in the lines the model saw
    with pytest.raises(ToolFailure) as err:
        await run("edit", {"path": "a.txt", "old_string": "three", "new_string": "3"}, ctx)
    assert err.value.error_type == "FileChanged"
    await run("read_file", {"path": "a.txt", "startLine": 2, "endLine": 2}, ctx)
    f.write_text("one\ntwo\nthree\nfour\n")  # a command rewrote the file on disk
    with pytest.raises(ToolFailure) as err:
        await run("edit", {"path": "a.txt", "old_string": "three", "new_string": "3"}, ctx)
    assert err.value.error_type == "FileChanged"
    assert "fs/write_text_file" not in editor.methods()


async def test_a_path_outside_the_workspace_is_not_read_by_the_precheck(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (tmp_path / "ws").mkdir()
    editor = FakeEditor()
    ctx = make_ctx(tmp_path / "ws", editor=editor)
    for name, args in (
        ("write_file", {"path": str(outside), "content": "x"}),
        ("edit", {"path": str(outside), "old_string": "secret", "new_string": "x"}),
        ("apply_patch", {"patch": f"*** Begin Patch\n*** Delete File: {outside}\n*** End Patch"}),
    ):
        await TOOLS[name].precheck(args, ctx)
    assert editor.calls == []
