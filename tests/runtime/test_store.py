"""The SQLite session store: migrations, the replay log, the model context by epoch, paging, forks, and several
processes writing one file at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.models.base import (
    AssistantMessage,
    ImagePart,
    TextPart,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from runtime.store import CursorError, SessionRecord, SessionStore
from runtime.store.codec import decode_message, encode_message
from runtime.store.db import MIGRATIONS, connect


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    s = SessionStore(tmp_path / "state" / "gw.sqlite3")
    yield s
    s.close()


def rec(sid: str, cwd: str = "/w", **kw) -> SessionRecord:
    return SessionRecord(sid, cwd, "safe", **kw)


def test_a_new_database_is_in_wal_mode_at_the_latest_schema_version(tmp_path):
    conn = connect(tmp_path / "db.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000


def test_migrations_run_once_and_a_newer_database_is_refused(tmp_path):
    path = tmp_path / "db.sqlite3"
    connect(path).close()
    connect(path).close()  # re-opening applies nothing twice
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    raw.close()
    with pytest.raises(RuntimeError, match="newer"):
        connect(path)


def test_messages_round_trip_including_images_tool_calls_and_provider_state():
    msgs = [
        UserMessage((TextPart("look"), ImagePart("aGk=", "image/png"))),
        AssistantMessage("ok", "hmm", (ToolCallRequest("c1", "read_file", '{"path": "a"}'),), {"sig": "x"}),
        ToolResultMessage("c1", "read_file", "contents", False),
    ]
    assert [decode_message(encode_message(m)) for m in msgs] == msgs


def test_unknown_message_fields_from_a_newer_build_are_ignored_when_reading():
    m = decode_message(
        '{"role": "tool", "call_id": "c", "name": "bash", "output": "x", "is_error": false, '
        '"from_the_future": {"trace": [1, 2]}}'
    )
    assert m == ToolResultMessage("c", "bash", "x")


def test_tool_result_meta_with_traces_round_trips():
    m = ToolResultMessage("c", "bash", "x", meta={"operationId": "op-1", "trace": [1, 2]})
    assert decode_message(encode_message(m)) == m


def test_events_keep_their_order_and_arbitrary_meta(store):
    store.create(rec("s1"))
    store.append_events("s1", [("tool_call", {"toolCallId": "a", "_meta": {"trace": {"ms": 3}}})])
    store.append_events("s1", [("agent_message_chunk", {"text": "x"}), ("tool_call_update", {"toolCallId": "a"})])
    assert [k for k, _ in store.events("s1")] == ["tool_call", "agent_message_chunk", "tool_call_update"]
    assert store.events("s1")[0][1]["_meta"] == {"trace": {"ms": 3}}


def test_context_appends_in_place_and_a_rewrite_starts_a_new_epoch(store):
    store.create(rec("s1"))
    a, b, c = UserMessage((TextPart("a"),)), AssistantMessage("b"), UserMessage((TextPart("c"),))
    store.append_messages("s1", 0, 0, [a, b], {"steps_taken": 1})
    store.append_messages("s1", 0, 2, [c])
    assert store.context("s1") == (0, [a, b, c])
    epoch = store.replace_context("s1", [c])
    assert store.context("s1") == (epoch, [c]) and epoch == 1
    assert store.get("s1").state == {"steps_taken": 1}


def test_list_filters_by_cwd_pages_with_an_opaque_cursor_and_is_empty_not_an_error(store):
    for i in range(7):
        store.create(rec(f"s{i}", "/a" if i % 2 else "/b", updated_at=1000.0 + i, created_at=1.0))
    page, cursor = store.list(limit=3)
    assert [r.id for r in page] == ["s6", "s5", "s4"] and cursor
    seen = [r.id for r in page]
    while cursor:
        page, cursor = store.list(cursor=cursor, limit=3)
        seen += [r.id for r in page]
    assert seen == [f"s{i}" for i in range(6, -1, -1)]
    assert [r.id for r in store.list("/a")[0]] == ["s5", "s3", "s1"]
    assert store.list("/nowhere") == ([], None)
    with pytest.raises(CursorError):
        store.list(cursor="garbage!")


def test_sessions_with_the_same_update_time_page_without_loss_or_repeats(store):
    for i in range(5):
        store.create(rec(f"s{i}", updated_at=5.0, created_at=1.0))
    seen, cursor = [], None
    while True:
        page, cursor = store.list(cursor=cursor, limit=2)
        seen += [r.id for r in page]
        if not cursor:
            break
    assert sorted(seen) == [f"s{i}" for i in range(5)] and len(seen) == 5


def test_delete_removes_the_session_its_log_and_context(store):
    store.create(rec("s1"))
    store.append_events("s1", [("x", {})])
    store.append_messages("s1", 0, 0, [AssistantMessage("b")])
    assert store.delete("s1") and not store.delete("s1")
    assert store.get("s1") is None and store.events("s1") == [] and store.context("s1") == (0, [])


def test_fork_copies_log_context_and_settings_under_a_new_id(store):
    store.create(rec("s1", title="t", model_id="m", state={"model_position": 3}))
    store.append_events("s1", [("x", {"n": 1})])
    store.replace_context("s1", [AssistantMessage("b")])
    forked = store.fork("s1", "s2")
    assert forked is not None and forked.parent_id == "s1" and forked.title == "t"
    assert store.events("s2") == [("x", {"n": 1})]
    assert store.context("s2")[1] == [AssistantMessage("b")]
    assert store.get("s2").state == {"model_position": 3}
    assert store.fork("nope", "s3") is None


WRITER = textwrap.dedent("""
    import sys
    from runtime.store import SessionStore, SessionRecord
    s = SessionStore(sys.argv[1])
    tag = sys.argv[2]
    try:
        s.create(SessionRecord("shared", "/w", "safe"))
    except Exception:
        pass
    s.create(SessionRecord("own-" + tag, "/w", "safe"))
    for i in range(150):
        s.append_events("shared", [("e", {"tag": tag, "i": i})])
        s.append_events("own-" + tag, [("e", {"i": i})])
        s.save("own-" + tag, title=f"t{i}")
""")


def test_two_processes_writing_the_same_store_at_once_lose_nothing(tmp_path):
    path = tmp_path / "state" / "gw.sqlite3"
    root = str(Path(__file__).resolve().parents[2])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), tag],
            cwd=root,
            stderr=subprocess.PIPE,
            env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    store = SessionStore(path)
    shared = store.events("shared")
    assert len(shared) == 300
    for tag in ("a", "b"):
        assert [d["i"] for _, d in shared if d["tag"] == tag] == list(range(150))
        assert len(store.events("own-" + tag)) == 150 and store.get("own-" + tag).title == "t149"
