"""Runs the ACP agent on the process's stdio: guard the descriptors, serve until EOF or SIGTERM, exit promptly."""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

import anyio

from acp_server import __version__
from acp_server.agent import AgentConfig, GatewrightAgent
from acp_server.rpc import JsonRpcConnection
from acp_server.stdio import FdReader, FdWriter, guard_stdio

if TYPE_CHECKING:
    from runtime.models import ModelFactory

log = logging.getLogger("gatewright.server")


def serve_stdio(factory: ModelFactory, mode: str, *, record: str | None = None, state_dir: str | None = None) -> int:
    agent = GatewrightAgent(AgentConfig(mode=mode, model_factory=factory, state_dir=state_dir))
    recorder = None
    if record:
        from acp_server.recorder import TranscriptRecorder

        meta = {"gatewright": __version__, "model": str(factory.spec) if factory.spec else None, "mode": mode}
        if factory.spec is not None and factory.spec.provider == "scripted":
            try:
                with open(factory.spec.name, encoding="utf-8") as f:
                    meta["scripted_model"] = f.read()
            except OSError:
                pass
        recorder = TranscriptRecorder(record, meta)

    async def main() -> None:
        with guard_stdio() as fds:
            conn = JsonRpcConnection(agent, recorder=recorder, max_frame=_max_frame())
            agent.attach(conn)
            async with anyio.create_task_group() as tg:
                async def on_signals() -> None:
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                        async for _ in signals:
                            log.info("terminating on a signal")
                            with anyio.CancelScope(shield=True), anyio.move_on_after(1.5):
                                await agent.shutdown()
                            tg.cancel_scope.cancel()
                            return

                tg.start_soon(on_signals)
                await conn.serve(FdReader(fds.read_fd), FdWriter(fds.write_fd))
                tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
    finally:
        _kill_leftover_children()
    sys.stderr.flush()
    # A worker thread may still sit in a blocking read of the editor's pipe; do not wait for it.
    os._exit(0)


def _max_frame() -> int:
    from acp_server.wire import DEFAULT_MAX_FRAME

    try:
        return max(1024, int(os.environ.get("GATEWRIGHT_MAX_FRAME_BYTES", DEFAULT_MAX_FRAME)))
    except ValueError:
        return DEFAULT_MAX_FRAME


def _kill_leftover_children() -> None:
    try:
        from runtime.processes import kill_all_process_groups
    except ImportError:
        return
    kill_all_process_groups()
