"""What a real ACP client shows stays clean, through the ACP connection (in process): plain-text tool
titles, command replies that render as Markdown, refusals worded for the user (the model keeps its TOOL_ERROR), an
unknown `/command` or an empty prompt answered without a model call, one `fs/read_text_file` per `edit`, and no
write over a file that changed since the model read it or that it never read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from permissions.audit import audit_log
from tests.support.fake_providers import OPENAI_PATH, FakeProviders, Reply, openai_stream
from tests.support.harness import allow_once, method_not_found, write_script

pytestmark = pytest.mark.timeout(60)


def _said(agent, sid, start=0) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in agent.frames[start:]
        if f.get("method") == "session/update"
        and f["params"]["sessionId"] == sid
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def _ask(agent, sid, text_or_blocks) -> tuple[str, str]:
    start = len(agent.frames)
    blocks = text_or_blocks if isinstance(text_or_blocks, list) else [{"type": "text", "text": text_or_blocks}]
    answer = agent.result("session/prompt", {"sessionId": sid, "prompt": blocks})
    return answer["stopReason"], _said(agent, sid, start)


def _updates(agent, sid, kind):
    return [u for u in agent.updates(sid) if u["sessionUpdate"] == kind]


def _final(agent, sid) -> dict[str, dict[str, Any]]:
    """The last `tool_call_update` with a final status, per call id."""
    out: dict[str, dict[str, Any]] = {}
    for u in _updates(agent, sid, "tool_call_update"):
        if u.get("status") in ("completed", "failed"):
            out[u["toolCallId"]] = u
    return out


def _shown_text(update: dict[str, Any]) -> str:
    return "".join(c["content"]["text"] for c in update.get("content") or [] if c.get("type") == "content")


def renders_as_separate_lines(markdown: str) -> bool:
    """Every line break is a paragraph break (a blank line) or sits inside a list (the next line is an item): a
    Markdown client joins the lines of a paragraph into one."""
    lines = markdown.split("\n")
    for i in range(len(lines) - 1):
        here, nxt = lines[i], lines[i + 1]
        if here == "" or nxt == "" or nxt.startswith("- "):
            continue
        return False
    return True


# ---- titles ---------------------------------------------------------------------------------------------------------
def test_every_built_in_tool_title_is_plain_text_without_markdown(inproc, tmp_path, workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("x = 1\n")
    calls = [
        {"name": "read_file", "arguments": {"path": "src/a.py", "startLine": 1, "endLine": 1}},
        {"name": "glob", "arguments": {"pattern": "**/*.py", "path": "src"}},
        {"name": "grep", "arguments": {"pattern": "x =", "path": "src", "include": "*.py"}},
        {"name": "edit", "arguments": {"path": "src/a.py", "old_string": "x = 1", "new_string": "x = 2"}},
        {"name": "write_file", "arguments": {"path": "new.txt", "content": "n\n"}},
        {"name": "apply_patch", "arguments": {"patch": "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch"}},
        {"name": "bash", "arguments": {"command": "echo hi", "cwd": "src"}},
        {"name": "update_agents_md", "arguments": {"action": "read"}},
    ]
    model = write_script(tmp_path / "m.json", [{"tool_calls": [c]} for c in calls] + [{"text": "done"}])
    agent = inproc("--model", f"scripted:{model}", "--mode", "auto")
    agent.initialize()
    sid = agent.new_session(workspace)
    assert _ask(agent, sid, "go")[0] == "end_turn"
    titles = [u["title"] for u in _updates(agent, sid, "tool_call")]
    assert titles == [
        "Read src/a.py (lines 1–1)",
        'Find "**/*.py" in src',
        'Search "x =" in src (*.py)',
        "Edit src/a.py",
        "Write new.txt",
        "Create b.txt",
        "Run echo hi in src",
        "Read AGENTS.md",
    ]
    assert not any("`" in t for t in titles)
    assert all(u["status"] == "completed" for u in _final(agent, sid).values())


# ---- command replies ------------------------------------------------------------------------------------------------
def test_command_replies_render_as_markdown_with_their_lines_kept(inproc, tmp_path, workspace):
    model = write_script(
        tmp_path / "m.json",
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "n\n"}}]}, {"text": "ok"}],
    )
    always = {"outcome": {"outcome": "selected", "optionId": "allow_always"}}
    agent = inproc("--model", f"scripted:{model}", responder=lambda msg: always)
    agent.initialize()
    sid = agent.new_session(workspace)
    _ask(agent, sid, "write")  # leaves a remembered rule, so /permissions has a list to show
    replies = {name: _ask(agent, sid, f"/{name}")[1] for name in ("status", "help", "permissions", "mode", "model")}
    for name, text in replies.items():
        assert renders_as_separate_lines(text), (name, text)
    status = replies["status"]
    assert status.startswith(f"**Session** `{sid}`") and "\n\n- Workspace: " in status
    assert "\n- Mode: safe\n" in status and "\n- Model: " in status and "\n- Context: about " in status
    assert "\n\n- `/help`: List the available commands\n" in replies["help"]
    assert "\n\n- `" in replies["permissions"] and "allow" in replies["permissions"]


def test_the_advertised_command_descriptions_and_hints_are_plain_text(inproc, workspace):
    agent = inproc()
    agent.initialize()
    agent.new_session(workspace)
    update = agent.wait_for(
        lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
    )
    for command in update["params"]["update"]["availableCommands"]:
        assert "`" not in command["description"] and "`" not in command.get("input", {}).get("hint", "")


def test_an_unknown_command_is_answered_locally_with_the_real_ones_and_never_reaches_the_model(
    inproc, tmp_path, workspace
):
    model = write_script(tmp_path / "m.json", [{"text": "the first model answer"}])
    agent = inproc("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    stop, text = _ask(agent, sid, "/deploy now please")
    assert stop == "end_turn"
    assert text.startswith("`/deploy` is not a command here, so nothing was sent to the model.")
    assert all(f"`/{name}" in text for name in ("help", "mode", "model", "permissions", "compact", "status"))
    assert renders_as_separate_lines(text)
    # The scripted model did not move: its first answer is still the next one.
    assert _ask(agent, sid, "hello") == ("end_turn", "the first model answer")
    # A slash that is not at the start, or a path, still goes to the model like any prompt.
    assert not _ask(agent, sid, "/etc/hosts looks wrong")[1].startswith("`/")


def test_an_unknown_command_costs_no_provider_request(inproc, tmp_path, workspace):
    with FakeProviders() as fp:
        fp.openai(Reply(frames=openai_stream("from the provider")))
        agent = inproc(
            "--model", "openai:gpt-test", env={"OPENAI_BASE_URL": fp.url + "/v1", "OPENAI_API_KEY": "sk-test"}
        )
        agent.initialize()
        sid = agent.new_session(workspace)
        assert "not a command here" in _ask(agent, sid, "/nosuch")[1]
        assert "nothing was sent" in _ask(agent, sid, "   \n\t ")[1]
        assert fp.requests_to(OPENAI_PATH) == []
        assert _ask(agent, sid, "hi")[1] == "from the provider"
        assert len(fp.requests_to(OPENAI_PATH)) == 1


@pytest.mark.parametrize(
    "blocks",
    [
        [],
        [{"type": "text", "text": ""}],
        [{"type": "text", "text": "  \n "}],
        [{"type": "text", "text": ""}, {"type": "text", "text": " "}],
    ],
    ids=["no-blocks", "empty-text", "whitespace", "two-empty-blocks"],
)
def test_an_empty_prompt_is_answered_without_a_model_call(inproc, tmp_path, workspace, blocks):
    model = write_script(tmp_path / "m.json", [{"text": "the first model answer"}])
    agent = inproc("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    stop, text = _ask(agent, sid, blocks)
    assert stop == "end_turn" and text.startswith("The prompt was empty, so nothing was sent to the model.")
    assert not _updates(agent, sid, "session_info_update")  # an empty prompt gives the session no title
    assert _ask(agent, sid, "hello") == ("end_turn", "the first model answer")


# ---- refusals -------------------------------------------------------------------------------------------------------
def _pick(kind_or_id: str):
    def responder(msg):
        options = msg["params"]["options"]
        oid = next((o["optionId"] for o in options if o["optionId"] == kind_or_id), None) or next(
            o["optionId"] for o in options if o["kind"] == kind_or_id
        )
        return {"outcome": {"outcome": "selected", "optionId": oid}}

    return responder


def test_a_declined_call_shows_the_user_what_happened_and_the_model_gets_its_tool_error(inproc, tmp_path, workspace):
    with FakeProviders() as fp:
        fp.openai(
            Reply(
                frames=openai_stream(
                    tool_calls=[("c1", "write_file", [json.dumps({"path": "n.txt", "content": "x\n"})])]
                )
            ),
            Reply(frames=openai_stream("I will try another way.")),
        )
        agent = inproc(
            "--model",
            "openai:gpt-test",
            responder=_pick("reject_continue"),
            env={"OPENAI_BASE_URL": fp.url + "/v1", "OPENAI_API_KEY": "sk-test"},
        )
        agent.initialize()
        sid = agent.new_session(workspace)
        assert _ask(agent, sid, "write n.txt")[0] == "end_turn"
        final = _final(agent, sid)["c1"]
        assert final["status"] == "failed"
        shown = _shown_text(final)
        assert shown == "Declined: not run. The agent was told to try another way."
        assert final["rawOutput"]["error"] == shown and final["rawOutput"]["errorType"] == "UserDeclined"
        second = fp.requests_to(OPENAI_PATH)[1].body["messages"]
        tool_msg = next(m for m in second if m.get("role") == "tool")
        assert tool_msg["content"].startswith("TOOL_ERROR")
        assert "do not retry it as it is, try another way or ask the user" in tool_msg["content"]
    assert not (workspace / "n.txt").exists()


def test_a_rejected_call_and_a_read_only_refusal_are_worded_for_the_user(inproc, tmp_path, workspace):
    model = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "x\n"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "m.txt", "content": "x\n"}}]},
            {"text": "read-only, so I stopped"},
        ],
    )
    agent = inproc("--model", f"scripted:{model}", responder=_pick("reject_once"))
    agent.initialize()
    sid = agent.new_session(workspace)
    stop, text = _ask(agent, sid, "write")
    assert stop == "end_turn" and "Stopped: you rejected Write n.txt." in text
    (rejected,) = _final(agent, sid).values()
    assert _shown_text(rejected) == "Rejected: not run. The turn stopped here."
    agent.result("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
    _ask(agent, sid, "write again")
    denied = _final(agent, sid)
    denied.pop(rejected["toolCallId"])
    (refused,) = denied.values()
    assert _shown_text(refused).startswith("Not run: read-only mode")
    assert refused["rawOutput"]["errorType"] == "PermissionDenied"


# ---- reads through the editor ---------------------------------------------------------------------------------------
class EditorClient:
    """Answers the agent's fs requests from in-memory buffers (over the disk), and permission questions."""

    def __init__(self, root: Path, answer=allow_once) -> None:
        self.root = root
        self.buffers: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        self.answer = answer

    def __call__(self, msg: dict[str, Any]) -> Any:
        self.requests.append(msg)
        method, p = msg["method"], msg["params"]
        if method == "fs/read_text_file":
            path = p["path"]
            text = self.buffers.get(path)
            if text is None:
                text = Path(path).read_text()
            if p.get("line") or p.get("limit"):
                lines = text.splitlines(keepends=True)
                start = (p.get("line") or 1) - 1
                text = "".join(lines[start : start + p["limit"] if p.get("limit") else None])
            return {"content": text}
        if method == "fs/write_text_file":
            self.buffers[p["path"]] = p["content"]
            return {}
        return self.answer(msg)

    def count(self, method: str) -> int:
        return sum(1 for r in self.requests if r["method"] == method)


FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


@pytest.mark.parametrize(("mode", "reads"), [("auto", 1), ("safe", 2)])
def test_one_edit_reads_the_file_once_through_the_editor(inproc, tmp_path, workspace, mode, reads):
    """Once per call; when a question was asked, once more after the answer, so the approval binds to the text the
    question showed (the user may type in the buffer while deciding)."""
    f = workspace / "a.py"
    f.write_text("x = 1\n")
    model = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {"name": "edit", "arguments": {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}}
                ]
            },
            {"text": "edited"},
        ],
    )
    editor = EditorClient(workspace)
    agent = inproc("--model", f"scripted:{model}", "--mode", mode, responder=editor)
    agent.initialize(FS)
    sid = agent.new_session(workspace)
    assert _ask(agent, sid, "edit")[0] == "end_turn"
    assert editor.count("fs/read_text_file") == reads
    assert editor.count("fs/write_text_file") == 1
    assert editor.buffers[str(f.resolve())] == "x = 2\n"
    assert editor.count("session/request_permission") == (1 if mode == "safe" else 0)


def test_an_edit_over_typing_the_user_did_after_the_model_read_the_file_is_refused(inproc, tmp_path, workspace):
    f = workspace / "a.py"
    f.write_text("x = 1\n")
    key = str(f.resolve())
    editor = EditorClient(workspace)
    model = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]},
            {
                "tool_calls": [
                    {"name": "edit", "arguments": {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}}
                ]
            },
            {"text": "the file changed; I will read it again"},
        ],
    )
    agent = inproc("--model", f"scripted:{model}", responder=editor)
    agent.initialize(FS)
    sid = agent.new_session(workspace)
    real_read = editor.__call__

    def typing_after_the_read(msg):
        answer = real_read(msg)
        if msg["method"] == "fs/read_text_file" and editor.count("fs/read_text_file") == 1:
            editor.buffers[key] = "x = 1  # the user typed this\n"  # unsaved, in the buffer
        return answer

    agent.responder = typing_after_the_read
    assert _ask(agent, sid, "edit it")[0] == "end_turn"
    final = _final(agent, sid)
    edit_update = final["tool_step_1_0"]
    assert edit_update["status"] == "failed" and edit_update["rawOutput"]["errorType"] == "FileChanged"
    assert "changed since you last read it" in _shown_text(edit_update)
    assert editor.count("fs/write_text_file") == 0
    assert editor.count("session/request_permission") == 0  # refused before anyone was asked
    assert editor.buffers[key] == "x = 1  # the user typed this\n"


