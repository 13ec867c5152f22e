"""`read_file` pages: whole lines while they fit, a line too long for one call in pieces with `startColumn`, and a
note that names the exact next call, so following the notes reads any file to its end, from disk and through the
editor alike."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from runtime.tools.base import ToolFailure
from runtime.tools.builtin.paging import Page
from tests.support.tools_helpers import FakeEditor, make_ctx, run

pytestmark = pytest.mark.anyio

_NEXT = re.compile(r"continue with read_file (\{.*\})\]$")
_ROW = re.compile(r"^ *(\d+)\t(.*)$")


def _next_call(output: str) -> dict[str, Any] | None:
    last = output.rstrip("\n").rsplit("\n", 1)[-1]
    m = _NEXT.search(last)
    return json.loads(m.group(1)) if m else None


async def _follow(args: dict[str, Any], ctx: Any, limit: int = 500) -> tuple[str, int]:
    """Call read_file, then each call its note names, and put the file back together from the rows."""
    text: dict[int, list[str]] = {}
    calls = 0
    call: dict[str, Any] | None = args
    while call is not None:
        calls += 1
        assert calls <= limit, "the notes never reach the end of the file"
        res = await run("read_file", call, ctx)
        for line in res.output.split("\n"):
            m = _ROW.match(line)
            if m:
                text.setdefault(int(m.group(1)), []).append(m.group(2))
        nxt = _next_call(res.output)
        assert nxt == res.raw_output.get("next")
        assert nxt != call, f"the note repeats the call it came from: {nxt}"
        call = nxt
    return "".join("".join(text[n]) + "\n" for n in sorted(text)), calls


@pytest.mark.parametrize("editor", [False, True], ids=["disk", "editor"])
async def test_a_3_mb_single_line_file_is_read_to_its_end_by_following_the_notes(tmp_path, editor):
    body = "".join(f"v{i:07d}," for i in range(330_000))  # ~3 MB on one line, like minified JSON
    (tmp_path / "bundle.min.js").write_text(body + "\n", encoding="utf-8")
    ctx = make_ctx(tmp_path, editor=FakeEditor() if editor else None)
    whole, calls = await _follow({"path": "bundle.min.js"}, ctx)
    assert whole == body + "\n"
    assert calls == -(-len(body) // (50_000 - len("     1\t") - 1))  # every call but the last is a full page


async def test_the_first_piece_of_a_long_line_names_the_exact_next_call(tmp_path):
    (tmp_path / "a.json").write_text("x" * 120 + "\nsecond\n", encoding="utf-8")
    res = await run("read_file", {"path": "a.json", "maxChars": 58}, make_ctx(tmp_path))
    rows, note = res.output.rstrip("\n").split("\n")
    assert rows == "     1\t" + "x" * 50
    assert note == (
        "[line 1 has 120 characters; this shows columns 1–50; continue with read_file "
        '{"path": "a.json", "startLine": 1, "startColumn": 51, "maxChars": 58}]'
    )
    assert res.raw_output["truncated"] is True and res.raw_output["endLine"] == 1


async def test_a_piece_from_a_start_column_then_the_following_lines(tmp_path):
    (tmp_path / "a.txt").write_text("abcdefghij\nsecond\nthird\n", encoding="utf-8")
    res = await run("read_file", {"path": "a.txt", "startColumn": 8}, make_ctx(tmp_path))
    assert res.output == (
        "     1\thij\n     2\tsecond\n     3\tthird\n"
        "[line 1 is shown from column 8 to its end (it has 10 characters)]\n"
    )
    assert res.raw_output["startColumn"] == 8 and res.raw_output["truncated"] is False


async def test_columns_count_characters_not_bytes(tmp_path):
    (tmp_path / "u.txt").write_text("añb€c😀d\n", encoding="utf-8")
    res = await run("read_file", {"path": "u.txt", "startColumn": 4}, make_ctx(tmp_path))
    assert res.output.startswith("     1\t€c😀d\n")


async def test_a_start_column_past_the_end_of_its_line_says_so(tmp_path):
    (tmp_path / "a.txt").write_text("short\nnext\n", encoding="utf-8")
    res = await run("read_file", {"path": "a.txt", "startLine": 1, "startColumn": 20}, make_ctx(tmp_path))
    assert res.output == "     2\tnext\n[line 1 has only 5 characters; nothing to show from column 20]\n"


async def test_lines_that_fit_are_never_cut_and_the_note_names_the_next_line(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n" + "z" * 100 + "\n", encoding="utf-8")
    res = await run("read_file", {"path": "a.txt", "maxChars": 60}, make_ctx(tmp_path))
    assert res.output == (
        "     1\tone\n     2\ttwo\n"
        '[output truncated at 60 characters after line 2; continue with read_file {"path": "a.txt", "startLine": 3, '
        '"maxChars": 60}]\n'
    )


async def test_the_next_call_keeps_the_end_line_it_was_given(tmp_path):
    (tmp_path / "a.txt").write_text("y" * 30 + "\n" + "w" * 30 + "\nlast\n", encoding="utf-8")
    whole, _ = await _follow({"path": "a.txt", "endLine": 2, "maxChars": 20}, make_ctx(tmp_path))
    assert whole == "y" * 30 + "\n" + "w" * 30 + "\n"


async def test_even_a_tiny_page_makes_progress(tmp_path):
    (tmp_path / "a.txt").write_text("abc\n", encoding="utf-8")
    whole, calls = await _follow({"path": "a.txt", "maxChars": 1}, make_ctx(tmp_path))
    assert whole == "abc\n" and calls == 3


async def test_a_last_line_without_a_line_break_and_crlf_lines_read_as_before(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\r\ntwo\r\nthree")
    res = await run("read_file", {"path": "a.txt"}, make_ctx(tmp_path))
    assert res.output == "     1\tone\n     2\ttwo\n     3\tthree\n"
    assert res.raw_output["complete"] is True
    res = await run("read_file", {"path": "a.txt", "startLine": 5}, make_ctx(tmp_path))
    assert res.output == "[a.txt has only 3 lines; nothing to show from line 5]\n"


async def test_undecodable_bytes_are_replaced_and_said(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"ok \xff here\n")
    res = await run("read_file", {"path": "a.txt"}, make_ctx(tmp_path))
    assert (
        res.output == "     1\tok \ufffd here\n[the file is not valid UTF-8; undecodable bytes are shown as U+FFFD]\n"
    )


async def test_start_column_must_be_positive(tmp_path):
    (tmp_path / "a.txt").write_text("a\n", encoding="utf-8")
    with pytest.raises(ToolFailure, match="startColumn"):
        await run("read_file", {"path": "a.txt", "startColumn": 0}, make_ctx(tmp_path))


def test_a_page_fed_a_line_in_pieces_keeps_only_what_it_shows():
    page = Page(1, 1, 30, {"path": "p"})
    for _ in range(1000):
        assert page.feed(1, "q" * 1000, False)  # a megabyte-long line, fed as it is read
    page.feed(1, "", True)
    assert page.done and sum(map(len, page._kept)) == 30 - len("     1\t") - 1
    assert page.next_call == {"path": "p", "startLine": 1, "startColumn": 23}
    assert "line 1 has 1000000 characters" in page.text()
