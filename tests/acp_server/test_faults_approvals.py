"""Faults at the approval round trip and at the disk: garbage answers never approve, failing writes corrupt nothing.

Provenance: ACP `session/request_permission` (the answer is `{"outcome": {"outcome": "selected", "optionId"}}` or
`{"outcome": {"outcome": "cancelled"}}`), our rule that anything else is not an approval (fail closed; rules T7
says a rejected call is not executed, its `tool_call_update` ends `failed` and the turn ends `end_turn`), and our rule
that a failing write leaves the old file intact with a clear error.
"""

from __future__ import annotations

import errno
import os
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import write_script

pytestmark = [pytest.mark.timeout(60)]


def _allow(msg: dict[str, Any]) -> str:
    return next(o["optionId"] for o in msg["params"]["options"] if o["kind"] == "allow_once")


GARBAGE: dict[str, Any] = {
    "outcome_is_a_string": lambda m: {"outcome": "selected"},
    "outcome_is_null": lambda m: {"outcome": None},
    "outcome_is_a_list": lambda m: {"outcome": [{"outcome": "selected", "optionId": _allow(m)}]},
    "option_id_is_a_number": lambda m: {"outcome": {"outcome": "selected", "optionId": 1}},
    "option_id_not_offered": lambda m: {"outcome": {"outcome": "selected", "optionId": "allow_everything"}},
    "option_id_missing": lambda m: {"outcome": {"outcome": "selected"}},
    "unknown_discriminator": lambda m: {"outcome": {"outcome": "approved", "optionId": _allow(m)}},
    "discriminator_wrong_case": lambda m: {"outcome": {"outcome": "SELECTED", "optionId": _allow(m)}},
    "discriminator_missing": lambda m: {"outcome": {"optionId": _allow(m)}},
    "unwrapped_option": lambda m: {"optionId": _allow(m)},
    "empty_object": lambda m: {},
    "null_result": lambda m: None,
    "array_result": lambda m: [_allow(m)],
    "string_result": lambda m: "allow_once",
    "true_result": lambda m: True,
    "option_kind_instead_of_id": lambda m: {"outcome": {"outcome": "selected", "optionId": "allow_always "}},
    "error_answer": "error",
}


class PerSessionResponder:
    """Answers each session's permission questions with that session's garbage, and records what was asked."""

    deliberately_invalid = True

    def __init__(self) -> None:
        self.by_session: dict[str, Any] = {}
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, msg: dict[str, Any]) -> Any:
        sid = msg["params"]["sessionId"]
        with self.lock:
            self.asked.append(sid)
        answer = self.by_session[sid]
        if answer == "error":
            raise RuntimeError("the editor failed")
        return answer(msg)


@pytest.mark.req("acp:permission:only-a-selected-offered-option-approves")
def test_garbage_or_wrong_typed_permission_answers_are_never_an_approval(inproc, tmp_path):
    """Each garbage answer, in its own session of one agent: the write is not executed, its tool call ends `failed`,
    the turn ends `end_turn`, and the agent keeps serving the next session."""
    script = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {"id": "call_w", "name": "write_file", "arguments": {"path": "pwned.txt", "content": "x"}}
                ]
            },
            {"text": "the model must not be called again after a rejection"},
        ],
    )
    responder = PerSessionResponder()
    agent = inproc("--model", f"scripted:{script}", "--mode", "safe", responder=responder)
    agent.initialize()
    for name, answer in GARBAGE.items():
        ws = tmp_path / name
        ws.mkdir()
        sid = agent.new_session(ws)
        responder.by_session[sid] = answer
        result = agent.prompt(sid, "write it")
        assert result["result"]["stopReason"] == "end_turn", (name, result)
        assert not (ws / "pwned.txt").exists(), name
        statuses = [u.get("status") for u in agent.updates(sid) if u.get("toolCallId") == "call_w"]
        assert statuses[-1] == "failed", (name, statuses)
        texts = "".join(u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk")
        assert "must not be called" not in texts, name
    assert len(responder.asked) == len(GARBAGE)


@pytest.mark.req("acp:permission:only-a-selected-offered-option-approves")
def test_a_second_late_answer_to_a_permission_question_changes_nothing(inproc, workspace, tmp_path):
    """JSON-RPC 2.0 §5 (one response per request) from the other side: a client that answers a permission question
    twice — reject, then allow — gets the first answer honoured; the late one is dropped."""
    script = write_script(
        tmp_path / "m.json",
        [{"tool_calls": [{"id": "call_w", "name": "write_file", "arguments": {"path": "pwned.txt", "content": "x"}}]}],
    )
    agent_box: list[Any] = []

    def reject_then_allow(msg: dict[str, Any]) -> Any:
        reject = next(o["optionId"] for o in msg["params"]["options"] if o["kind"] == "reject_once")
        agent = agent_box[0]
        agent.send(
            {"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": {"outcome": "selected", "optionId": reject}}}
        )
        return {"outcome": {"outcome": "selected", "optionId": _allow(msg)}}

    agent = inproc("--model", f"scripted:{script}", responder=reject_then_allow)
    agent_box.append(agent)
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    assert not (workspace / "pwned.txt").exists()
    assert agent.initialize()["protocolVersion"] == 1  # still serving


