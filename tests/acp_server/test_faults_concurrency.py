"""Concurrency faults: ten sessions running parallel tool calls at once, cancel storms, duplicate request ids.

Provenance: ACP prompt turn (every `session/update` carries the prompted `sessionId`, ACP-PROMPT-002; `session/new`'s
cwd is the session root), ACP cancellation (the prompt is answered `cancelled` as a result, no update after that
answer, ACP-CANCEL-001/002), JSON-RPC 2.0 §5 (one response per request, even when ids repeat), docs/rules.md R6
(cancels that must be harmless; one cancel, one terminal outcome) and R7 (no cross-talk under concurrency).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import write_script

pytestmark = [pytest.mark.timeout(90)]

N_SESSIONS = 10


def relative_paths(frames: list[dict[str, Any]]) -> list[str]:
    """Protocol paths the agent sent that are not absolute (ACP overview: every file path MUST be absolute): tool
    call `locations`, `diff` content, and fs requests. `rawInput` is the model's own arguments and is exempt."""
    bad: list[str] = []
    for f in frames:
        params = f.get("params") if "method" in f else None
        if not isinstance(params, dict):
            continue
        if f["method"].startswith("fs/"):
            bad += [params["path"]] if not os.path.isabs(params.get("path", "")) else []
        call = params.get("update") or params.get("toolCall") or {}
        if f["method"] == "session/update" and call.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            continue
        for loc in call.get("locations") or []:
            bad += [loc["path"]] if not os.path.isabs(loc["path"]) else []
        for c in call.get("content") or []:
            if c.get("type") == "diff" and not os.path.isabs(c["path"]):
                bad.append(c["path"])
    return bad


@pytest.mark.req(
    "acp:prompt:updates-carry-the-prompted-session-id",
    "acp:session:cwd-is-the-session-root",
    "acp:paths:absolute",
    "acp:prompt:answered-with-a-stop-reason",
)
def test_ten_sessions_with_parallel_tool_calls_at_once_never_mix_updates_approvals_or_working_directories(
    inproc, tmp_path
):
    """Ten sessions prompt at the same time; each turn runs three tool calls in parallel (a command, a read, a write
    that asks). Even sessions approve, odd ones reject. Nothing of one session shows up in another."""
    script = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {"id": "call_pwd", "name": "bash", "arguments": {"command": "pwd"}},
                    {"id": "call_read", "name": "read_file", "arguments": {"path": "README.md"}},
                    {"id": "call_write", "name": "write_file", "arguments": {"path": "out.txt", "content": "w\n"}},
                ]
            },
            {"text": "done"},
        ],
    )
    decisions: dict[str, str] = {}
    lock = threading.Lock()

    def responder(msg: dict[str, Any]) -> Any:
        kind = decisions[msg["params"]["sessionId"]]
        option = next(o["optionId"] for o in msg["params"]["options"] if o["kind"] == kind)
        return {"outcome": {"outcome": "selected", "optionId": option}}

    agent = inproc("--model", f"scripted:{script}", "--mode", "safe", responder=responder)
    agent.initialize()
    sessions: list[tuple[str, Path]] = []
    for i in range(N_SESSIONS):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        (ws / "README.md").write_text(f"readme of session marker-{i}-end\n", encoding="utf-8")
        sid = agent.new_session(ws)
        with lock:
            decisions[sid] = "allow_once" if i % 2 == 0 else "reject_once"
        sessions.append((sid, ws))
    rids = [agent.start_prompt(sid, "go") for sid, _ in sessions]
    answers = [agent.response(rid, timeout=60) for rid in rids]
    assert [a["result"]["stopReason"] for a in answers] == ["end_turn"] * N_SESSIONS
    ours = {sid for sid, _ in sessions}
    assert {f["params"]["sessionId"] for f in agent.frames if f.get("method") == "session/update"} <= ours
    for i, (sid, ws) in enumerate(sessions):
        text = repr(
            [
                f["params"]
                for f in agent.frames
                if f.get("method") in ("session/update", "session/request_permission")
                and f["params"]["sessionId"] == sid
            ]
        )
        others = [j for j in range(N_SESSIONS) if j != i]
        assert f"marker-{i}-end" in text
        assert not [j for j in others if f"marker-{j}-end" in text or str(tmp_path / f"ws{j}") + "'" in text]
        assert str(ws) in text  # pwd ran in this session's root
        asked = [f for f in agent.agent_requests if f["params"]["sessionId"] == sid]
        assert [a["params"]["toolCall"]["toolCallId"] for a in asked] == ["call_write"]
        assert (ws / "out.txt").exists() == (i % 2 == 0), i
        statuses = {u["toolCallId"]: u.get("status") for u in agent.updates(sid) if u.get("status")}
        assert statuses["call_write"] == ("completed" if i % 2 == 0 else "failed")
    assert relative_paths(agent.frames) == []


