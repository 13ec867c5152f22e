from __future__ import annotations

import atexit
import inspect
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import AgentProcess

# Spawned agents (`python -m acp_server`, the `gatewright` script) must run this checkout's code, not whatever
# checkout the package was installed from in editable mode (with several git worktrees, that is another branch).
_ROOT = str(Path(__file__).resolve().parents[1])
if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != _ROOT:
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)


# Sandboxed commands get per-project tool caches under $XDG_CACHE_HOME/gatewright (runtime.sandbox.grants): the tests'
# thousands of temporary projects keep theirs in a directory of this run, never in the user's home.
_CACHE = tempfile.mkdtemp(prefix="gatewright-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (`@pytest.mark.anyio`) run on asyncio, the backend the agent runs on; a fresh loop per test."""
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# project\n\nhello\n", encoding="utf-8")
    return ws


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator:
    """Spawn `gatewright acp` processes; each is closed, and its frames checked against the schema, at teardown."""
    procs: list[AgentProcess] = []

    def _spawn(*args: str, cwd: Path | None = None, **kw) -> AgentProcess:
        kw.setdefault("state_dir", tmp_path / "state")
        p = AgentProcess(*args, cwd=cwd or tmp_path, **kw)
        procs.append(p)
        return p

    yield _spawn
    for p in procs:
        if p.proc.poll() is None:
            try:
                p.close()
            except AssertionError:
                p.kill()
        p.assert_clean()


@pytest.fixture
def inproc(tmp_path: Path) -> Iterator:
    """`spawn`'s in-process twin (tests/support/inprocess.py): the same options, the same client, no subprocess.
    Each agent is closed (EOF, and no process of it left behind) and its frames checked against the schema at
    teardown."""
    from tests.support import inprocess

    yield from inprocess.agents(tmp_path)


@pytest.fixture
def fp() -> Iterator:
    """A fake OpenAI-compatible and Anthropic server on loopback (tests/support/fake_providers.py)."""
    from tests.support.fake_providers import FakeProviders

    with FakeProviders() as server:
        yield server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every async test runs under anyio's plugin: one without `pytest.mark.anyio` would not run its body."""
    unmarked = [
        item.nodeid
        for item in items
        if isinstance(item, pytest.Function)
        and inspect.iscoroutinefunction(item.obj)
        and item.get_closest_marker("anyio") is None
    ]
    if unmarked:
        raise pytest.UsageError(f"async tests without pytest.mark.anyio: {unmarked}")
