"""Session methods through the raw harness in process (tests/support/inprocess.py; every frame schema-checked):
queued prompts and cancel, paging through `session/list`, a long conversation that is compacted and continued after
a restart (a second agent on the same state dir). `kill -9` mid-turn and two processes on one store need the real
binary: tests/e2e/test_sessions_raw.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.harness import never_answer, write_script


def load(agent, sid: str, ws: Path) -> dict:
    return agent.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})


def replayed(agent, sid: str, start: int = 0) -> list[dict]:
    return [
        f["params"]["update"]
        for f in agent.frames[start:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
    ]


def text_of(updates: list[dict], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def test_prompts_sent_while_busy_queue_in_order_and_cancel_resolves_the_queued_ones_too(inproc, tmp_path, workspace):
    # The first turn stays busy on a permission question nobody answers; its request proves the turn reached the
    # model (so the script's first entry is spent) before the cancel.
    model = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
            {"text": "after the cancel"},
        ],
    )
    agent = inproc("--model", f"scripted:{model}", responder=never_answer)
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


def test_session_list_pages_with_an_opaque_cursor_and_filters_by_cwd(inproc, tmp_path, workspace):
    other = tmp_path / "other"
    other.mkdir()
    agent = inproc(env={"GATEWRIGHT_LIST_PAGE_SIZE": "2"})
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


def test_a_long_conversation_is_compacted_and_continues_after_a_restart(inproc, tmp_path, workspace):
    checkpoint = json.dumps({"goal": "keep talking", "criticalContext": ["the magic word is PLUM"]})
    model = write_script(tmp_path / "m.json", [{"text": checkpoint} for _ in range(40)])
    env = {"GATEWRIGHT_CONTEXT_WINDOW": "4000"}
    agent = inproc("--model", f"scripted:{model}", env=env)
    agent.initialize()
    sid = agent.new_session(workspace)
    filler = "lorem ipsum dolor sit amet " * 70  # ~470 tokens per prompt
    for i in range(10):
        assert agent.prompt(sid, f"message {i}: {filler}")["result"]["stopReason"] == "end_turn"
    assert "Context compacted" in text_of(replayed(agent, sid))
    status = agent.result("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/status"}]})
    assert status["stopReason"] == "end_turn"
    agent.close()

    again = inproc("--model", f"scripted:{model}", env=env)
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


def test_cancel_request_for_a_queued_prompt_cancels_only_that_one(inproc, tmp_path, workspace):
    model = write_script(tmp_path / "m.json", [{"delay_ms": 1_500, "text": "first done"}, {"text": "third done"}])
    agent = inproc("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    ids = [agent.start_prompt(sid, t) for t in ("one", "two", "three")]
    agent.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate") == "session_info_update")
    agent.notify("$/cancel_request", {"requestId": ids[1]})
    stops = [agent.response(i)["result"]["stopReason"] for i in ids]
    assert stops == ["end_turn", "cancelled", "end_turn"]
    assert text_of(replayed(agent, sid)) == "first donethird done"


def test_an_audio_block_without_a_mime_type_is_refused_so_a_load_never_replays_an_invalid_frame(
    inproc, tmp_path, workspace
):
    model = write_script(tmp_path / "m.json", [{"text": "ok"}])
    agent = inproc("--model", f"scripted:{model}")
    agent.initialize()
    sid = agent.new_session(workspace)
    answer = agent.request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "audio", "data": "x", "mimeType": None}]}
    )
    assert answer["error"]["code"] == -32602
    assert "result" in load(agent, sid, workspace)  # the fixture checks every replayed frame against the schema
