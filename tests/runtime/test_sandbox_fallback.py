"""A sandbox helper that fails never makes every command fail: it is restarted, or the next weaker one runs, or the
agent spawns by itself, and the support (what /status and the notice say) tells which (runtime.sandbox.client)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import anyio
import pytest

from permissions.confinement import Confinement
from runtime import processes, sandbox
from runtime.sandbox import boot, build_spec, session_tmpdir
from runtime.sandbox.client import DirectSpawner, Spawner
from tests.support.sandbox_helpers import marker, survivors

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture
def fresh_helpers() -> Iterator[None]:
    """No helper of an earlier test: each test starts (and breaks) its own, and leaves none behind."""
    Spawner.stop()
    yield
    Spawner.stop()


def breaking_boot(monkeypatch: pytest.MonkeyPatch, *, unless: str | None) -> None:
    """Helpers that exit at once (as a crash at start-up would), except one started with GATEWRIGHT_SANDBOX=`unless`."""
    real = boot.HELPER_BOOT
    gate = f"import os; os.environ.get('GATEWRIGHT_SANDBOX', '-') == {unless or 'never'!r} or os._exit(3); "
    monkeypatch.setattr("runtime.sandbox.client.HELPER_BOOT", gate + real)


async def run(ws: str, command: str) -> processes.ExecResult:
    spec = build_spec(Confinement(), [ws], tmpdir=session_tmpdir("sess_fallback"), grace=processes.EXEC_GRACE)
    return await processes.run_exec(["/bin/bash", "-c", command], cwd=ws, env=dict(os.environ), timeout=20, spec=spec)


@pytest.mark.anyio
async def test_a_helper_that_cannot_start_is_replaced_by_the_next_weaker_one_and_the_support_says_why(
    tmp_path, monkeypatch, fresh_helpers
):
    monkeypatch.delenv("GATEWRIGHT_SANDBOX", raising=False)
    breaking_boot(monkeypatch, unless="landlock")
    sup = sandbox.support()
    assert not sup.namespaces and sup.forced == "landlock"
    assert "did not start (it exited with status 3)" in sup.note and "GATEWRIGHT_SANDBOX=landlock" in sup.note
    assert any("helper" in line and "did not start" in line for line in sup.status_lines())
    res = await run(str(tmp_path), "echo still works")
    assert res.stdout == "still works\n"


@pytest.mark.anyio
async def test_when_no_helper_can_start_commands_run_unconfined_contained_and_the_support_says_so(
    tmp_path, monkeypatch, fresh_helpers
):
    monkeypatch.delenv("GATEWRIGHT_SANDBOX", raising=False)
    breaking_boot(monkeypatch, unless=None)
    assert isinstance(Spawner.get(), DirectSpawner)
    sup = sandbox.support()
    assert not sup.active and not sup.namespaces
    assert sup.describe().startswith("sandbox: not available (the sandbox helper did not start")
    m = marker()
    res = await run(str(tmp_path), f"echo runs; sleep {m} & setsid sleep {m} & exit 4")
    assert res.stdout == "runs\n" and res.exit_code == 4
    with anyio.fail_after(5):
        while survivors(m):  # noqa: ASYNC110 - another process's state
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_a_helper_killed_between_two_commands_is_restarted_and_the_command_says_so(tmp_path, fresh_helpers):
    first = await run(str(tmp_path), "echo one")
    helper = Spawner.get().proc
    assert first.stdout == "one\n" and helper is not None
    helper.kill()
    helper.wait(5)
    notes: list[str] = []
    spec = build_spec(Confinement(), [str(tmp_path)], tmpdir=session_tmpdir("sess_fallback"), grace=0.3)
    res = await processes.run_exec(
        ["/bin/bash", "-c", "echo two"], cwd=str(tmp_path), env=dict(os.environ), timeout=20, spec=spec, note=notes
    )
    assert res.stdout == "two\n"
    assert any("had stopped (killed by signal 9) and was restarted" in n for n in notes), notes
    assert Spawner.get().proc is not helper and "restarted" in sandbox.support().note
