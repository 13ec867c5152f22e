"""Runs the ACP agent on the process's stdio: guard the descriptors, serve until EOF or SIGTERM, exit promptly.

Start-up fast path: `initialize` is answered before the event loop (and anyio, asyncio, the runtime, the wire models)
is even imported. The first chunk of input is read synchronously; if its first line is an `initialize` request, it is
answered from constants right away (`GatewrightAgent.answer_initialize`), and everything after that line is handed to
the JSON-RPC connection as already-read input. Any other first line simply goes to the connection.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import acp_server  # lazy submodules: the connection and the method table load after the initialize answer
import runtime  # the runtime's lazy public API
from acp_server import wire
from acp_server.agent import AgentConfig, GatewrightAgent
from acp_server.errors import RpcError, error_to_wire
from acp_server.stdio import READ_CHUNK, FdReader, FdWriter, guard_stdio
from runtime import (
    lazy,  # anyio: the event loop starts after the initialize answer
    settings,
)

if TYPE_CHECKING:
    from permissions.rules import Rule
    from runtime import ModelFactory

log = logging.getLogger("gatewright.server")

WARM_UP_AFTER_S = 0.05  # how long no request must be in flight before a warm-up stage runs
_IDLE_POLL_S = 0.01


def serve_stdio(
    factory: ModelFactory,
    mode: str,
    *,
    record: str | None = None,
    state_dir: str | None = None,
    rules: tuple[Rule, ...] = (),
) -> int:
    agent = GatewrightAgent(AgentConfig(mode=mode, model_factory=factory, state_dir=state_dir, rules=rules))
    try:
        recorder = _recorder(record, factory, mode, state_dir) if record else None
    except OSError as exc:
        sys.stderr.write(f"gatewright: cannot write the transcript {record}: {exc.strerror or exc}\n")
        return 2
    max_frame = _max_frame()
    # Until the event loop installs its own handlers nothing is running yet, so termination is simply an exit.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_before_serving)
    try:
        with guard_stdio() as fds:
            initial, eof = _answer_first_initialize(agent, fds.read_fd, fds.write_fd, recorder, max_frame)
            _serve(agent, fds, initial, eof, recorder, max_frame)
    except KeyboardInterrupt:
        pass
    finally:
        _kill_leftover_children()
        if recorder is not None:
            recorder.close()  # writes the files the recording needs into its meta line (see runtime.recording)
    sys.stderr.flush()
    # A worker thread may still sit in a blocking read of the editor's pipe; do not wait for it.
    os._exit(0)


def _answer_first_initialize(
    agent: GatewrightAgent, read_fd: int, write_fd: int, recorder: Any, max_frame: int
) -> tuple[bytes, bool]:
    try:
        data = os.read(read_fd, READ_CHUNK)
    except OSError:
        return b"", True
    if not data:
        return b"", True
    nl = data.find(b"\n")
    if nl < 0 or nl > max_frame:
        return data, False
    frame = wire.classify(data[:nl])
    if not isinstance(frame, wire.Request) or frame.method != "initialize":
        return data, False
    if recorder is not None:
        recorder.record("in", wire.request(frame.id, frame.method, frame.params))
    try:
        # Absent params read as `{}`, as the connection reads them for the typed path.
        answer = wire.response(frame.id, agent.answer_initialize({} if frame.params is None else frame.params))
    except RpcError as exc:
        answer = wire.error_response(frame.id, exc.to_wire())
    except Exception as exc:
        answer = wire.error_response(frame.id, error_to_wire(exc, "initialize"))
    if recorder is not None:
        recorder.record("out", answer)
    out = memoryview(wire.encode(answer))
    try:
        while out:
            out = out[os.write(write_fd, out) :]
    except OSError:
        return b"", True
    return data[nl + 1 :], False


def _serve(agent: GatewrightAgent, fds: Any, initial: bytes, eof: bool, recorder: Any, max_frame: int) -> None:
    # The agent is not dumpable from here on: no other process of the user (a sandboxed command above all) may ptrace
    # it or open its /proc/<pid>/fd, mem or environ. After the initialize answer: ctypes costs a few ms to import.
    runtime.sandbox.harden_agent()

    # The interpreter hands the GIL to a waiting thread after this long (default 5 ms). The protocol's reader and
    # writer are threads: while a turn streams on the event loop, a 5 ms wait would delay the first frames on the
    # wire and the reading of a `session/cancel` by that much. 1 ms measured ~3% more streamed frames/s, first chunk
    # 8.8 → 5.7 ms on a 20,000-chunk reply.
    sys.setswitchinterval(0.001)

    async def main() -> None:
        # The method table and the wire models it reads params into load here.
        conn = acp_server.rpc.JsonRpcConnection(
            acp_server.dispatch.AcpDispatcher(agent), recorder=recorder, max_frame=max_frame
        )
        agent.attach(conn)
        async with lazy.anyio.create_task_group() as tg:

            async def on_signals() -> None:
                with lazy.anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                    async for _ in signals:
                        log.info("terminating on a signal")
                        with lazy.anyio.CancelScope(shield=True), lazy.anyio.move_on_after(1.5):
                            await agent.shutdown()
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(on_signals)
            tg.start_soon(warm_up_when_idle, agent.warm_up_stages(), lambda: conn.busy)
            await conn.serve(FdReader(fds.read_fd), FdWriter(fds.write_fd), initial, eof)
            tg.cancel_scope.cancel()

    lazy.anyio.run(main)


async def warm_up_when_idle(
    stages: Sequence[Callable[[], None]],
    busy: Callable[[], bool],
    *,
    quiet: float = WARM_UP_AFTER_S,
    poll: float = _IDLE_POLL_S,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> None:
    """Run each warm-up stage once no request has been in flight for `quiet` seconds.

    What the first session/new and the first prompt need (the runtime, the model's HTTP stack, the tool-call path:
    ~150 ms of imports) is loaded while the connection idles: after `initialize`, or while the user types the first
    prompt. A warm-up therefore never runs ahead of a request that is waiting (which loads what it needs itself, and
    only that); a stage that fails is logged, and the request that needs it meets (and reports) the same problem.
    """
    sleep = sleep or lazy.anyio.sleep
    for stage in stages:
        calm = 0.0
        while calm < quiet:
            await sleep(poll)
            calm = 0.0 if busy() else calm + poll
        try:
            stage()
        except Exception:
            log.warning("warming up failed", exc_info=True)


def _recorder(record: str, factory: ModelFactory, mode: str, state_dir: str | None) -> Any:
    return runtime.recording.TranscriptRecorder(
        record, runtime.recording.transcript_meta(factory, mode, state_dir=state_dir)
    )


def _max_frame() -> int:
    return int(settings.current().get("GATEWRIGHT_MAX_FRAME_BYTES", wire.DEFAULT_MAX_FRAME))


def _exit_before_serving(signum: int, frame: Any) -> None:
    # The signal may land in the middle of an import (the connection's modules load right after the initialize
    # answer), so this imports nothing: importing `runtime.processes` here could meet a partly imported
    # `runtime.sandbox` and fail. No process of ours runs before the event loop does, so with the module not loaded
    # (or not fully) there is nothing to kill.
    kill = getattr(sys.modules.get("runtime.processes"), "kill_all_process_groups", None)
    if kill is not None:
        kill()
    os._exit(0)


def _kill_leftover_children() -> None:
    runtime.kill_all_process_groups()
