"""The chat's rendering and its approval keys, in process: what a finished turn leaves on the screen."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from permissions.gateway import PermissionOption, PermissionOutcome, PermissionRequest
from permissions.options import build_choices
from permissions.policy import CallFacts
from runtime.chat.ask import CANCEL, TerminalChooser, option_keys
from runtime.chat.view import LIVE_CHARS, ChatView, live_tail, stable_split
from runtime.events import NoticeEvent, PlanUpdated, TextChunk, ThoughtChunk, ToolCallProgress, ToolCallStarted
from runtime.models.base import Usage
from runtime.tools.builtin.bash import command_block


def view() -> tuple[ChatView, io.StringIO]:
    out = io.StringIO()
    return ChatView(Console(file=out, width=100, force_terminal=False, color_system=None)), out


@pytest.mark.parametrize(
    ("text", "done", "rest"),
    [
        ("one para", "", "one para"),
        ("one\n\ntwo", "one\n\n", "two"),
        ("- a\n- b\n\nnext", "- a\n- b\n\n", "next"),
        ("```\ncode\n\nmore\n", "", "```\ncode\n\nmore\n"),  # a blank line inside an open fence is no cut
        ("```\ncode\n```\n\nafter", "```\ncode\n```\n\n", "after"),
    ],
)
def test_streamed_markdown_is_printed_block_by_block_once_a_blank_line_ends_a_block(text, done, rest):
    assert stable_split(text) == (done, rest)


def test_the_five_options_get_their_letters_and_the_second_reject_is_try_another_way():
    facts = CallFacts("bash", "execute", "bash:npm test")
    options = tuple(c.option for c in build_choices(facts, "`npm test`", persistent=False))
    assert [(k, o.option_id) for k, o in option_keys(options)] == [
        ("y", "allow_once"),
        ("a", "allow_always"),
        ("n", "reject_once"),
        ("t", "reject_continue"),
        ("d", "reject_always"),
    ]
    odd = (PermissionOption("x1", "Allow once", "allow_once"), PermissionOption("x2", "Allow too", "allow_once"))
    assert [k for k, _ in option_keys(odd)] == ["y", "2"]


def test_a_turn_leaves_its_reply_collapsed_thought_tool_lines_plan_notice_and_usage():
    v, out = view()
    v.start_turn()
    for ev in [
        ThoughtChunk("I should "),
        ThoughtChunk("read it."),
        TextChunk("Here is **the** answer.\n\n"),
        TextChunk("- one\n- two\n"),
        ToolCallStarted("c1", "read_file", "Read a.py", "read", {}),
        ToolCallProgress("c1", status="in_progress"),
        ToolCallProgress("c1", status="completed"),
        ToolCallStarted("c2", "bash", "Run make", "execute", {}),
        ToolCallProgress(
            "c2",
            status="failed",
            content=({"type": "content", "content": {"type": "text", "text": "make: *** no rule\nsecond line"}},),
        ),
        PlanUpdated(({"content": "Fix it", "status": "in_progress", "priority": "high"},)),
        NoticeEvent("warning", "Heads up", "something"),
    ]:
        v.event(ev)
    v.end_turn(None, Usage(12, 3), Usage(40, 9), 0.0)
    screen = out.getvalue()
    assert "∴ Thought for" in screen and "read it." not in screen  # collapsed
    assert v.last_thoughts == ["I should read it."]
    assert "Here is the answer." in screen and "• one" in screen
    assert "✓ Read a.py" in screen and "✗ Run make" in screen and "make: *** no rule" in screen
    assert "▶ Fix it" in screen and "⚠ Heads up: something" in screen
    assert "12 in · 3 out · session 40 in · 9 out" in screen


def test_a_model_that_reports_no_usage_gets_no_usage_line():
    """Before, the scripted model's turns ended with "0 in · 0 out · session 0 in · 0 out"."""
    v, out = view()
    v.start_turn()
    v.event(TextChunk("Done."))
    v.end_turn(None, Usage(), Usage(), 0.0)
    assert " in · " not in out.getvalue() and re.search(r"\d+\.\d s", out.getvalue())


def test_an_edit_shows_its_diff_after_it_ran_unless_its_question_showed_it():
    v, out = view()
    diff = {"type": "diff", "path": "/w/a.txt", "oldText": "old\n", "newText": "new\n"}
    v.start_turn()
    v.event(ToolCallStarted("c1", "edit", "Edit a.txt", "edit", {}))
    v.event(ToolCallProgress("c1", status="completed", content=(diff,)))
    v.event(ToolCallStarted("c2", "edit", "Edit a.txt", "edit", {}))
    v.diff_shown("c2")
    v.event(ToolCallProgress("c2", status="completed", content=(diff,)))
    v.end_turn(None, None, Usage(), 0.0)
    assert out.getvalue().count("-old") == 1 and out.getvalue().count("+new") == 1


