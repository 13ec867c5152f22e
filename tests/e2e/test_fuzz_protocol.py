"""Fuzzing `gatewright acp` over its real stdio: one long-lived agent process per test, many Hypothesis examples.

Invariants checked after every example (JSON-RPC 2.0 §4–§6, ACP v1 transports, docs/rules.md R8):
- every request gets exactly one answer carrying its id; notifications and responses get none; an input the agent
  cannot read as a request gets exactly one error (id null unless one could be read) — the oracle is
  `tests.support.fuzz_strategies.expected_answer`, written from the spec rather than from `acp_server.wire`;
- every output line is a JSON-RPC frame valid under the official ACP schema (the harness checks each frame);
- no answer is an internal error (-32603): bad input gets a typed error, never a crash;
- the process stays up and keeps answering (a sentinel request closes every example).

The bound: `GW_FUZZ_SCALE` multiplies the example counts (bench/fuzz_long.py runs the same tests far longer).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fuzz_strategies import (
    CLIENT_NOTIFICATIONS,
    CLIENT_REQUESTS,
    JSON_VALUES,
    NO_ANSWER,
    TEXT,
    deep_nesting,
    expected_answer,
    frame_line,
    from_schema,
    garbage_lines,
    mutate_wrong_type,
)
from tests.support.harness import AgentProcess

MAX_FRAME = 65_536
SCALE = float(os.environ.get("GW_FUZZ_SCALE", "1"))
CRASH = -32603

pytestmark = [pytest.mark.timeout(int(120 * max(1.0, SCALE)))]


def fuzz_settings(examples: int) -> Any:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


class Fuzzer:
    """Sends lines to one agent and keeps the books: how many answers each id is owed, and how many it got."""

    def __init__(self, agent: AgentProcess) -> None:
        self.agent = agent
        self.owed: Counter[str] = Counter()
        self.seen: Counter[str] = Counter()
        self.scanned = 0
        self.serial = 0
        self.examples = 0
        self.lines = 0

    def next_id(self, kind: str = "int") -> Any:
        self.serial += 1
        return 10_000_000 + self.serial if kind == "int" else f"fz-{self.serial}"

    def send(self, line: bytes, method: str | None = None) -> None:
        kind, rid = expected_answer(line, MAX_FRAME)
        if kind != NO_ANSWER:
            key = json.dumps(rid)
            self.owed[key] += 1
            if self.owed[key] > 1 or method is None or rid is None:
                # a reused id may answer another method: only the envelope can be checked for it
                self.agent._methods.pop(key, None)
            else:
                self.agent._methods[key] = method  # the harness checks the result against its schema
        self.lines += 1
        self.agent.send_raw(line)

    def send_frame(self, frame: Any) -> None:
        method = frame.get("method") if isinstance(frame, dict) and isinstance(frame.get("method"), str) else None
        self.send(frame_line(frame), method)

    def _tally(self) -> None:
        frames = self.agent.frames
        while self.scanned < len(frames):
            f = frames[self.scanned]
            self.scanned += 1
            if isinstance(f, dict) and "method" not in f:
                self.seen[json.dumps(f.get("id"))] += 1
                assert f.get("error", {}).get("code") != CRASH, f"an internal error answered fuzz input: {f}"

    def sync(self) -> None:
        """Close an example: a sentinel request must be answered, and every id must have exactly what it is owed."""
        self.examples += 1
        sentinel = self.next_id("str")
        self.send_frame({"jsonrpc": "2.0", "id": sentinel, "method": "_gatewright.fuzz/ping", "params": {}})
        deadline = time.monotonic() + 20
        while True:
            self._tally()
            if all(self.seen[k] >= n for k, n in self.owed.items()):
                break
            assert self.agent.proc.poll() is None, f"the agent died; stderr:\n{self.agent.stderr[-3000:]}"
            missing = {k: n - self.seen[k] for k, n in self.owed.items() if self.seen[k] < n}
            assert time.monotonic() < deadline, f"answers missing {missing}; stderr:\n{self.agent.stderr[-3000:]}"
            time.sleep(0.002)
        extra = {k: v for k, v in self.seen.items() if v != self.owed[k]}
        assert not extra, f"answers beyond what was owed (id: count seen) {extra}, owed {dict(self.owed)}"
        assert not self.agent.schema_errors, self.agent.schema_errors[:3]
        assert self.agent.proc.poll() is None

    def finish(self) -> None:
        """Everything answered exactly once at the end too (late duplicates would show here), then a clean EOF."""
        self.sync()
        assert self.agent.close() == 0
        self._tally()
        assert self.seen == self.owed, {
            k: (self.seen[k], self.owed[k]) for k in set(self.seen) | set(self.owed) if self.seen[k] != self.owed[k]
        }
        report = os.environ.get("GW_FUZZ_REPORT")
        if report:
            with open(report, "a", encoding="utf-8") as f:
                test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
                f.write(json.dumps({"test": test, "examples": self.examples, "lines": self.lines}) + "\n")


@pytest.fixture
def fuzzer(spawn, workspace: Path):
    agent = spawn(env={"GATEWRIGHT_MAX_FRAME_BYTES": str(MAX_FRAME)})
    agent.initialize()
    sessions = [agent.new_session(workspace) for _ in range(2)]
    fz = Fuzzer(agent)
    fz.scanned = len(agent.frames)  # the set-up requests above were answered already
    fz.workspace = workspace  # type: ignore[attr-defined]
    fz.sessions = sessions  # type: ignore[attr-defined]
    fz.sync()
    yield fz
    fz.finish()


def envelope(draw: Any, fz: Fuzzer, method: str, params: Any, notification: bool = False) -> dict[str, Any]:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notification:
        kind = draw(st.sampled_from(["int", "str", "int", "str", "null", "duplicate"]))
        if kind == "null":
            frame["id"] = None  # discouraged but valid (JSON-RPC 2.0 §4): answered with id null
        elif kind == "duplicate":
            frame["id"] = 10_000_000 + fz.serial  # reuses the last integer id: still one answer per request
        else:
            frame["id"] = fz.next_id(kind)
    return frame


@st.composite
def client_frame(draw: Any, fz: Fuzzer) -> dict[str, Any]:
    """A schema-valid request or notification for any client→agent method, aimed at real sessions and cwds."""
    overrides = {
        "sessionId": st.sampled_from(fz.sessions) | TEXT,  # type: ignore[attr-defined]
        "cwd": st.sampled_from([str(fz.workspace), "/", "relative/dir"]),  # type: ignore[attr-defined]
        # a recent id (maybe still in flight); drawn as an offset so that the draws never depend on state
        "requestId": st.integers(-2, 20).map(lambda k: 10_000_000 + fz.serial - k),
    }
    if draw(st.integers(0, 5)) == 0:
        method = draw(st.sampled_from(sorted(CLIENT_NOTIFICATIONS)))
        return envelope(draw, fz, method, draw(from_schema(CLIENT_NOTIFICATIONS[method], overrides)), True)
    method = draw(st.sampled_from(sorted(CLIENT_REQUESTS)))
    params = draw(from_schema(CLIENT_REQUESTS[method], overrides))
    if method == "session/prompt":
        params["prompt"] = params["prompt"][:2]  # no model is configured: the turn answers at once either way
    return envelope(draw, fz, method, params)


@pytest.mark.req(
    "jsonrpc:response:exactly-one-per-request",
    "acp:schema:every-agent-frame-valid",
    "jsonrpc:notification:never-answered",
    "acp:transport:stdout-only-acp-frames",
)
def test_schema_generated_params_for_every_method_get_exactly_one_result_or_typed_error(fuzzer):
    """ACP schema §3 methods with params drawn from the official `$defs`: a result or a typed error, never a crash,
    never two answers; notifications (session/cancel, $/cancel_request) are never answered."""

    @fuzz_settings(150)
    @given(st.data())
    def run(data: Any) -> None:
        for _ in range(data.draw(st.integers(1, 4))):
            fuzzer.send_frame(data.draw(client_frame(fuzzer)))
        fuzzer.sync()

    run()


@pytest.mark.req(
    "jsonrpc:invalid-request:not-a-request-object",
    "jsonrpc:invalid-params:typed-error",
    "jsonrpc:request-id:bool-is-invalid",
)
def test_wrong_types_in_any_field_of_any_frame_get_exactly_one_typed_error_and_serving_continues(fuzzer):
    """JSON-RPC 2.0 §4/§5.1 and ACP params: a wrong JSON type anywhere (envelope fields, id, params at any depth)
    is answered with one typed error (or nothing, for what reads as a notification or a response)."""

    @fuzz_settings(200)
    @given(st.data())
    def run(data: Any) -> None:
        for _ in range(data.draw(st.integers(1, 4))):
            frame = data.draw(client_frame(fuzzer))
            fuzzer.send_frame(data.draw(mutate_wrong_type(frame)))
        fuzzer.sync()

    run()


@pytest.mark.req("jsonrpc:parse-error:null-id", "acp:transport:stdout-only-acp-frames")
def test_random_bytes_and_random_json_lines_are_answered_by_the_spec_and_never_stop_the_agent(fuzzer):
    """JSON-RPC 2.0 §5.1: unparseable lines get -32700 with id null; any other JSON value that is not a request gets
    -32600; blank lines are skipped. Mixed with valid frames, which must still be served."""

    @fuzz_settings(200)
    @given(st.data())
    def run(data: Any) -> None:
        for _ in range(data.draw(st.integers(1, 6))):
            choice = data.draw(st.integers(0, 3))
            if choice == 0:
                fuzzer.send(data.draw(garbage_lines()))
            elif choice == 1:
                fuzzer.send(frame_line(data.draw(JSON_VALUES)))
            elif choice == 2:
                frame = data.draw(
                    st.dictionaries(
                        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
                        JSON_VALUES,
                        max_size=5,
                    )
                )
                fuzzer.send(frame_line(frame))
            else:
                fuzzer.send_frame(data.draw(client_frame(fuzzer)))
        fuzzer.sync()

    run()


@pytest.mark.req("gw:frame:oversized-refused-and-serving-continues", "gw:frame:deep-nesting-refused")
def test_deep_nesting_and_frames_around_the_size_bound_are_refused_once_and_serving_continues(fuzzer):
    """Rules R3/T14: a frame over the bound gets one -32600 and is dropped up to its newline; nesting past
    the parser's bound is a parse error; neither costs the connection. Frames just under the bound are served."""

    @fuzz_settings(40)
    @given(st.data())
    def run(data: Any) -> None:
        choice = data.draw(st.integers(0, 1))
        if choice == 0:
            fuzzer.send(data.draw(deep_nesting()))
        else:
            size = data.draw(st.integers(MAX_FRAME - 200, MAX_FRAME + 200))
            frame = {
                "jsonrpc": "2.0",
                "id": fuzzer.next_id(),
                "method": "session/set_mode",
                "params": {"sessionId": fuzzer.sessions[0], "modeId": "safe", "_meta": {"pad": ""}},
            }
            pad = size - len(frame_line(frame))
            frame["params"]["_meta"]["pad"] = "x" * max(0, pad)
            fuzzer.send_frame(frame)
        fuzzer.sync()

    run()


@pytest.mark.req("jsonrpc:invalid-params:typed-error")
def test_wrong_typed_session_ids_in_prompts_and_cancels_never_stop_the_agent(spawn, workspace):
    """Regression, found by the wrong-types fuzzer: a `session/prompt` whose `sessionId` was a list reached the
    cancel bookkeeping (run in the reader loop, before the handler) as a dict key and killed the process. Every
    such frame now gets its typed error or nothing, and serving continues."""
    agent = spawn()
    agent.initialize()
    sid = agent.new_session(workspace)
    for bad in (["a"], {"a": 1}, 7, None, True, [sid]):
        assert agent.request("session/prompt", {"sessionId": bad, "prompt": []})["error"]["code"] == -32602
        agent.notify("session/cancel", {"sessionId": bad})
        agent.notify("$/cancel_request", {"requestId": bad})
    assert agent.initialize()["protocolVersion"] == 1
