"""Framing and classification, sans I/O (JSON-RPC 2.0 §4–5; ACP stdio transport)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_server import wire
from acp_server.errors import InvalidRequest, ParseError


def test_lines_split_across_chunks_are_reassembled():
    s = wire.LineSplitter(100)
    assert s.feed(b'{"a"') == []
    assert s.feed(b":1}\n{") == [b'{"a":1}']
    assert s.feed(b"}\n") == [b"{}"]


def test_a_line_over_the_bound_is_reported_once_and_the_next_line_survives():
    s = wire.LineSplitter(10)
    out = s.feed(b"x" * 25) + s.feed(b"yy\nok\n")
    assert isinstance(out[0], wire.Oversized) and out[0].size == 27
    assert out[1:] == [b"ok"]


def test_a_final_line_without_newline_counts_at_eof():
    s = wire.LineSplitter(100)
    s.feed(b'{"x":1}')
    assert s.close() == [b'{"x":1}']


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{}}', wire.Request(1, "m", {})),
        (b'{"jsonrpc":"2.0","id":"1","method":"m"}', wire.Request("1", "m", None)),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', wire.Request(None, "m", None)),
        (b'{"jsonrpc":"2.0","method":"n","params":[1]}', wire.Notification("n", [1])),
        (b'{"jsonrpc":"2.0","id":3,"result":{}}', wire.Response(3, result={})),
        (
            b'{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}',
            wire.Response(3, error={"code": 1, "message": "m"}, is_error=True),
        ),
    ],
)
def test_well_formed_frames_are_classified(line, expected):
    assert wire.classify(line) == expected


@pytest.mark.parametrize(
    ("line", "error", "rid"),
    [
        (b"nope", ParseError, None),
        (b"{", ParseError, None),
        (b"[]", InvalidRequest, None),
        (b"[1,2,3]", InvalidRequest, None),
        (b"42", InvalidRequest, None),
        (b'{"foo":"bar"}', InvalidRequest, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', InvalidRequest, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', InvalidRequest, None),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', InvalidRequest, 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":"s"}', InvalidRequest, 7),
        (b'{"jsonrpc":"1.0","id":7,"method":"m"}', InvalidRequest, 7),
        (b'{"jsonrpc":"2.0","result":1}', InvalidRequest, None),
    ],
)
def test_malformed_frames_become_typed_errors(line, error, rid):
    frame = wire.classify(line)
    assert isinstance(frame, wire.Invalid)
    assert isinstance(frame.error, error)
    assert frame.id == rid


def test_blank_lines_are_ignored():
    assert wire.classify(b"   ") is None


def test_correlation_keys_keep_int_and_string_ids_apart():
    assert wire.id_key(1) != wire.id_key("1")


def test_encoded_frames_are_one_line():
    assert wire.encode({"text": "a\nb"}).count(b"\n") == 1


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_classify_never_raises_on_arbitrary_bytes(data):
    for line in data.split(b"\n"):
        wire.classify(line)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=50), max_size=20), st.integers(min_value=1, max_value=64))
def test_splitting_is_independent_of_chunk_boundaries(chunks, bound):
    data = b"".join(chunks)
    whole = wire.LineSplitter(bound)
    expected = whole.feed(data) + whole.close()
    parts = wire.LineSplitter(bound)
    got = []
    for c in chunks:
        got += parts.feed(c)
    got += parts.close()
    assert got == expected
