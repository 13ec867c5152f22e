"""Recorded transcripts (tests/transcripts/*.jsonl, made with `--record`) replay frame for frame
(docs/transcripts.md), and every frame in them is valid under the official schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.replay import check
from acp_server.transcript import id_key, load
from tests.support.acp_schema import agent_frame_errors
from tests.support.sdk_client import check_recorded_frames

TRANSCRIPTS = sorted((Path(__file__).parents[1] / "transcripts").glob("*.jsonl"))


def test_there_are_at_least_five_recorded_transcripts():
    assert len(TRANSCRIPTS) >= 5


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_a_recorded_transcript_replays_frame_for_frame(path, tmp_path):
    """The product's own replay (`gatewright replay --check`) finds no divergence, and every frame the agent wrote
    this time is valid under the official schema."""
    result = check(load(path), workdir=tmp_path, idle=15)
    assert result.ok, f"{result.divergence.summary}\n{result.divergence.detail}\n{result.stderr}"
    assert len(result.actual) == len(result.expected), _diff(result.expected, result.actual)
    errors = [
        (f, errs)
        for f in result.frames
        if (errs := agent_frame_errors(f, None if "method" in f else result.requests.get(id_key(f.get("id")))))
    ]
    assert not errors, errors[:3]


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_every_recorded_frame_is_valid_under_the_schema(path):
    check_recorded_frames(path)


def test_recording_never_writes_secret_values(tmp_path):
    import os

    from runtime.recording import TranscriptRecorder

    os.environ["GW_TEST_API_KEY"] = "sk-test-very-secret-value"
    try:
        rec = TranscriptRecorder(str(tmp_path / "t.jsonl"), {"model": "x"})
        rec.record(
            "in",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/new",
                "params": {
                    "cwd": "/w",
                    "mcpServers": [
                        {"name": "s", "command": "/bin/x", "args": [], "env": [{"name": "TOKEN", "value": "hunter2"}]},
                        {
                            "type": "http",
                            "name": "h",
                            "url": "http://x",
                            "headers": [{"name": "Authorization", "value": "Bearer abc"}],
                        },
                    ],
                },
            },
        )
        rec.record(
            "in", {"jsonrpc": "2.0", "id": 2, "method": "authenticate", "params": {"methodId": "openai", "key": "zzz"}}
        )
        rec.record(
            "out",
            {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "the key is sk-test-very-secret-value"}},
        )
        rec.close()
    finally:
        del os.environ["GW_TEST_API_KEY"]
    text = (tmp_path / "t.jsonl").read_text()
    for secret in ("hunter2", "Bearer abc", "zzz", "sk-test-very-secret-value"):
        assert secret not in text
    assert text.count("<redacted>") >= 4


def _diff(expected, actual) -> str:
    def kind(n):
        return n.msg.get("method") or ("result" if "result" in n.msg else "error")

    return f"expected {[kind(n) for n in expected]}\nactual   {[kind(n) for n in actual]}"
