"""A raw NDJSON editor for tests: validates every frame the agent writes against the official schema, answers the
agent's requests through a callback, and exposes what was seen. `RawClient` is that editor; `AgentProcess` runs it
against a spawned `python -m acp_server` (the real binary), `tests.support.inprocess.InProcessAgent` against the same
connection, dispatcher and agent in this process (no subprocess: use it unless the test is about the binary).

The official SDK cannot send malformed traffic and drops non-conforming lines, so protocol-robustness and method tests
use this client; that the official SDK works with the real binary is shown by tests/e2e/test_e2e_sdk.py.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.acp_schema import agent_frame_errors, client_frame_errors

Responder = Callable[[dict[str, Any]], Any]
REPO = str(Path(__file__).resolve().parents[2])


def allow_once(msg: dict[str, Any]) -> Any:
    return {"outcome": {"outcome": "selected", "optionId": _pick(msg, "allow_once")}}


def reject_once(msg: dict[str, Any]) -> Any:
    return {"outcome": {"outcome": "selected", "optionId": _pick(msg, "reject_once")}}


class ErrorAnswer(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def method_not_found(msg: dict[str, Any]) -> Any:
    """A client that does not serve the agent's request (the Python SDK's example client, acpx in queue mode)."""
    raise ErrorAnswer(-32601, f"Method not found: {msg['method']}")


def _pick(msg: dict[str, Any], kind: str) -> str:
    return next(o["optionId"] for o in msg["params"]["options"] if o["kind"] == kind)


def write_script(path: Path, responses: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"responses": responses}), encoding="utf-8")
    return str(path)


class RawClient:
    """The editor's side of one connection, whatever carries its bytes: every frame the agent writes is parsed,
    checked against the schema and kept (`frames`); answers are matched to requests; the agent's own requests
    (`session/request_permission`, `fs/*`...) are kept in `agent_requests` and answered by `responder`, each in its
    own thread. Subclasses carry the bytes: `AgentProcess` (a real `gatewright acp`) and
    `tests.support.inprocess.InProcessAgent` (the same connection objects in this process)."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.frames: list[dict[str, Any]] = []
        self.raw_lines: list[bytes] = []
        self.schema_errors: list[str] = []
        self.responder = responder or allow_once
        self.agent_requests: list[dict[str, Any]] = []
        self._responses: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._methods: dict[str, str] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._new_frame = threading.Condition()

    # ---- what carries the bytes (subclasses) ---------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Hand raw bytes to the agent's input as they are (no newline added); nothing happens once it is closed."""
        raise NotImplementedError

    def running(self) -> bool:
        """The agent may still write frames."""
        raise NotImplementedError

    @property
    def stderr(self) -> str:
        raise NotImplementedError

    # ---- frames in -----------------------------------------------------------------------------------------------
    def _frame_line(self, raw: bytes) -> None:
        """One line the agent wrote (with its newline)."""
        self.raw_lines.append(raw)
        try:
            msg = json.loads(raw)
        except ValueError:
            self.schema_errors.append(f"not JSON: {raw[:200]!r}")
            return
        method = None
        if isinstance(msg, dict) and "method" not in msg and "id" in msg:
            method = self._methods.get(json.dumps(msg["id"]))
        errors = agent_frame_errors(msg, method)
        if errors:
            self.schema_errors.append(f"{errors} in {raw[:500]!r}")
        with self._new_frame:
            self.frames.append(msg)
            self._new_frame.notify_all()
        if isinstance(msg, dict) and "method" in msg and "id" in msg:
            self.agent_requests.append(msg)
            threading.Thread(target=self._answer, args=(msg,), daemon=True).start()
        elif isinstance(msg, dict) and "method" not in msg:
            key = json.dumps(msg.get("id"))
            with self._lock:
                q = self._responses.setdefault(key, queue.Queue())
            q.put(msg)

    def _frames_ended(self) -> None:
        with self._new_frame:
            self._new_frame.notify_all()

    def _answer(self, msg: dict[str, Any]) -> None:
        try:
            result = self.responder(msg)
        except ErrorAnswer as exc:  # a client that answers with this error
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": exc.code, "message": exc.message}})
            return
        except Exception as exc:  # a test responder that fails answers with an error
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": str(exc)}})
            return
        if result is _NO_ANSWER:
            return
        answer = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        errs = client_frame_errors(answer, msg["method"])
        if errs and not getattr(self.responder, "deliberately_invalid", False):
            self.schema_errors.append(f"test client answer invalid: {errs}")
        self.send(answer)

    def send(self, msg: Any) -> None:
        self.send_raw(json.dumps(msg).encode())

    def send_raw(self, line: bytes) -> None:
        self.write(line + b"\n")

    # ---- json-rpc ------------------------------------------------------------------------------------------------
    def start_request(self, method: str, params: Any, rid: Any = "__auto__") -> Any:
        if rid == "__auto__":
            with self._lock:
                rid = self._next
                self._next += 1
        self._methods[json.dumps(rid)] = method
        with self._lock:
            self._responses.setdefault(json.dumps(rid), queue.Queue())
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def response(self, rid: Any, timeout: float = 15) -> dict[str, Any]:
        with self._lock:
            q = self._responses.setdefault(json.dumps(rid), queue.Queue())
        try:
            return q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to request {rid!r} within {timeout}s; stderr:\n{self.stderr}") from None

    def request(self, method: str, params: Any, timeout: float = 15) -> dict[str, Any]:
        return self.response(self.start_request(method, params), timeout)

    def result(self, method: str, params: Any, timeout: float = 15) -> Any:
        answer = self.request(method, params, timeout)
        assert "result" in answer, answer
        return answer["result"]

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # ---- conveniences --------------------------------------------------------------------------------------------
    def initialize(self, caps: dict[str, Any] | None = None) -> Any:
        return self.result(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": caps or {}, "clientInfo": {"name": "tests", "version": "0"}},
        )

    def new_session(self, cwd: str | Path) -> str:
        return self.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]

    def prompt(self, sid: str, text: str, timeout: float = 30) -> dict[str, Any]:
        return self.request("session/prompt", _prompt_params(sid, text), timeout)

    def start_prompt(self, sid: str, text: str) -> Any:
        """Send a text prompt without waiting; returns its request id (`response(id)` waits for the answer)."""
        return self.start_request("session/prompt", _prompt_params(sid, text))

    def updates(self, sid: str | None = None) -> list[dict[str, Any]]:
        return [
            f["params"]["update"]
            for f in list(self.frames)
            if f.get("method") == "session/update" and (sid is None or f["params"]["sessionId"] == sid)
        ]

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 15, after: int = 0
    ) -> dict[str, Any]:
        """The first frame (from index `after` on) that satisfies `predicate`, waiting for it if needed."""
        deadline = time.monotonic() + timeout
        seen = after
        with self._new_frame:
            while True:
                for f in self.frames[seen:]:
                    if predicate(f):
                        return f
                seen = len(self.frames)
                left = deadline - time.monotonic()
                if left <= 0 or not self.running() and seen == len(self.frames):
                    raise AssertionError(f"frame not seen within {timeout}s; stderr:\n{self.stderr}")
                self._new_frame.wait(min(left, 0.5))

    def assert_clean(self) -> None:
        assert not self.schema_errors, self.schema_errors


