"""Slash commands: parsing, project templates, and running them through the ACP connection in process (locally,
without a model call, except `/compact` and project commands)."""

from __future__ import annotations

from pathlib import Path

from runtime.commands import expand, parse, project_commands
from tests.support.harness import write_script


def test_only_a_single_text_block_starting_with_a_slash_is_a_command():
    assert parse([{"type": "text", "text": "/mode auto"}]) == ("mode", "auto")
    assert parse([{"type": "text", "text": "  /help  "}]) == ("help", "")
    assert parse([{"type": "text", "text": "look at /etc/hosts"}]) is None
    assert parse([{"type": "text", "text": "/"}]) is None
    assert parse([{"type": "text", "text": "/help"}, {"type": "text", "text": "more"}]) is None


def test_project_commands_come_from_markdown_templates_with_arguments(tmp_path: Path):
    folder = tmp_path / ".gatewright" / "commands"
    folder.mkdir(parents=True)
    (folder / "review.md").write_text("---\ndescription: Review a file\n---\nReview $ARGUMENTS carefully.\n")
    (folder / "plain.md").write_text("# Explain the build\nExplain how the build works.\n")
    (folder / "help.md").write_text("shadowing a built-in is ignored")
    (folder / "bad name.md").write_text("ignored")
    cmds = {c.name: c for c in project_commands(str(tmp_path))}
    assert set(cmds) == {"review", "plain"}
    assert cmds["review"].description == "Review a file"
    assert cmds["plain"].description == "Explain the build"
    assert expand(cmds["review"].template, "src/a.py") == "Review src/a.py carefully.\n"
    assert expand(cmds["plain"].template, "fast").endswith("works.\n\nfast")


def _commands_update(agent, sid):
    return [
        f["params"]["update"]["availableCommands"]
        for f in agent.frames
        if f.get("method") == "session/update"
        and f["params"]["sessionId"] == sid
        and f["params"]["update"]["sessionUpdate"] == "available_commands_update"
    ]


def _said(agent, sid, start=0) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in agent.frames[start:]
        if f.get("method") == "session/update"
        and f["params"]["sessionId"] == sid
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def run(agent, sid, text):
    start = len(agent.frames)
    answer = agent.result("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    return answer["stopReason"], _said(agent, sid, start)


def test_commands_are_announced_right_after_session_new_and_run_locally(inproc, tmp_path, workspace):
    (workspace / ".gatewright" / "commands").mkdir(parents=True)
    (workspace / ".gatewright" / "commands" / "review.md").write_text("Review $ARGUMENTS please.")
    model = write_script(tmp_path / "m.json", [{"text": "first model answer"}, {"text": "second"}])
    agent = inproc("--model", f"scripted:{model}")
    agent.initialize()
    rid = agent.start_request("session/new", {"cwd": str(workspace), "mcpServers": []})
    sid = agent.response(rid)["result"]["sessionId"]
    update = agent.wait_for(
        lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
    )
    assert agent.frames.index(update) > next(i for i, f in enumerate(agent.frames) if f.get("id") == rid)
    names = [c["name"] for c in update["params"]["update"]["availableCommands"]]
    assert names == ["help", "mode", "model", "permissions", "compact", "status", "review"]

    stop, text = run(agent, sid, "/help")
    assert stop == "end_turn" and "/compact" in text and "/review" in text
    stop, text = run(agent, sid, "/mode read-only")
    assert stop == "end_turn" and "read-only" in text
    mode_updates = [
        f["params"]["update"]
        for f in agent.frames
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == "current_mode_update"
    ]
    assert mode_updates[-1]["currentModeId"] == "read-only"
    assert "No remembered approval rules" in run(agent, sid, "/permissions")[1]
    assert "No rule" in run(agent, sid, "/permissions revoke rule-404")[1]
    status = run(agent, sid, "/status")[1]
    assert "Mode: read-only" in status and "Sandbox: " in status
    assert "Unknown model" in run(agent, sid, "/model gpt-none")[1]
    # None of those called the model: the first model answer is still next.
    assert run(agent, sid, "/review src/app.py")[1] == "first model answer"


def test_the_command_list_is_announced_again_when_the_workspace_adds_one(inproc, tmp_path, workspace):
    model = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {"path": ".gatewright/commands/ship.md", "content": "Ship it: $ARGUMENTS"},
                    }
                ]
            },
            {"text": "added"},
        ],
    )
    agent = inproc("--model", f"scripted:{model}", "--mode", "auto")
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update")
    run(agent, sid, "add a ship command")
    lists = _commands_update(agent, sid)
    assert len(lists) == 2 and "ship" in [c["name"] for c in lists[-1]]


def test_compact_on_request_uses_one_model_call_and_the_conversation_goes_on(inproc, tmp_path, workspace):
    model = write_script(
        tmp_path / "m.json", [{"text": "hello there"}, {"text": '{"goal": "greet"}'}, {"text": "still here"}]
    )
    agent = inproc("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    run(agent, sid, "hi")
    stop, text = run(agent, sid, "/compact")
    assert stop == "end_turn" and text.startswith("Compacted: 1 earlier messages")
    assert run(agent, sid, "and now?")[1] == "still here"
