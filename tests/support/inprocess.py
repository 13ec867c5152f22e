"""The in-process seam: `gatewright acp`'s own connection, dispatcher and agent served in this process, driven by the
same raw editor as the subprocess harness (`tests.support.harness.RawClient`), so a test can switch between the two
by its fixture (`inproc` instead of `spawn`, tests/conftest.py).

What runs is what `acp_server.server` serves on stdio: the options are read by the real command line
(`acp_server.cli.build_parser` and its option checks: `--mode`, `--model scripted:FILE`, `--state-dir`, `--record`,
the config file), the agent is `GatewrightAgent(AgentConfig(...))`, the connection
`JsonRpcConnection(AcpDispatcher(agent))` with the frame bound of `GATEWRIGHT_MAX_FRAME_BYTES` and the transcript
recorder of `--record`. Only the bytes travel differently: over an anyio memory stream
into the connection's reader, and from its writer straight into the client, on an event loop of its own (a blocking
portal's thread), so the test itself stays synchronous like a subprocess test.

What the seam does not have, and the tests that need it keep spawning the binary (tests/e2e/, tests/security/): the
descriptor guard and the start-up path (the first `initialize` goes through the typed handler here, which
tests/acp_server/test_initialize_fast_path.py holds to the same answers), signals, process groups and `kill -9`,
the exit code, the warm-up stages, stderr (here `stderr` is the text of the `gatewright.*` log records at
`--log-level`), and the process-wide environment (`env=` is applied to `os.environ` for the agent's life and put
back at `close`: do not run two in-process agents with different `env` at once).

`close()` is EOF on the agent's input: the connection shuts the agent down (sessions closed, their processes and MCP
servers ended) within `timeout`, then every process group the agent registered must be gone, else they are killed
and `close` fails; when the last live in-process agent closes, the sandbox helper is stopped as the binary's exit
stops it.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.from_thread
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from runtime.sandbox import grants as sandbox_grants
from tests.support.harness import RawClient, Responder

_INPUT_BUFFER = 256  # chunks of input queued for the agent before a writing test blocks (a pipe's buffer, roughly)
_CLEARED_ENV = ("GATEWRIGHT_MODEL", "GATEWRIGHT_MODE")  # as the subprocess harness: the test's options only


class _LogText(logging.Handler):
    """The agent's log records as the binary would print them on stderr."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("gatewright %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class InProcessAgent(RawClient):
    """One `gatewright acp` connection served in this process (see the module docstring)."""

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        responder: Responder | None = None,
        state_dir: str | Path | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        super().__init__(responder)
        del cwd  # the binary's working directory; nothing of the agent depends on it (sessions carry their cwd)
        self._saved_env = {k: os.environ.get(k) for k in {*_CLEARED_ENV, "GATEWRIGHT_STATE_DIR", *(env or {})}}
        for k in _CLEARED_ENV:
            os.environ.pop(k, None)
        if state_dir is not None:
            os.environ["GATEWRIGHT_STATE_DIR"] = str(state_dir)
        os.environ.update(env or {})
        try:
            self._options = _options(args)
        except BaseException:
            self._restore_env()
            raise
        self._log = _LogText(getattr(logging, str(self._options.log_level).upper(), logging.WARNING))
        self._logger = logging.getLogger("gatewright")
        self._logger_level = self._logger.level
        if self._log.level < self._logger.getEffectiveLevel():
            self._logger.setLevel(self._log.level)  # `--log-level DEBUG` makes the records, as in the binary
        self._logger.addHandler(self._log)
        self._partial = b""
        self._serving = False
        self._closed = False
        self.agent: Any = None  # the GatewrightAgent, once serving (a test may look at its state)
        _live_started(self)
        self._portal_cm: AbstractContextManager[BlockingPortal] = anyio.from_thread.start_blocking_portal("asyncio")
        self._portal = self._portal_cm.__enter__()
        send, recv = anyio.create_memory_object_stream[bytes](_INPUT_BUFFER)
        self._input: MemoryObjectSendStream[bytes] = send
        self._ended: anyio.Event = self._portal.call(anyio.Event)
        self._serving = True
        self._done: Future[None] = self._portal.start_task_soon(self._serve, recv)

    # ---- serving (on the portal's event loop) --------------------------------------------------------------------
    async def _serve(self, recv: MemoryObjectReceiveStream[bytes]) -> None:
        from acp_server.agent import AgentConfig, GatewrightAgent
        from acp_server.dispatch import AcpDispatcher
        from acp_server.rpc import JsonRpcConnection
        from acp_server.server import _max_frame, _recorder

        opts = self._options
        agent = self.agent = GatewrightAgent(
            AgentConfig(mode=opts.mode, model_factory=opts.factory, state_dir=opts.state_dir, rules=opts.rules)
        )
        recorder = _recorder(opts.record, opts.factory, opts.mode, opts.state_dir) if opts.record else None
        conn = JsonRpcConnection(AcpDispatcher(agent), max_frame=_max_frame(), recorder=recorder)
        agent.attach(conn)
        try:
            await conn.serve(_Input(recv), _Output(self))
        finally:
            self._serving = False
            recv.close()
            if recorder is not None:
                recorder.close()
            if agent.store_is_open:
                agent.store.close()
            self._ended.set()
            self._frames_ended()

    # ---- what carries the bytes ----------------------------------------------------------------------------------
    def _agent_wrote(self, data: bytes) -> None:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            self._frame_line(line + b"\n")

    def write(self, data: bytes) -> None:
        if self._closed or not data:
            return
        try:
            self._portal.call(self._input.send, data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError):
            pass  # the agent stopped reading: as a broken pipe, nothing to do

    def running(self) -> bool:
        return self._serving

    @property
    def stderr(self) -> str:
        return "".join(line + "\n" for line in self._log.lines)

    # ---- the end -------------------------------------------------------------------------------------------------
    def close(self, timeout: float = 5) -> int:
        """EOF on the agent's input; 0 once it has shut down within `timeout` and left no process behind."""
        if self._closed:
            return 0
        self._closed = True
        try:
            try:
                self._portal.call(self._eof, timeout)
            except TimeoutError:
                raise AssertionError(f"agent did not shut down within {timeout}s of stdin EOF") from None
            self._done.result(timeout=1)  # the serve task has returned; re-raises what it raised
        finally:
            self._stop()
        return 0

    async def _eof(self, within: float) -> None:
        await self._input.aclose()
        with anyio.fail_after(within):
            await self._ended.wait()

    def _stop(self) -> None:
        try:
            self._portal_cm.__exit__(None, None, None)  # cancels whatever is left and ends the loop's thread
        finally:
            self._logger.removeHandler(self._log)
            self._logger.setLevel(self._logger_level)
            self._restore_env()
        _live_stopped(self)

    def _restore_env(self) -> None:
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# The process groups the runtime registered (runtime.processes) before the first of the live in-process agents
# started: when the last one stops, any group beyond those is a process an agent left behind.
_live: list[InProcessAgent] = []
_groups_before: set[int] = set()