def _request() -> PermissionRequest:
    facts = CallFacts("write_file", "write", "write_file:a.txt")
    options = tuple(c.option for c in build_choices(facts, "this write to `a.txt`", persistent=False))
    return PermissionRequest(
        "c1",
        "write_file",
        "Write a.txt",
        "edit",
        {"path": "a.txt"},
        options,
        "safe mode asks before write actions",
        content=({"type": "diff", "path": "/w/a.txt", "oldText": None, "newText": "hi\n"},),
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("key", "outcome"),
    [
        ("y", PermissionOutcome.selected("allow_once")),
        ("a", PermissionOutcome.selected("allow_always")),
        ("n", PermissionOutcome.selected("reject_once")),
        ("t", PermissionOutcome.selected("reject_continue")),
        ("d", PermissionOutcome.selected("reject_always")),
        (CANCEL, PermissionOutcome.cancel()),
    ],
)
async def test_each_key_answers_its_option_and_ctrl_c_cancels_the_turn(key, outcome):
    v, out = view()
    cancelled = []
    asked = []

    async def read_key(message, keys):
        asked.append(keys)
        return key

    chooser = TerminalChooser(v, lambda: cancelled.append(True), read_key)
    assert await chooser.request(_request()) == outcome
    assert asked == [["y", "a", "n", "t", "d"]]
    assert cancelled == ([True] if key == CANCEL else [])
    screen = out.getvalue()
    assert "Allow Write a.txt" in screen and "+hi" in screen  # the diff comes before the keys
    assert screen.index("+hi") < screen.index("[y] Allow once")
    assert "[a] Always allow this write to “a.txt” in this session" in screen


@pytest.mark.anyio
async def test_a_command_the_title_cannot_show_is_printed_whole_under_the_question():
    command = "echo hello" + " " * 200 + "; touch PAYLOAD"
    facts = CallFacts("bash", "execute", "bash:x")
    options = tuple(c.option for c in build_choices(facts, "`echo hello…`", persistent=False))
    request = PermissionRequest(
        "c1",
        "bash",
        "Run echo hello…",
        "execute",
        {"command": command},
        options,
        "safe mode asks before execute actions",
        content=command_block(command),
    )
    v, out = view()

    async def read_key(message, keys):
        return "n"

    chooser = TerminalChooser(v, lambda: None, read_key)
    assert await chooser.request(request) == PermissionOutcome.selected("reject_once")
    screen = out.getvalue()
    assert "touch PAYLOAD" in screen and screen.index("touch PAYLOAD") < screen.index("[y] Allow once")


def test_the_live_region_redraws_only_the_end_of_a_long_unfinished_block():
    text = "```python\n" + "".join(f"line_{i} = {i}\n" for i in range(2000))
    tail = live_tail(text)
    assert len(tail) <= LIVE_CHARS + 10 and tail.startswith("```\n") and tail.endswith("line_1999 = 1999\n")
    assert live_tail("short") == "short"


def test_our_messages_show_code_spans_without_backticks_and_a_programs_output_as_it_is():
    """Before, a tool error read "✗ … `hello.py` exists and you have not read it" with the backticks."""
    v, out = view()
    v.start_turn()
    v.event(ToolCallStarted("c1", "write_file", "Write hello.py", "edit", {}))
    error = "`hello.py` exists and you have not read it"
    v.event(
        ToolCallProgress(
            "c1",
            status="failed",
            content=({"type": "content", "content": {"type": "text", "text": error}},),
            raw_output={"error": error, "errorType": "StaleFile"},
        )
    )
    v.event(ToolCallStarted("c2", "bash", "Run ls", "execute", {}))
    shell = "ls: cannot access `x': No such file"
    v.event(
        ToolCallProgress(
            "c2", status="failed", content=({"type": "content", "content": {"type": "text", "text": shell}},)
        )
    )
    v.event(NoticeEvent("warning", "MCP server `docs` failed to start", "see `/status`"))
    v.end_turn(None, Usage(), Usage(), 0.0)
    screen = out.getvalue()
    assert "hello.py exists and you have not read it" in screen and "`hello.py`" not in screen
    assert shell in screen  # not ours: as the program wrote it
    assert "MCP server docs failed to start: see /status" in screen
