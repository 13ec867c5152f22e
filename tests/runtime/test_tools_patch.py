"""apply_patch: envelope parsing, anchors, all-or-nothing, line endings, moves, errors naming file and hunk."""

from __future__ import annotations

import os

import pytest

from runtime.tools.base import ToolFailure
from runtime.tools.builtin import patch as patch_mod
from runtime.tools.builtin import textio
from runtime.workspace import Workspace
from tests.support.tools_helpers import TOOLS, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]


def P(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


async def test_patch_adds_updates_and_deletes_files_in_one_call(tmp_path):
    (tmp_path / "a.py").write_text("def a():\n    return 1\n\n\ndef b():\n    return 2\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    res = await run(
        "apply_patch",
        {
            "patch": P(
                "*** Add File: new/n.txt",
                "+hello",
                "+world",
                "*** Update File: a.py",
                "@@ def b():",
                "-    return 2",
                "+    return 3",
                "*** Delete File: gone.txt",
            )
        },
        make_ctx(tmp_path),
    )
    assert (tmp_path / "new/n.txt").read_text() == "hello\nworld\n"
    assert (tmp_path / "a.py").read_text() == "def a():\n    return 1\n\n\ndef b():\n    return 3\n"
    assert not (tmp_path / "gone.txt").exists()
    assert "A new/n.txt" in res.output and "M a.py (+1 -1)" in res.output and "D gone.txt" in res.output
    diffs = {c["path"]: c for c in res.content}
    assert diffs[str(tmp_path.resolve() / "new/n.txt")]["oldText"] is None
    assert diffs[str(tmp_path.resolve() / "gone.txt")]["newText"] == ""


async def test_context_anchor_picks_the_right_one_of_two_identical_hunks(tmp_path):
    (tmp_path / "a.py").write_text("def a():\n    x = 1\n\ndef b():\n    x = 1\n")
    await run(
        "apply_patch",
        {"patch": P("*** Update File: a.py", "@@ def b():", "-    x = 1", "+    x = 2")},
        make_ctx(tmp_path),
    )
    assert (tmp_path / "a.py").read_text() == "def a():\n    x = 1\n\ndef b():\n    x = 2\n"


async def test_hunks_match_despite_trailing_whitespace_differences(tmp_path):
    (tmp_path / "a.txt").write_text("keep   \nold\n")
    await run("apply_patch", {"patch": P("*** Update File: a.txt", " keep", "-old", "+new")}, make_ctx(tmp_path))
    assert (tmp_path / "a.txt").read_text() == "keep   \nnew\n"


async def test_end_of_file_marker_anchors_the_hunk_at_the_end(tmp_path):
    (tmp_path / "a.txt").write_text("x\ny\nx\n")
    await run("apply_patch", {"patch": P("*** Update File: a.txt", "-x", "+z", "*** End of File")}, make_ctx(tmp_path))
    assert (tmp_path / "a.txt").read_text() == "x\ny\nz\n"


async def test_crlf_files_stay_crlf_and_missing_final_newline_stays_missing(tmp_path):
    (tmp_path / "w.txt").write_bytes(b"a\r\nb\r\nc")
    await run("apply_patch", {"patch": P("*** Update File: w.txt", " a", "-b", "+B", "+B2", " c")}, make_ctx(tmp_path))
    assert (tmp_path / "w.txt").read_bytes() == b"a\r\nB\r\nB2\r\nc"


async def test_move_renames_the_file_keeps_its_mode_and_applies_hunks(tmp_path):
    f = tmp_path / "old.sh"
    f.write_text("echo 1\n")
    os.chmod(f, 0o750)
    await run(
        "apply_patch",
        {"patch": P("*** Update File: old.sh", "*** Move to: bin/new.sh", "-echo 1", "+echo 2")},
        make_ctx(tmp_path),
    )
    assert not f.exists()
    assert (tmp_path / "bin/new.sh").read_text() == "echo 2\n"
    assert os.stat(tmp_path / "bin/new.sh").st_mode & 0o777 == 0o750


async def test_a_failing_hunk_changes_nothing_and_names_file_and_hunk(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("two\n")
    with pytest.raises(ToolFailure) as err:
        await run(
            "apply_patch",
            {
                "patch": P(
                    "*** Update File: a.txt",
                    "-one",
                    "+ONE",
                    "*** Add File: c.txt",
                    "+three",
                    "*** Update File: b.txt",
                    "@@",
                    "-two",
                    "+TWO",
                    "@@",
                    "-missing line",
                    "+x",
                )
            },
            make_ctx(tmp_path),
        )
    assert err.value.error_type == "PatchFailed"
    assert "hunk 2 of b.txt did not apply" in err.value.message and "missing line" in err.value.message
    assert "Nothing was changed" in err.value.message
    assert (tmp_path / "a.txt").read_text() == "one\n" and (tmp_path / "b.txt").read_text() == "two\n"
    assert not (tmp_path / "c.txt").exists()


async def test_a_write_failing_half_way_rolls_back_the_files_already_written(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("two\n")
    real_store = textio.store

    async def flaky_store(ctx, before, new_text, **kw):
        if before.resolved.path.endswith("b.txt") and kw.get("verify", True):
            raise ToolFailure("disk full", "WriteFailed")
        return await real_store(ctx, before, new_text, **kw)

    monkeypatch.setattr(textio, "store", flaky_store)
    with pytest.raises(ToolFailure, match="rolled back"):
        await run(
            "apply_patch",
            {
                "patch": P(
                    "*** Update File: a.txt",
                    "-one",
                    "+ONE",
                    "*** Add File: n.txt",
                    "+new",
                    "*** Update File: b.txt",
                    "-two",
                    "+TWO",
                )
            },
            make_ctx(tmp_path),
        )
    assert (tmp_path / "a.txt").read_text() == "one\n"
    assert not (tmp_path / "n.txt").exists()


async def test_adding_an_existing_file_or_deleting_a_missing_one_is_refused(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(ToolFailure, match="cannot add a.txt: it already exists"):
        await run("apply_patch", {"patch": P("*** Add File: a.txt", "+y")}, make_ctx(tmp_path))
    with pytest.raises(ToolFailure, match="cannot delete b.txt: it does not exist"):
        await run("apply_patch", {"patch": P("*** Delete File: b.txt")}, make_ctx(tmp_path))


async def test_envelope_errors_are_explained(tmp_path):
    ctx = make_ctx(tmp_path)
    with pytest.raises(ToolFailure, match="must start with"):
        await run("apply_patch", {"patch": "*** Update File: a\n-x\n+y\n*** End Patch"}, ctx)
    with pytest.raises(ToolFailure, match="must end with"):
        await run("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: a"}, ctx)
    with pytest.raises(ToolFailure, match="line 2: expected"):
        await run("apply_patch", {"patch": P("--- a/x")}, ctx)
    with pytest.raises(ToolFailure, match="must start with '\\+'"):
        await run("apply_patch", {"patch": P("*** Add File: n.txt", "no plus")}, ctx)


async def test_absolute_paths_inside_the_workspace_are_used_as_they_are(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    await run("apply_patch", {"patch": P(f"*** Update File: {tmp_path}/a.txt", "-x", "+y")}, make_ctx(tmp_path))
    assert (tmp_path / "a.txt").read_text() == "y\n"


async def test_absolute_paths_outside_are_refused_never_made_relative(tmp_path):
    ws = tmp_path / "ws"
    (ws / "etc").mkdir(parents=True)
    (tmp_path / "target").write_text("keep\n")
    with pytest.raises(ToolFailure) as err:
        await run("apply_patch", {"patch": P(f"*** Add File: {tmp_path}/evil", "+x")}, make_ctx(ws))
    assert err.value.error_type == "PathOutsideWorkspace"
    assert not (tmp_path / "evil").exists() and not (ws / str(tmp_path).lstrip("/")).exists()


async def test_paths_title_and_preview_cover_every_file_of_the_patch(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    args = {"patch": P("*** Update File: a.txt", "*** Move to: b.txt", "-x", "+y", "*** Add File: c.txt", "+z")}
    tool, ws = TOOLS["apply_patch"], Workspace(str(tmp_path))
    assert tool.paths(args) == [("a.txt", True), ("b.txt", True), ("c.txt", True)]
    assert tool.title(args, ws) == "Patch 2 files: a.txt, c.txt"
    assert tool.title({"patch": P("*** Delete File: a.txt")}, ws) == "Delete a.txt"
    preview = await tool.preview(args, make_ctx(tmp_path))
    assert {p["path"].rsplit("/", 1)[1]: p["newText"] for p in preview} == {"a.txt": "", "b.txt": "y\n", "c.txt": "z\n"}
    assert (tmp_path / "a.txt").read_text() == "x\n"


async def test_pure_addition_after_a_context_anchor_inserts_below_it(tmp_path):
    (tmp_path / "a.py").write_text("import os\n\nx = 1\n")
    await run("apply_patch", {"patch": P("*** Update File: a.py", "@@ import os", "+import sys")}, make_ctx(tmp_path))
    assert (tmp_path / "a.py").read_text() == "import os\nimport sys\n\nx = 1\n"


async def test_parse_patch_reads_unified_range_headers_as_plain_hunk_separators():
    ops = patch_mod.parse_patch(P("*** Update File: a", "@@ -1,2 +1,2 @@", " a", "-b", "+c"))
    assert ops[0].chunks[0].contexts == () and ops[0].chunks[0].old == ("a", "b")


async def test_the_acp_kind_follows_what_a_patch_does():
    from runtime.tools.builtin.patch import ApplyPatchTool

    tool = ApplyPatchTool()
    delete = "*** Begin Patch\n*** Delete File: a.txt\n*** Delete File: b.txt\n*** End Patch"
    move = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: c.txt\n*** End Patch"
    edit = "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch"
    assert tool.kind_for({"patch": delete}) == "delete"
    assert tool.kind_for({"patch": move}) == "move"
    assert tool.kind_for({"patch": edit}) == "edit"
    assert tool.kind_for({"patch": "garbage"}) == "edit"