def test_a_write_over_a_file_a_command_rewrote_since_the_model_read_it_is_refused(inproc, tmp_path, workspace):
    f = workspace / "notes.txt"
    f.write_text("v1\n")
    model = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": "printf 'rewritten by a command\\n' > notes.txt"}}
                ]
            },
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "v2\n"}}]},
            {"text": "stopped"},
        ],
    )
    agent = inproc("--model", f"scripted:{model}", "--mode", "auto")
    agent.initialize()
    sid = agent.new_session(workspace)
    _ask(agent, sid, "update the notes")
    write = _final(agent, sid)["tool_step_2_0"]
    assert write["status"] == "failed" and write["rawOutput"]["errorType"] == "FileChanged"
    assert f.read_text() == "rewritten by a command\n"


def test_an_unread_file_is_not_overwritten_blind_but_new_files_and_read_ones_are_written(inproc, tmp_path, workspace):
    model = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "blind\n"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "fresh.txt", "content": "new\n"}}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "seen\n"}}]},
            {"text": "done"},
        ],
    )
    editor = EditorClient(workspace)
    agent = inproc("--model", f"scripted:{model}", responder=editor)
    agent.initialize()
    sid = agent.new_session(workspace)
    _ask(agent, sid, "write")
    final = _final(agent, sid)
    blind = final["tool_step_0_0"]
    assert blind["status"] == "failed" and blind["rawOutput"]["errorType"] == "NotRead"
    assert "read it with read_file first" in _shown_text(blind)
    assert [final[f"tool_step_{i}_0"]["status"] for i in (1, 2, 3)] == ["completed"] * 3
    assert (workspace / "README.md").read_text() == "seen\n" and (workspace / "fresh.txt").read_text() == "new\n"
    # The blind overwrite was refused before the question: only the two writes that ran were asked about.
    asked = [r["params"]["toolCall"]["title"] for r in editor.requests if r["method"] == "session/request_permission"]
    assert asked == ["Write fresh.txt", "Write README.md"]


