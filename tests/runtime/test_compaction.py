"""Compaction in process: where the cut falls, checkpoints written by the model in the middle of one long turn,
the fallback when the summary fails, and the three-failure circuit breaker."""

from __future__ import annotations

import json

import pytest

from runtime.compaction import (
    CHECKPOINT_HEADER,
    MAX_FAILURES,
    CompactionSettings,
    Compactor,
    cut_index,
    render_checkpoint,
)
from runtime.models.base import (
    AssistantMessage,
    TextPart,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from tests.runtime.test_runtime_loop import Sink, make_runtime


def call(cid: str) -> AssistantMessage:
    return AssistantMessage("", "", (ToolCallRequest(cid, "read_file", "{}"),))


def result(cid: str, size: int = 400) -> ToolResultMessage:
    return ToolResultMessage(cid, "read_file", "r" * size)


def pairs_intact(history) -> bool:
    """Every tool result directly follows the assistant message (or a sibling result) that called it."""
    open_ids: set[str] = set()
    for m in history:
        if isinstance(m, AssistantMessage):
            open_ids = {c.id for c in m.tool_calls}
        elif isinstance(m, ToolResultMessage):
            if m.call_id not in open_ids:
                return False
        else:
            open_ids = set()
    return True


def test_the_cut_never_separates_a_call_from_its_results_and_keeps_the_newest_step():
    h = [UserMessage((TextPart("go"),)), call("a"), result("a"), result("a"), call("b"), result("b", 4000)]
    for keep in (0, 10, 100, 250, 10_000):
        cut = cut_index(h, keep)
        assert cut is not None and 1 <= cut <= 4 and not isinstance(h[cut], ToolResultMessage)
    assert cut_index(h, 0) == 4  # the newest step stays verbatim even when it alone is over the budget
    assert cut_index([UserMessage((TextPart("x"),))], 10) is None


def test_a_json_checkpoint_is_rendered_in_sections_and_free_text_is_kept_as_is():
    text = render_checkpoint(
        "Here: "
        + json.dumps(
            {
                "goal": "fix the parser",
                "constraints": ["no new deps"],
                "progress": {"done": ["read parser.py"], "inProgress": ["edit"], "blocked": []},
                "keyDecisions": ["use a table"],
                "nextSteps": ["run tests"],
                "criticalContext": ["src/parser.py:42"],
            }
        )
    )
    assert text.startswith(CHECKPOINT_HEADER)
    for part in (
        "## Goal\nfix the parser",
        "- no new deps",
        "- Done: read parser.py",
        "- In progress: edit",
        "## Key decisions",
        "## Next steps\n- run tests",
        "src/parser.py:42",
    ):
        assert part in text
    assert render_checkpoint("just prose") == f"{CHECKPOINT_HEADER}\n\njust prose"


def _long_turn(tmp_path, summaries: list[dict]):
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "big.txt").write_text("line of text that fills the context\n" * 110)  # ~1000 tokens read
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}
    script = [read, read, summaries[0], read, summaries[1], {"text": "all done"}]
    rt, _, _, model = make_runtime(tmp_path, script)
    compactor = Compactor(CompactionSettings(0, 0, 0))
    overhead = compactor.overhead_chars(rt) // 4
    compactor.settings = CompactionSettings(overhead + 1700, 200, 600)  # threshold: overhead + 1500 tokens
    rt.before_step = lambda emit: compactor.maybe_compact(rt, emit)
    return rt, compactor, model


@pytest.mark.anyio
async def test_one_long_turn_is_compacted_between_steps_and_finishes(tmp_path):
    summary = {"text": json.dumps({"goal": "read big.txt repeatedly", "nextSteps": ["finish"]})}
    rt, compactor, model = _long_turn(tmp_path, [summary, summary])
    sink = Sink()
    outcome = await rt.run_turn([TextPart("read it three times")], sink)
    assert outcome.stop_reason == "end_turn"
    assert model.position == 6  # every entry used: two of them were the summaries
    first = rt.history[0]
    assert isinstance(first, UserMessage) and first.parts[0].text.startswith(CHECKPOINT_HEADER)
    assert "read big.txt repeatedly" in first.parts[0].text
    assert pairs_intact(rt.history)
    assert isinstance(rt.history[-1], AssistantMessage) and rt.history[-1].text == "all done"
    assert compactor.tokens(rt) <= compactor.settings.threshold
    notices = [e for e in sink.events if type(e).__name__ == "NoticeEvent"]
    assert len(notices) == 2 and notices[0].title == "Context compacted"


@pytest.mark.anyio
async def test_a_failed_summary_drops_the_oldest_tool_outputs_instead(tmp_path):
    rt, compactor, model = _long_turn(tmp_path, [{"error": "overloaded"}, {"error": "overloaded"}])
    outcome = await rt.run_turn([TextPart("go")], Sink())
    assert outcome.stop_reason == "end_turn" and rt.history[-1].text == "all done"
    assert compactor.failures == 2
    dropped = [
        m for m in rt.history if isinstance(m, ToolResultMessage) and m.output.startswith("[tool output dropped")
    ]
    assert dropped and pairs_intact(rt.history)
    assert isinstance(rt.history[0], UserMessage) and rt.history[0].parts[0].text == "go"  # nothing summarised


class CountingModel:
    accepts_images = False
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request):
        from runtime.models.base import ModelError

        self.calls += 1
        raise ModelError("always failing")
        yield  # pragma: no cover


@pytest.mark.anyio
async def test_after_three_failed_summaries_in_a_row_the_model_is_not_asked_again(tmp_path):
    rt, *_ = make_runtime(tmp_path, [])
    model = CountingModel()
    rt.model = model
    compactor = Compactor(CompactionSettings(0, 0, 0))
    compactor.settings = CompactionSettings(compactor.overhead_chars(rt) // 4 + 400, 100, 100)
    for _ in range(5):
        rt.history[:] = [UserMessage((TextPart("go"),)), call("a"), result("a", 2000), call("b"), result("b", 2000)]
        res = await compactor.maybe_compact(rt, Sink())
        assert res is not None and res.method == "dropped_tool_outputs"
    assert model.calls == MAX_FAILURES and compactor.failures == MAX_FAILURES


@pytest.mark.anyio
async def test_compact_on_request_summarises_even_a_small_context(tmp_path):
    rt, _, _, model = make_runtime(tmp_path, [{"text": "hello"}, {"text": "the summary"}])
    await rt.run_turn([TextPart("hi")], Sink())
    compactor = Compactor(CompactionSettings.for_window(128_000))
    res = await compactor.compact(rt)
    assert res.method == "summary" and res.summarised == 1
    assert rt.history[0].parts[0].text.endswith("the summary")
    assert isinstance(rt.history[1], AssistantMessage) and rt.history[1].text == "hello"
