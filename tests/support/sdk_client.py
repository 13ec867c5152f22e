"""Helpers to drive `gatewright acp` with the official Python ACP SDK (`agent-client-protocol`).

Every run records its transcript (`--record`), and `check_recorded_frames` validates each frame that crossed the
wire, both directions, against the vendored schema.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from tests.support.acp_schema import agent_frame_errors, client_frame_errors


class RecordingClient:
    """A duck-typed `acp.Client` that records updates and answers permission questions from a list."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.updates: list[Any] = []
        self.permissions: list[tuple[Any, list[Any]]] = []
        self.answers = list(answers or [])
        self.permission_asked: Any = None

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kw: Any) -> Any:
        self.permissions.append((tool_call, options))
        if self.permission_asked is not None:
            self.permission_asked.set()
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if answer == "hang":
            import asyncio

            await asyncio.Event().wait()
        opt = next(o for o in options if o.kind == answer)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=opt.option_id))

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def text(self) -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")


@contextlib.asynccontextmanager
async def spawn_sdk_agent(
    client: RecordingClient, tmp: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Any, Any, Path]]:
    record = tmp / f"transcript-{len(list(tmp.glob('transcript-*')))}.jsonl"
    repo = str(Path(__file__).resolve().parents[2])
    full_env = dict(os.environ, GATEWRIGHT_STATE_DIR=str(tmp / "state"), **(env or {}))
    # Run the code of the checkout these tests belong to (an editable install may point at another worktree).
    full_env["PYTHONPATH"] = repo + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
    full_env.pop("GATEWRIGHT_MODEL", None)
    async with spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "acp_server",
        "--record",
        str(record),
        *args,
        env=full_env,
        cwd=str(tmp),
        transport_kwargs={"stderr": None, "limit": 50 * 2**20},
    ) as (conn, proc):
        yield conn, proc, record
    check_recorded_frames(record)


def check_recorded_frames(path: Path) -> None:
    methods: dict[str, str] = {}
    agent_methods: dict[str, str] = {}
    errors: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if "meta" in entry:
            continue
        msg = entry["msg"]
        if msg is None:
            continue
        if entry["dir"] == "in":
            if "method" in msg and "id" in msg:
                methods[json.dumps(msg["id"])] = msg["method"]
            errs = client_frame_errors(
                msg, agent_methods.get(json.dumps(msg.get("id"))) if "method" not in msg else None
            )
        else:
            if "method" in msg and "id" in msg:
                agent_methods[json.dumps(msg["id"])] = msg["method"]
            errs = agent_frame_errors(msg, methods.get(json.dumps(msg.get("id"))) if "method" not in msg else None)
        if errs:
            errors.append(f"{entry['dir']}: {errs}")
    assert not errors, errors