def test_no_title_or_label_in_a_session_carries_backticks_in_the_title_field(inproc, tmp_path, workspace):
    """The permission request's toolCall title is the same plain text as the tool_call's."""
    model = write_script(
        tmp_path / "m.json",
        [{"tool_calls": [{"name": "bash", "arguments": {"command": "touch made.txt"}}]}, {"text": "ok"}],
    )
    editor = EditorClient(workspace)
    agent = inproc("--model", f"scripted:{model}", responder=editor)
    agent.initialize()
    sid = agent.new_session(workspace)
    _ask(agent, sid, "touch")
    (question,) = [r for r in editor.requests if r["method"] == "session/request_permission"]
    assert question["params"]["toolCall"]["title"] == "Run touch made.txt"
    assert not re.search("`", json.dumps([u.get("title") for u in _updates(agent, sid, "tool_call")]))


@pytest.mark.parametrize("answer", ["method not found", "an internal error", "an answer that cannot be read"])
def test_a_client_that_cannot_ask_is_not_said_to_have_rejected_and_the_call_is_not_run(
    inproc, tmp_path, workspace, answer
):
    """The Python SDK's example client answers `session/request_permission` with -32601, acpx in queue mode cannot
    ask either: nothing runs, and the user is told the editor could not ask, never that they rejected it."""
    responders = {
        "method not found": method_not_found,
        "an internal error": _raise,
        "an answer that cannot be read": _unreadable,
    }
    model = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "x\n"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "m.txt", "content": "x\n"}}]},
            {"text": "never"},
        ],
    )
    agent = inproc("--model", f"scripted:{model}", responder=responders[answer], state_dir=tmp_path / "state")
    agent.initialize({"session": {"notices": {}}})
    sid = agent.new_session(workspace)
    stop, text = _ask(agent, sid, "write")
    assert stop == "end_turn"
    assert "Stopped: the editor could not ask you about Write n.txt, so it was not run." in text
    (final,) = _final(agent, sid).values()
    assert final["status"] == "failed"
    assert (
        _shown_text(final)
        == "The editor could not ask you about Write n.txt, so it was not run. The turn stopped here."
    )
    notices = [u for u in agent.updates(sid) if u["sessionUpdate"] == "notice"]
    assert [(n["severity"], n["title"]) for n in notices] == [("warning", "The editor could not ask you")]
    assert "not run" in notices[0]["description"]
    _ask(agent, sid, "write again")  # told once a session
    assert len([u for u in agent.updates(sid) if u["sessionUpdate"] == "notice"]) == 1
    assert "rejected" not in json.dumps(agent.updates(sid))
    assert not (workspace / "n.txt").exists() and not (workspace / "m.txt").exists()
    rows = audit_log(str(tmp_path / "state")).entries(session_id=sid)
    assert [r.outcome for r in rows] == ["unasked", "unasked"]


def _raise(msg: dict[str, Any]) -> Any:
    raise RuntimeError("the editor failed")


def _unreadable(msg: dict[str, Any]) -> Any:
    return {"outcome": "allow"}


_unreadable.deliberately_invalid = True  # type: ignore[attr-defined]
