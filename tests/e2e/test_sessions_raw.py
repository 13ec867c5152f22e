"""Sessions that survive, through the raw harness (every frame schema-checked): `kill -9` in the middle of a turn,
queued prompts and cancel, two processes on one store, paging through `session/list`, and a long conversation that
is compacted and continued across a restart."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

from tests.support.harness import allow_once, never_answer, write_script


def load(agent, sid: str, ws: Path) -> dict:
    return agent.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})


def replayed(agent, sid: str, start: int = 0) -> list[dict]:
    return [f["params"]["update"] for f in agent.frames[start:]
            if f.get("method") == "session/update" and f["params"]["sessionId"] == sid]


def text_of(updates: list[dict], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def test_after_kill_9_mid_turn_the_session_loads_with_every_completed_step(spawn, tmp_path, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    model = write_script(tmp_path / "m.json", [
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "Now README.", "tool_calls": [{"id": "r2", "name": "read_file", "arguments": {"path": "README.md"}}]},
        {"thinking": "Time to write.",
         "tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "done\n"}}]},
        {"text": "Resumed and finished."},
    ])
    agent = spawn("--model", f"scripted:{model}", responder=never_answer)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.start_prompt(sid, "Do the work")
    agent.wait_for(lambda f: f.get("method") == "session/request_permission")
    os.killpg(agent.proc.pid, signal.SIGKILL)  # no shutdown code runs; the reader thread then sees EOF
    agent.proc.wait(10)

    again = spawn("--model", f"scripted:{model}", responder=allow_once)
    again.initialize()
    start = len(again.frames)
    assert "result" in load(again, sid, workspace)
    ups = replayed(again, sid, start)
    assert text_of(ups, "user_message_chunk") == "Do the work"
    assert text_of(ups) == "Now README."
    finals = {u["toolCallId"]: u for u in ups if u["sessionUpdate"] == "tool_call_update"}
    assert finals["r1"]["status"] == "completed" and finals["r2"]["status"] == "completed"
    assert finals["w1"]["status"] == "failed"  # announced, never finished: shown as interrupted
    assert "Interrupted" in finals["w1"]["content"][0]["content"]["text"]
    assert text_of(ups, "agent_thought_chunk") == "Time to write."
    # The model context holds both completed steps; the script resumes at the step that was cut short.
    assert again.prompt(sid, "Please continue")["result"]["stopReason"] == "end_turn"
    assert (workspace / "out.txt").read_text() == "done\n"
    assert text_of(replayed(again, sid)).endswith("Resumed and finished.")


def test_prompts_sent_while_busy_queue_in_order_and_cancel_resolves_the_queued_ones_too(spawn, tmp_path, workspace):
    # The first turn stays busy on a permission question nobody answers; its request proves the turn reached the
    # model (so the script's first entry is spent) before the cancel.
    model = write_script(tmp_path / "m.json", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
        {"text": "after the cancel"}])
    agent = spawn("--model", f"scripted:{model}", responder=never_answer)
    agent.initialize()
    sid = agent.new_session(workspace)
    ids = [agent.start_prompt(sid, t) for t in ("one", "two", "three")]
    agent.wait_for(lambda f: f.get("method") == "session/request_permission")
    agent.notify("session/cancel", {"sessionId": sid})
    answers = [agent.response(i) for i in ids]
    assert [a["result"]["stopReason"] for a in answers] == ["cancelled"] * 3
    order = [f["id"] for f in agent.frames if f.get("id") in ids and "result" in f]
    assert order == ids
    assert agent.prompt(sid, "four")["result"]["stopReason"] == "end_turn"
    assert text_of(replayed(agent, sid)) == "after the cancel"


def test_two_processes_write_one_store_at_once_and_a_third_sees_both_complete(spawn, tmp_path, workspace):
    n = 6
    model = write_script(tmp_path / "m.json", [{"text": f"answer {i}"} for i in range(n)])
    agents = [spawn("--model", f"scripted:{model}") for _ in range(2)]
    sids = []
    for a in agents:
        a.initialize()
        sids.append(a.new_session(workspace))

    def chat(agent, sid: str) -> None:
        for i in range(n):
            assert agent.prompt(sid, f"question {i}")["result"]["stopReason"] == "end_turn"

    threads = [threading.Thread(target=chat, args=(a, s)) for a, s in zip(agents, sids, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    third = spawn("--model", f"scripted:{model}")
    third.initialize()
    listed = third.result("session/list", {"cwd": str(workspace)})["sessions"]
    assert {s["sessionId"] for s in listed} == set(sids)
    for sid in sids:
        start = len(third.frames)
        assert "result" in load(third, sid, workspace)
        ups = replayed(third, sid, start)
        assert [u["content"]["text"] for u in ups if u["sessionUpdate"] == "user_message_chunk"] == \
            [f"question {i}" for i in range(n)]
        assert text_of(ups) == "".join(f"answer {i}" for i in range(n))


def test_session_list_pages_with_an_opaque_cursor_and_filters_by_cwd(spawn, tmp_path, workspace):
    other = tmp_path / "other"
    other.mkdir()
    agent = spawn(env={"GATEWRIGHT_LIST_PAGE_SIZE": "2"})
    agent.initialize()
    mine = {agent.new_session(workspace) for _ in range(5)}
    theirs = agent.new_session(other)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"cwd": str(workspace)} | ({"cursor": cursor} if cursor else {})
        page = agent.result("session/list", params)
        pages += 1
        seen += [s["sessionId"] for s in page["sessions"]]
        assert all(s["cwd"] == str(workspace) and s["updatedAt"].endswith("Z") for s in page["sessions"])
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert pages == 3 and len(seen) == 5 and set(seen) == mine
    assert theirs in {s["sessionId"] for s in agent.result("session/list", {})["sessions"]}
    bad = agent.request("session/list", {"cursor": "not-a-cursor"})
    assert bad["error"]["code"] == -32602
    assert agent.result("session/list", {"cwd": str(tmp_path / "nothing")}) == {"sessions": []}


def test_a_long_conversation_is_compacted_and_continues_after_a_restart(spawn, tmp_path, workspace):
    checkpoint = json.dumps({"goal": "keep talking", "criticalContext": ["the magic word is PLUM"]})
    model = write_script(tmp_path / "m.json", [{"text": checkpoint} for _ in range(40)])
    env = {"GATEWRIGHT_CONTEXT_WINDOW": "4000"}
    agent = spawn("--model", f"scripted:{model}", env=env)
    agent.initialize()
    sid = agent.new_session(workspace)
    filler = "lorem ipsum dolor sit amet " * 70  # ~470 tokens per prompt
    for i in range(10):
        assert agent.prompt(sid, f"message {i}: {filler}")["result"]["stopReason"] == "end_turn"
    assert "Context compacted" in text_of(replayed(agent, sid))
    status = agent.result("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/status"}]})
    assert status["stopReason"] == "end_turn"
    agent.close()

    again = spawn("--model", f"scripted:{model}", env=env)
    again.initialize()
    start = len(again.frames)
    assert "result" in load(again, sid, workspace)
    ups = replayed(again, sid, start)
    # The replay is the whole conversation, even though the model context was compacted.
    assert len([u for u in ups if u["sessionUpdate"] == "user_message_chunk"]) == 11
    before = len(again.frames)
    again.result("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/status"}]})
    status_text = text_of(replayed(again, sid, before))
    messages = int(status_text.split(" messages")[0].rsplit(" ", 1)[-1])
    assert messages < 12  # 10 user prompts and 10 answers would be 20 without the checkpoint
    assert again.prompt(sid, f"message 10: {filler}")["result"]["stopReason"] == "end_turn"


def test_cancel_request_for_a_queued_prompt_cancels_only_that_one(spawn, tmp_path, workspace):
    model = write_script(tmp_path / "m.json", [{"delay_ms": 1_500, "text": "first done"}, {"text": "third done"}])
    agent = spawn("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    ids = [agent.start_prompt(sid, t) for t in ("one", "two", "three")]
    agent.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "session_info_update")
    agent.notify("$/cancel_request", {"requestId": ids[1]})
    stops = [agent.response(i)["result"]["stopReason"] for i in ids]
    assert stops == ["end_turn", "cancelled", "end_turn"]
    assert text_of(replayed(agent, sid)) == "first donethird done"


def test_an_audio_block_without_a_mime_type_is_refused_so_a_load_never_replays_an_invalid_frame(spawn, tmp_path,
                                                                                              workspace):
    model = write_script(tmp_path / "m.json", [{"text": "ok"}])
    agent = spawn("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    answer = agent.request("session/prompt", {"sessionId": sid,
                                              "prompt": [{"type": "audio", "data": "x", "mimeType": None}]})
    assert answer["error"]["code"] == -32602
    assert "result" in load(agent, sid, workspace)  # the fixture checks every replayed frame against the schema