class AgentProcess(RawClient):
    """A real `gatewright acp` (`python -m acp_server`) on pipes, in its own process group.

    `console_script`: start it as editors do, through the installed `gatewright` script (`gatewright acp ...`), whose
    `sys.path` starts with the script's directory; `python -m` puts the current directory there, so a test whose
    workspace holds Python files the agent must not import (a planted `json.py`) needs the script."""

    def __init__(
        self,
        *args: str,
        cwd: str | Path,
        env: dict[str, str] | None = None,
        responder: Responder | None = None,
        state_dir: str | Path | None = None,
        console_script: bool = False,
        wrap: Sequence[str] = (),
    ) -> None:
        """`wrap`: a command line the agent runs under (`tests/support/environments.py`: a seccomp filter, a
        chroot), given the agent's own command line as its last arguments."""
        super().__init__(responder)
        full_env = dict(os.environ)
        # Run the code of the checkout these tests belong to (an editable install may point at another worktree).
        full_env["PYTHONPATH"] = REPO + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
        full_env["GATEWRIGHT_STATE_DIR"] = str(state_dir or Path(cwd) / ".gw-state-test")
        full_env.pop("GATEWRIGHT_MODEL", None)
        full_env.pop("GATEWRIGHT_MODE", None)
        if env:
            full_env.update(env)
        script = os.path.join(os.path.dirname(sys.executable), "gatewright")
        program = [script, "acp"] if console_script else [sys.executable, "-m", "acp_server"]
        self.proc = subprocess.Popen(
            [*wrap, *program, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd),
            env=full_env,
            start_new_session=True,
        )
        self.stderr_chunks: list[bytes] = []
        self._threads = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for t in self._threads:
            t.start()

    # ---- io ------------------------------------------------------------------------------------------------------
    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        try:
            for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):  # type: ignore[union-attr]
                self.stderr_chunks.append(chunk)
        except (ValueError, OSError):  # the pipe was closed under us at teardown
            return

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                self._frame_line(raw)
        except (ValueError, OSError):  # the pipe was closed under us at teardown
            pass
        self._frames_ended()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode(errors="replace")

    def close(self, timeout: float = 5) -> int:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"agent did not exit within {timeout}s of stdin EOF") from None
        finally:
            self._close_pipes()

    def _close_pipes(self) -> None:
        # The process has exited: the readers reach EOF on their own; let them finish before closing.
        for t in self._threads:
            t.join(timeout=2)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except Exception:  # a reader thread may be mid-read; closing later is fine
                    pass

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait(5)
        self._close_pipes()


def _prompt_params(sid: str, text: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


_NO_ANSWER = object()


def never_answer(msg: dict[str, Any]) -> Any:
    return _NO_ANSWER