@pytest.mark.req(
    "acp:cancel:prompt-returns-cancelled",
    "acp:cancel:no-update-after-the-answer",
    "jsonrpc:notification:never-answered",
)
def test_a_cancel_storm_ends_the_turn_once_with_cancelled_and_no_update_after_the_answer(inproc, workspace, tmp_path):
    """Hundreds of `session/cancel` and `$/cancel_request` notifications (for this session, unknown sessions, unknown
    and wrong-typed ids) before, during and after one slow turn: the prompt gets exactly one answer, a `cancelled`
    result; no update follows it; no notification is answered; the next prompt in the session runs normally."""
    script = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {
                        "id": "call_slow",
                        "name": "bash",
                        "arguments": {"command": "sleep 300; echo too late", "timeoutMs": 600_000},
                    }
                ]
            },
            {"text": "second turn"},
        ],
    )
    agent = inproc("--model", f"scripted:{script}", "--mode", "auto")
    agent.initialize()
    sid = agent.new_session(workspace)
    storm = [
        ("session/cancel", {"sessionId": "sess_unknown"}),
        ("session/cancel", {"sessionId": 7}),
        ("$/cancel_request", {"requestId": 999_999}),
        ("$/cancel_request", {"requestId": True}),
        ("$/cancel_request", {"requestId": None}),
        ("session/cancel", {}),
    ]
    for method, params in storm * 10:
        agent.notify(method, params)
    rid = agent.start_prompt(sid, "go")
    agent.wait_for(
        lambda f: f.get("method") == "session/update" and f["params"]["update"].get("status") == "in_progress"
    )  # the turn is really running
    for _ in range(100):
        agent.notify("session/cancel", {"sessionId": sid})
        agent.notify("$/cancel_request", {"requestId": rid})
    for method, params in storm * 10:
        agent.notify(method, params)
    answer = agent.response(rid, timeout=10)
    assert answer["result"] == {"stopReason": "cancelled"}
    answered_at = agent.frames.index(answer)
    for _ in range(50):
        agent.notify("session/cancel", {"sessionId": sid})
        agent.notify("$/cancel_request", {"requestId": rid})
    second = agent.prompt(sid, "again")
    assert second["result"]["stopReason"] == "end_turn"
    between = agent.frames[answered_at + 1 : agent.frames.index(second)]
    first_turn_updates = [
        f for f in between if f.get("method") == "session/update" and "call_slow" in repr(f["params"])
    ]
    assert first_turn_updates == []
    said = [u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
    assert said == ["second", " turn"]  # the model was not called again in the cancelled turn
    assert len([f for f in agent.frames if "method" not in f and f.get("id") == rid]) == 1
    responses = [f for f in agent.frames if "method" not in f]
    assert all(f.get("id") is not None for f in responses), "a notification was answered"


@pytest.mark.req("acp:cancel:prompt-returns-cancelled")
def test_a_cancel_read_right_after_the_prompt_before_its_turn_starts_still_cancels_it(inproc, workspace, tmp_path):
    """ACP cancellation (ACP-CANCEL-001): the client may cancel as soon as it has sent the prompt. The agent reads
    both frames before the prompt's handler runs; the cancel must not be lost (it was: the turn ran to its end and
    answered `end_turn`). A cancel read after the answer must not leak into the next prompt either."""
    # Even a turn that would end at once must answer `cancelled`; the next prompt then takes the next entry.
    script = write_script(tmp_path / "m.json", [{"text": "the first turn must not run"}, {"text": "next"}])
    agent = inproc("--model", f"scripted:{script}")
    agent.initialize()
    sid = agent.new_session(workspace)
    prompt = {
        "jsonrpc": "2.0",
        "id": "p1",
        "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
    }
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    agent.send_raw(json.dumps(prompt).encode() + b"\n" + json.dumps(cancel).encode())  # one write, one read
    assert agent.response("p1", timeout=10)["result"]["stopReason"] == "cancelled"
    agent.notify("session/cancel", {"sessionId": sid})  # after the answer: nothing to cancel
    assert agent.prompt(sid, "again")["result"]["stopReason"] == "end_turn"
    assert "must not run" not in repr(agent.updates(sid))


@pytest.mark.req("acp:cancel:prompt-returns-cancelled", "gw:lifecycle:cancel-kills-tool-processes")
def test_cancelling_five_sessions_running_commands_at_once_cancels_each_and_leaves_no_process(inproc, tmp_path):
    """ACP cancellation + rules R6: each turn ends `cancelled` exactly once and the commands they started
    are dead afterwards."""
    from tests.e2e.test_faults_lifecycle import assert_groups_die, groups_with

    marker = f"gwstorm{os.getpid()}x{time.monotonic_ns() % 10**6}"
    script = write_script(
        tmp_path / "m.json",
        [
            {
                "tool_calls": [
                    {
                        "id": "call_sleep",
                        "name": "bash",
                        "arguments": {"command": f"sleep 300; echo {marker}", "timeoutMs": 600_000},
                    }
                ]
            }
        ],
    )
    agent = inproc("--model", f"scripted:{script}", "--mode", "auto")
    agent.initialize()
    sids = []
    for i in range(5):
        ws = tmp_path / f"w{i}"
        ws.mkdir()
        sids.append(agent.new_session(ws))
    rids = [agent.start_prompt(s, "go") for s in sids]
    for s in sids:
        agent.wait_for(
            lambda f, s=s: (
                f.get("method") == "session/update"
                and f["params"]["sessionId"] == s
                and f["params"]["update"].get("status") == "in_progress"
            )
        )
    groups = groups_with(marker)
    for s in sids:
        for _ in range(20):
            agent.notify("session/cancel", {"sessionId": s})
    answers = [agent.response(r, timeout=10) for r in rids]
    assert [a["result"]["stopReason"] for a in answers] == ["cancelled"] * 5
    assert_groups_die(groups)
    for r in rids:
        assert len([f for f in agent.frames if "method" not in f and f.get("id") == r]) == 1


@pytest.mark.req("jsonrpc:response:exactly-one-per-request")
def test_duplicate_request_ids_on_concurrent_prompts_are_each_answered_once(inproc, tmp_path):
    """JSON-RPC 2.0 §5 and rules R6 (duplicate ids): two prompts in flight under the same id, in two
    sessions, each get their own answer; a `$/cancel_request` for that id cancels one of them, never both, and
    never answers twice."""
    script = write_script(
        tmp_path / "m.json",
        [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 1.5; echo slept"}}]}, {"text": "finished"}],
    )
    agent = inproc("--model", f"scripted:{script}", "--mode", "auto")
    agent.initialize()
    sids = []
    for i in range(2):
        ws = tmp_path / f"d{i}"
        ws.mkdir()
        sids.append(agent.new_session(ws))
    for s in sids:
        agent.send(
            {
                "jsonrpc": "2.0",
                "id": "dup",
                "method": "session/prompt",
                "params": {"sessionId": s, "prompt": [{"type": "text", "text": "go"}]},
            }
        )
    for s in sids:  # both turns are running their command
        agent.wait_for(
            lambda f, s=s: (
                f.get("method") == "session/update"
                and f["params"]["sessionId"] == s
                and f["params"]["update"].get("status") == "in_progress"
            )
        )
    agent.notify("$/cancel_request", {"requestId": "dup"})
    agent.wait_for(
        lambda f: len([g for g in agent.frames if "method" not in g and g.get("id") == "dup"]) >= 2, timeout=20
    )
    assert agent.initialize()["protocolVersion"] == 1  # later frames arrive after any stray third answer would
    answers = [f for f in agent.frames if "method" not in f and f.get("id") == "dup"]
    assert sorted(a["result"]["stopReason"] for a in answers) == ["cancelled", "end_turn"]
