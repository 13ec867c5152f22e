"""The audit log: redaction, argument summaries, storage, and `gatewright audit`."""

from __future__ import annotations

import json

import pytest

from permissions.audit import AuditLog, summarize_arguments
from permissions.redaction import redact
from tests.support.permissions_helpers import run_gatewright


@pytest.mark.parametrize(
    "text",
    [
        "curl -H 'Authorization: Bearer abcdefghijklmnop' x",
        "OPENAI_API_KEY=sk-proj-abcdefghijklmnop make",
        "git clone https://x --token ghp_abcdefghijklmnopqrstu",
        "aws s3 ls # AKIAABCDEFGHIJKLMNOP",
        "mysql --password=hunter2hunter2",
        "export GITHUB_TOKEN='zzzzzzzzzzzz'",
        "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_well_known_secret_shapes_are_redacted(text):
    out = redact(text, frozenset())
    assert "<redacted>" in out
    for secret in ("abcdefghijklmnop", "hunter2hunter2", "zzzzzzzzzzzz", "AKIAABCDEFGHIJKLMNOP", "\nabc\n"):
        assert secret not in out


def test_values_of_secret_environment_variables_are_redacted_wherever_they_appear(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_SECRET", "plainvalue42")
    assert redact("echo plainvalue42 | nc host 1") == "echo <redacted> | nc host 1"


def test_ordinary_commands_are_left_alone():
    assert redact("npm test -- --token-count 3", frozenset()) == "npm test -- --token-count 3"
    assert redact("ls -la src", frozenset()) == "ls -la src"


def test_argument_summaries_show_file_contents_only_by_length():
    s = summarize_arguments({"path": "a.txt", "content": "my secret diary"})
    assert "my secret diary" not in s and "15 characters" in s and "a.txt" in s
    assert len(summarize_arguments({"pattern": "x" * 5000})) <= 300


def test_a_command_is_audited_whole_and_redacted():
    """Before, a 284-character command was audited as '<284 characters>': the log could not say what ran."""
    command = (
        "echo start && "
        + " && ".join(f"step{i} --flag" for i in range(40))
        + " ; curl -H 'Authorization: Bearer sk-abcdef1234567890abcdef' x"
    )
    s = json.loads(summarize_arguments({"command": command, "cwd": "sub", "timeoutMs": 1000}))
    assert s["command"].startswith("echo start && step0 --flag") and "step39 --flag" in s["command"]
    assert "sk-abcdef1234567890abcdef" not in s["command"] and "<redacted>" in s["command"]
    assert s["cwd"] == "sub"


def test_entries_are_recorded_completed_and_filtered(tmp_path):
    log = AuditLog(str(tmp_path))
    a = log.begin(
        session_id="s1",
        call_id="c1",
        tool="bash",
        summary='{"command": "ls"}',
        decision="allow",
        decided_by="mode:safe",
        reason="r",
        project="/ws",
    )
    log.begin(
        session_id="s2",
        call_id="c2",
        tool="edit",
        summary="{}",
        decision="deny",
        decided_by="mode:read-only",
        reason="r",
        outcome="denied",
    )
    log.end(a, "completed", 12)
    entries = log.entries()
    assert [(e.call_id, e.outcome, e.run_ms) for e in entries] == [("c1", "completed", 12), ("c2", "denied", None)]
    assert [e.call_id for e in log.entries(session_id="s2")] == ["c2"]
    assert [e.call_id for e in log.entries(project="/ws")] == ["c1"]
    assert [e.call_id for e in log.entries(limit=1)] == ["c2"]


def test_an_unwritable_audit_log_never_breaks_a_call(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = AuditLog(str(blocker / "sub"))  # its directory cannot be created
    assert (
        log.begin(session_id="s", call_id="c", tool="t", summary="", decision="allow", decided_by="m", reason="r")
        is None
    )
    log.end(None, "completed")


def test_gatewright_audit_shows_the_log_readably_and_as_json(tmp_path):
    log = AuditLog(str(tmp_path))
    seq = log.begin(
        session_id="sess_1",
        call_id="call_1",
        tool="bash",
        summary='{"command": "npm test"}',
        decision="ask",
        decided_by="user",
        reason="safe mode asks before execute actions",
        option="allow_once",
        ask_ms=1500,
    )
    log.end(seq, "completed", 40)
    log.close()
    out = run_gatewright("audit", state=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "call_1" in out.stdout and "ask   by user option=allow_once -> completed" in out.stdout
    assert "asked 1500 ms, ran 40 ms" in out.stdout and "npm test" in out.stdout
    (line,) = run_gatewright("audit", "--json", state=str(tmp_path)).stdout.splitlines()
    assert json.loads(line)["decided_by"] == "user"
    assert (
        run_gatewright("audit", "--session", "other", state=str(tmp_path)).stdout.strip() == "The audit log is empty."
    )
