"""A minimal, fast NDJSON editor for the benchmarks: spawn an agent, send requests, read frames on a thread.

Not the test harness (tests/support/harness.py validates every frame against the schema, which would dominate timings).
Every frame is parsed with orjson as a real client would; the agent's `session/request_permission` requests are
answered at once, from the reader thread, with the first `allow_once` option.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]


def rss_kb(pid: int) -> int:
    """Resident set size of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Client:
    def __init__(
        self,
        argv: list[str],
        *,
        cwd: str | Path,
        env: dict[str, str] | None = None,
        on_frame: Callable[[dict[str, Any], float], None] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(cwd),
            env=env,
            start_new_session=True,
        )
        self._next = 0
        self._cond = threading.Condition()
        self._answers: dict[Any, tuple[dict[str, Any], float]] = {}
        self.on_frame = on_frame
        self.frames = 0
        self._wlock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        buf = b""
        while True:
            try:
                data = os.read(fd, 1 << 20)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            now = time.perf_counter()
            for line in lines:
                if not line:
                    continue
                msg = orjson.loads(line)
                self.frames += 1
                if "method" in msg:
                    if "id" in msg and msg["method"] == "session/request_permission":
                        oid = next(o["optionId"] for o in msg["params"]["options"] if o["kind"] == "allow_once")
                        self.send(
                            {
                                "jsonrpc": "2.0",
                                "id": msg["id"],
                                "result": {"outcome": {"outcome": "selected", "optionId": oid}},
                            }
                        )
                    if self.on_frame is not None:
                        self.on_frame(msg, now)
                elif "id" in msg:
                    with self._cond:
                        self._answers[msg["id"]] = (msg, now)
                        self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, msg: dict[str, Any]) -> None:
        data = orjson.dumps(msg) + b"\n"
        with self._wlock:
            self.proc.stdin.write(data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]

    def start(self, method: str, params: Any) -> int:
        rid = self._next
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def wait(self, rid: int, timeout: float = 60) -> tuple[dict[str, Any], float]:
        """The answer to request `rid` and the perf_counter time it was read."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while rid not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive() and rid not in self._answers:
                    raise RuntimeError(f"no answer to request {rid}")
                self._cond.wait(min(left, 0.5))
            return self._answers.pop(rid)

    def request(self, method: str, params: Any, timeout: float = 60) -> tuple[dict[str, Any], float]:
        """Send a request; return (answer, seconds from sending to reading the answer)."""
        t = time.perf_counter()
        answer, at = self.wait(self.start(method, params), timeout)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer, at - t

    def initialize(self) -> dict[str, Any]:
        return self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            },
        )[0]["result"]

    def close(self) -> None:
        self.close_with_usage()

    def close_with_usage(self, timeout: float = 5) -> tuple[float, int] | None:
        """Close the agent's input (an editor going away) and reap it: (CPU seconds, peak RSS in KiB) of the process
        and the descendants it reaped, from `wait4`. One still running `timeout` s later gets SIGTERM (its process
        group), then SIGKILL; None when it was already reaped elsewhere."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        usage = None
        deadline = time.monotonic() + timeout
        signals = [signal.SIGTERM, signal.SIGKILL]
        while self.proc.returncode is None:
            try:
                pid, status, ru = os.wait4(self.proc.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                usage = (ru.ru_utime + ru.ru_stime, ru.ru_maxrss)
                break
            if time.monotonic() > deadline:
                sig = signals.pop(0) if signals else signal.SIGKILL
                try:
                    os.killpg(self.proc.pid, sig)
                except OSError:
                    pass
                deadline = time.monotonic() + 2
            time.sleep(0.005)
        try:  # its own session (start_new_session): whatever it started goes too (e.g. a peer's launched binary)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self._reader.join(2)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return usage


def gatewright_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "acp_server", *args]


def agent_env(state_dir: str) -> dict[str, str]:
    env = dict(os.environ, GATEWRIGHT_STATE_DIR=state_dir, PYTHONPATH=str(ROOT))
    # An installed agent runs from bytecode: with PYTHONDONTWRITEBYTECODE (set in some shells) no run would ever find
    # a cached .pyc of this checkout and every figure would include compiling it (~+50 ms before the first prompt).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("GATEWRIGHT_MODEL", None)
    env.pop("GATEWRIGHT_MODE", None)
    env.pop("GATEWRIGHT_RECORD", None)
    return env
