"""update_agents_md: read (with the .agents fallback), write and append at the workspace root, with diffs."""

from __future__ import annotations

import pytest

from runtime.tools.base import ToolFailure
from tests.support.tools_helpers import TOOLS, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]


async def test_read_without_agents_md_says_how_to_create_it(tmp_path):
    res = await run("update_agents_md", {}, make_ctx(tmp_path))
    assert "no AGENTS.md" in res.output and res.raw_output["exists"] is False


async def test_read_falls_back_to_dot_agents(tmp_path):
    (tmp_path / ".agents").mkdir()
    (tmp_path / ".agents/AGENTS.md").write_text("# fallback\n")
    res = await run("update_agents_md", {"action": "read"}, make_ctx(tmp_path))
    assert "# fallback" in res.output


async def test_write_creates_the_root_file_and_append_adds_to_it(tmp_path):
    ctx = make_ctx(tmp_path)
    res = await run("update_agents_md", {"action": "write", "content": "# Rules\n- test first"}, ctx)
    assert (tmp_path / "AGENTS.md").read_text() == "# Rules\n- test first\n"
    assert res.content[0]["oldText"] is None
    res = await run("update_agents_md", {"action": "append", "content": "- keep it short\n"}, ctx)
    assert (tmp_path / "AGENTS.md").read_text() == "# Rules\n- test first\n- keep it short\n"
    assert res.content[0]["oldText"] == "# Rules\n- test first\n"


async def test_write_without_content_is_an_error(tmp_path):
    with pytest.raises(ToolFailure, match="needs content"):
        await run("update_agents_md", {"action": "write"}, make_ctx(tmp_path))


async def test_effect_and_paths_follow_the_action(tmp_path):
    tool = TOOLS["update_agents_md"]
    assert tool.effect({}) == "read" and tool.paths({}) == [("AGENTS.md", False)]
    assert tool.effect({"action": "append"}) == "write" and tool.paths({"action": "write"}) == [("AGENTS.md", True)]
