"""In-process helpers for the permission tests: a real session runtime (`runtime.build_runtime`, a scripted model)
with a scriptable gateway, an optional state dir (persisted rules, audit log) and a switchable mode."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from permissions.audit import AuditLog
from permissions.gateway import PermissionOutcome, PermissionRequest
from permissions.store import RuleDatabase
from runtime import RuntimeEvent, TextChunk, ToolCallProgress, ToolCallStarted, build_runtime
from runtime.models.base import ToolResultMessage
from runtime.models.scripted import ScriptedModel, parse_script

Answer = str | Callable[[PermissionRequest], Awaitable[PermissionOutcome]]


class ScriptedGateway:
    """Answers questions from a list: an option id, "cancel", "hang", or an async callable. Empty list: reject."""

    def __init__(self, answers: list[Answer] | None = None) -> None:
        self.answers = list(answers or [])
        self.asked: list[PermissionRequest] = []

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        self.asked.append(request)
        a = self.answers.pop(0) if self.answers else "reject_once"
        if callable(a):
            return await a(request)
        if a == "cancel":
            return PermissionOutcome.cancel()
        if a == "hang":
            await anyio.sleep_forever()
        return PermissionOutcome.selected(a)


class Sink:
    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []

    async def __call__(self, ev: RuntimeEvent) -> None:
        self.events.append(ev)

    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextChunk))

    def updates(self, call_id: str) -> list[ToolCallProgress]:
        return [e for e in self.events if isinstance(e, ToolCallProgress) and e.call_id == call_id]

    def statuses(self, call_id: str) -> list[str]:
        started = any(isinstance(e, ToolCallStarted) and e.call_id == call_id for e in self.events)
        return (["pending"] if started else []) + [u.status for u in self.updates(call_id) if u.status]


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        responses: list[dict[str, Any]],
        *,
        mode: str = "safe",
        answers: list[Answer] | None = None,
        state: bool = True,
        ws_name: str = "ws",
        question_timeout: float | None = None,
        remember: str = "session",
    ) -> None:
        self.ws = tmp_path / ws_name
        self.ws.mkdir(exist_ok=True)
        self.state_dir = tmp_path / "state"
        self.mode = mode
        self.gateway = ScriptedGateway(answers)
        self.db = RuleDatabase(str(self.state_dir)) if state else None
        self.audit = AuditLog(str(self.state_dir)) if state else None
        self.model = ScriptedModel(parse_script(json.dumps({"responses": responses})))
        # Rules and audit are this harness's own files (closed by `close`), not the process-wide ones.
        self.parts = build_runtime(
            session_id="sess_test",
            cwd=str(self.ws),
            model=self.model,
            gateway=self.gateway,
            mode=lambda: self.mode,
            rule_database=self.db,
            audit=self.audit,  # type: ignore[arg-type]
            remember=remember,
            question_timeout=question_timeout,
            context=False,
        )
        self.registry = self.parts.registry
        self.rules = self.parts.rules
        self.executor = self.parts.approval
        self.runtime = self.parts.runtime
        self.sink = Sink()

    async def turn(self, text: str = "go") -> Any:
        from runtime.models.base import TextPart

        return await self.runtime.run_turn([TextPart(text)], self.sink)

    def results(self) -> list[ToolResultMessage]:
        return [m for m in self.runtime.history if isinstance(m, ToolResultMessage)]

    def error_type(self, call_id: str) -> str | None:
        for r in self.results():
            if r.call_id == call_id and r.output.startswith("TOOL_ERROR: "):
                return json.loads(r.output[len("TOOL_ERROR: ") :])["errorType"]
        return None

    def option_ids(self, n: int = 0) -> list[str]:
        return [o.option_id for o in self.gateway.asked[n].options]

    def option_names(self, n: int = 0) -> list[str]:
        return [o.name for o in self.gateway.asked[n].options]

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
        if self.audit is not None:
            self.audit.close()


def bash(command: str, call_id: str = "b", **extra: Any) -> dict[str, Any]:
    return {"id": call_id, "name": "bash", "arguments": {"command": command, **extra}}


def write(path: str, content: str = "x\n", call_id: str = "w") -> dict[str, Any]:
    return {"id": call_id, "name": "write_file", "arguments": {"path": path, "content": content}}


REPO = str(Path(__file__).resolve().parents[2])


def run_gatewright(*args: str, state: str) -> Any:
    """`gatewright ARGS` as a subprocess of this checkout's code, with GATEWRIGHT_STATE_DIR=state."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, GATEWRIGHT_STATE_DIR=state)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run(
        [sys.executable, "-c", "import sys; from acp_server.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
