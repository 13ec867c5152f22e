"""The idle warm-up (acp_server.server.warm_up_when_idle, GatewrightAgent.warm_up_stages): what a fresh process loads
for its first session and first prompt is loaded only while no request is in flight, in order, and a failing stage
does not stop the others. Time is a fake clock: the test drives the polls, it never waits."""

from __future__ import annotations

import pytest

from acp_server.agent import AgentConfig, GatewrightAgent
from acp_server.server import warm_up_when_idle
from runtime.models import ModelFactory, parse_model_spec
from runtime.models.config import ModelsConfig, ProviderSettings
from tests.support.fake_providers import FakeProviders

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Clock:
    """A fake `sleep` that advances virtual time and records what ran when."""

    def __init__(self, busy_until: float = 0.0, busy_again: tuple[float, float] | None = None) -> None:
        self.now = 0.0
        self.busy_until = busy_until
        self.busy_again = busy_again
        self.ran: list[tuple[str, float]] = []

    async def sleep(self, seconds: float) -> None:
        self.now = round(self.now + seconds, 6)

    def busy(self) -> bool:
        again = self.busy_again is not None and self.busy_again[0] <= self.now < self.busy_again[1]
        return self.now < self.busy_until or again

    def stage(self, name: str, fail: bool = False):
        def run() -> None:
            self.ran.append((name, self.now))
            if fail:
                raise RuntimeError(f"{name} broke")

        return run


async def test_no_stage_runs_while_a_request_is_in_flight_and_each_waits_for_a_quiet_spell():
    clock = Clock(busy_until=0.5, busy_again=(0.58, 0.7))
    stages = [clock.stage("session"), clock.stage("model"), clock.stage("tool_calls")]
    await warm_up_when_idle(stages, clock.busy, quiet=0.05, poll=0.01, sleep=clock.sleep)
    names = [n for n, _ in clock.ran]
    assert names == ["session", "model", "tool_calls"]
    at = dict(clock.ran)
    # Five idle polls of 10 ms in a row each time (the first one at the moment the request ended).
    assert at["session"] == pytest.approx(0.54)
    assert at["model"] == pytest.approx(0.74)  # a request came in between: the quiet spell started again after it
    assert at["tool_calls"] == pytest.approx(at["model"] + 0.05)


async def test_a_failing_stage_is_logged_and_the_next_ones_still_run(caplog):
    clock = Clock()
    stages = [clock.stage("session", fail=True), clock.stage("model")]
    await warm_up_when_idle(stages, clock.busy, quiet=0.05, poll=0.01, sleep=clock.sleep)
    assert [n for n, _ in clock.ran] == ["session", "model"]
    assert "warming up failed" in caplog.text


async def test_the_model_stage_builds_the_default_models_client_without_opening_a_connection(tmp_path):
    with FakeProviders() as fp:
        config = ModelsConfig(providers={"openai": ProviderSettings("openai", "openai", base_url=fp.url + "/v1")})
        factory = ModelFactory(parse_model_spec("openai:m"), config, env={})
        agent = GatewrightAgent(AgentConfig(model_factory=factory, state_dir=str(tmp_path / "state")))
        for stage in agent.warm_up_stages():
            stage()
        client = factory.create()
        assert client is not None and client._client is not None  # type: ignore[union-attr]
        assert fp.requests == []
        await factory.aclose()


def test_a_scripted_model_has_nothing_to_prepare(tmp_path):
    script = tmp_path / "model.json"
    script.write_text('{"responses": [{"text": "hi"}]}')
    factory = ModelFactory(parse_model_spec(f"scripted:{script}"), ModelsConfig(), env={})
    factory.prepare_default()  # no error, no client kept
    assert factory._clients == {}