# ---- the disk refuses ---------------------------------------------------------------------------------------------
class FailingOs(types.ModuleType):
    """`os` as seen by the workspace module, with one call failing the way a full or broken disk does."""

    def __init__(self, fail: str, err: int) -> None:
        super().__init__("os")
        self._fail, self._err = fail, err
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(os, name)
        if name != self._fail:
            return real

        def failing(*args: Any, **kw: Any) -> Any:
            if name == "open" and not args[1] & (os.O_WRONLY | os.O_CREAT):
                return real(*args, **kw)  # a read-only file system still reads
            self.calls += 1
            if name == "write" and self.calls == 1:
                return real(args[0], bytes(args[1])[: len(args[1]) // 2])  # a short write, then the disk is full
            raise OSError(self._err, os.strerror(self._err))

        return failing


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.iterdir()}


FAILURES = {
    "disk_full_mid_write": ("write", errno.ENOSPC),
    "fsync_io_error": ("fsync", errno.EIO),
    "read_only_filesystem": ("open", errno.EROFS),
    "rename_fails": ("replace", errno.EIO),
    "chmod_fails": ("fchmod", errno.EPERM),
}
WRITERS = {
    "write_file": ("write_file", {"path": "keep.txt", "content": "new content\n"}),
    "write_file_append": ("write_file", {"path": "keep.txt", "content": "more\n", "mode": "append"}),
    "edit": ("edit", {"path": "keep.txt", "old_string": "old", "new_string": "new"}),
    "apply_patch": (
        "apply_patch",
        {"patch": "*** Begin Patch\n*** Update File: keep.txt\n-old content\n+new\n*** End Patch"},
    ),
    "update_agents_md": ("update_agents_md", {"action": "write", "content": "new rules\n"}),
}


@pytest.mark.req("gw:write:failure-leaves-old-file")
@pytest.mark.anyio
@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("writer", list(WRITERS))
async def test_a_failing_disk_write_gives_a_clear_error_and_leaves_the_old_file_and_no_debris(
    tmp_path: Path, monkeypatch, failure, writer
):
    """Our rule (runtime.workspace: temp file, fsync, rename): whatever step the disk refuses, the tool fails with an
    error naming the file, the old content is intact, and no temporary file is left behind."""
    from runtime import workspace as workspace_module
    from runtime.tools.base import ToolFailure
    from tests.support.tools_helpers import make_ctx, run

    (tmp_path / "keep.txt").write_text("old content\n", encoding="utf-8")
    (tmp_path / "AGENTS.md").write_text("old rules\n", encoding="utf-8")
    before = snapshot(tmp_path)
    ctx = make_ctx(tmp_path)
    await run("read_file", {"path": "keep.txt"}, ctx)  # an overwrite needs the model to have read the file
    fake = FailingOs(*FAILURES[failure])
    monkeypatch.setattr(workspace_module, "os", fake)
    name, args = WRITERS[writer]
    with pytest.raises(ToolFailure) as err:
        await run(name, args, ctx)
    monkeypatch.undo()
    assert fake.calls >= 1, "the injected failure was never reached"
    assert err.value.error_type in {"WriteFailed", "OSError", "PermissionDenied"}, err.value.message
    shown = "AGENTS.md" if writer == "update_agents_md" else "keep.txt"
    assert shown in err.value.message
    assert snapshot(tmp_path) == before