def _live_started(agent: InProcessAgent) -> None:
    from runtime import processes

    if not _live:
        _groups_before.clear()
        _groups_before.update(processes._groups)
    _live.append(agent)


def _live_stopped(agent: InProcessAgent) -> None:
    from runtime import processes
    from runtime.sandbox import remove_all_tmpdirs
    from runtime.sandbox.client import Spawner

    if agent in _live:
        _live.remove(agent)
    if _live:
        return  # another agent still runs: its processes are its own
    left = set(processes._groups) - _groups_before
    for pgid in left:
        processes.kill_group(pgid)
        processes.unregister_group(pgid)
    # As the binary at its exit (`server._kill_leftover_children`): the sandbox helper ends, and with it every spawn
    # it made; the next agent (or in-process test) starts a new one on first use.
    Spawner.stop()
    remove_all_tmpdirs()
    assert not left, f"the agent left process groups behind after EOF: {sorted(left)}"


class _Input:
    def __init__(self, recv: MemoryObjectReceiveStream[bytes]) -> None:
        self.recv = recv

    async def read(self) -> bytes:
        try:
            return await self.recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return b""


class _Output:
    def __init__(self, client: InProcessAgent) -> None:
        self.client = client

    async def write(self, data: bytes) -> None:
        self.client._agent_wrote(data)


class _Options(NamedTuple):
    factory: Any  # runtime.ModelFactory
    mode: str
    rules: tuple[Any, ...]
    state_dir: str | None
    log_level: str
    record: str | None


def _options(args: tuple[str, ...]) -> _Options:
    """`gatewright acp ARGS` read as the binary reads them; a usage error is a ValueError (the binary exits 2)."""
    from acp_server import cli

    parsed = cli.build_parser().parse_args(["acp", *args])
    checked = cli._check_options(parsed)
    if checked is None:
        raise ValueError(f"gatewright acp {' '.join(args)}: refused (the binary would exit 2)")
    return _Options(
        checked.factory, checked.mode, checked.rules, parsed.state_dir, cli._log_level(parsed), parsed.record
    )


def agents(tmp_path: Path) -> Iterator[Any]:
    """The body of the `inproc` fixture: start in-process agents as `spawn` starts processes; at teardown each is
    closed (EOF) and its frames checked against the schema."""
    started: list[InProcessAgent] = []

    def _start(*args: str, cwd: Path | None = None, **kw: Any) -> InProcessAgent:
        kw.setdefault("state_dir", tmp_path / "state")
        agent = InProcessAgent(*args, cwd=cwd, **kw)
        started.append(agent)
        return agent

    environ = dict(os.environ)
    yield _start
    failures: list[str] = []
    for agent in reversed(started):  # last in, first out: each puts back the environment it found
        try:
            agent.close()
        except AssertionError as exc:
            failures.append(str(exc))
    # And whatever the order the test closed them in, the next test starts from the environment this one found, and
    # without the [sandbox] grants of a config file one of them read.
    os.environ.clear()
    os.environ.update(environ)
    sandbox_grants.configure(sandbox_grants.NONE)
    # The agents' objects are collected here, not at a random later moment: CPython 3.11 before 3.11.8 (gh-106905)
    # fails an `ast.parse` or `compile` that a collection's finalizers interrupt ("AST constructor recursion depth
    # mismatch"), and later tests parse source (the import contract, pytest's assertion rewriting).
    gc.collect()
    for agent in started:
        agent.assert_clean()
    assert not failures, failures
