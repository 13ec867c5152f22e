"""Replaying recorded transcripts (`contracts/transcript.md`) against a fresh `gatewright acp`.

Replay plays the client's side: it sends each `in` frame in recorded order, waiting until the agent has produced as
many non-chunk frames as it had at that point of the recording; answers to the agent's own requests are sent when
the agent asks, matched by method and position, with the id the agent used this time. Then the agent's `out`
frames are compared with the recorded ones after normalising volatile values on both sides.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from tests.harness import AgentProcess, never_answer

CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
WORKSPACE = "<WORKSPACE>"


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    meta: dict[str, Any] = {}
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if "meta" in obj:
            meta = obj["meta"]
        else:
            entries.append(obj)
    return meta, entries


def substitute(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [substitute(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, old, new) for k, v in value.items()}
    return value


def is_optional(msg: Any) -> bool:
    """The agent's `$/cancel_request` for its own pending request: optional in ACP, and whether it is sent races with
    the client's answer to that request (a `session/cancel` followed at once by the answer), so it is not compared."""
    return isinstance(msg, dict) and msg.get("method") == "$/cancel_request"


def is_chunk(msg: Any) -> bool:
    return (isinstance(msg, dict) and msg.get("method") == "session/update"
            and msg["params"]["update"].get("sessionUpdate") in CHUNKS)


def normalise(frames: list[dict[str, Any]], workspace: str, state_dir: str | None = None) -> list[Any]:
    names: dict[tuple[str, str], str] = {}

    def name(kind: str, value: Any) -> str:
        key = (kind, json.dumps(value))
        if key not in names:
            names[key] = f"<{kind}_{sum(1 for k in names if k[0] == kind)}>"
        return names[key]

    def walk(v: Any, key: str | None = None) -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            if key == "sessionId":
                return name("SESSION", v)
            if key == "toolCallId":
                return name("TOOL", v)
            if key == "terminalId":
                return name("TERMINAL", v)
            if key == "version":
                return "<VERSION>"
            v = v.replace(workspace, WORKSPACE)
            if state_dir:
                v = v.replace(state_dir, "<STATE>")
            v = re.sub(r"incident [0-9a-f]+", "incident <ID>", v)
            v = re.sub(r"sess_[0-9a-f]{32}", lambda m: name("SESSION", m.group(0)), v)
        return v

    out: list[Any] = []
    for f in frames:
        if is_optional(f):
            continue
        f = dict(f)
        if "method" in f and "id" in f:  # an agent request: its id is volatile
            f["id"] = name("REQ", f["id"])
        f = walk(f)
        if is_chunk(f) and out and is_chunk(out[-1]):
            prev, cur = out[-1]["params"], f["params"]
            if (prev["sessionId"] == cur["sessionId"]
                    and prev["update"]["sessionUpdate"] == cur["update"]["sessionUpdate"]):
                prev["update"]["content"]["text"] += cur["update"]["content"]["text"]
                continue
        out.append(f)
    return out


def replay(path: Path, tmp: Path) -> tuple[list[Any], list[Any], AgentProcess]:
    meta, entries = load(path)
    ws = tmp / "ws"
    ws.mkdir()
    for rel, content in (meta.get("workspace_files") or {}).items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(content, encoding="utf-8")
    args = list(meta.get("args") or [])
    if meta.get("scripted_model") is not None:
        model = tmp / "model.json"
        model.write_text(meta["scripted_model"], encoding="utf-8")
        args += ["--model", f"scripted:{model}"]
    if meta.get("mode"):
        args += ["--mode", meta["mode"]]
    agent = AgentProcess(*args, cwd=ws, responder=never_answer, state_dir=tmp / "state")
    recorded_out = [e["msg"] for e in entries if e["dir"] == "out"]
    agent_req_methods = {json.dumps(m["id"]): m["method"] for m in recorded_out if "method" in m and "id" in m}
    answered: dict[str, int] = {}
    non_chunk_out = 0
    try:
        for e in entries:
            if e["dir"] == "out":
                if not is_chunk(e["msg"]) and not is_optional(e["msg"]):
                    non_chunk_out += 1
                continue
            _wait_for_non_chunks(agent, non_chunk_out)
            msg = e["msg"]
            if msg is None:  # a raw line that was not JSON
                agent.send_raw(e["raw"].encode())
                continue
            msg = substitute(msg, WORKSPACE, str(ws))
            for old_id, new_id in zip(_session_ids(recorded_out), _session_ids(list(agent.frames)), strict=False):
                msg = substitute(msg, old_id, new_id)
            if isinstance(msg, dict) and "method" not in msg and "id" in msg and ("result" in msg or "error" in msg):
                # an answer to an agent request: send it when the agent has asked, with this run's id
                method = agent_req_methods.get(json.dumps(msg.get("id")))
                n = answered.get(method or "", 0)
                answered[method or ""] = n + 1
                request = _nth_agent_request(agent, method, n)
                msg = {**msg, "id": request["id"]}
            agent.send(msg)
        _wait_for_non_chunks(agent, non_chunk_out)
        agent.close()
    finally:
        if agent.proc.poll() is None:
            agent.kill()
    expected = normalise(recorded_out, WORKSPACE)
    actual = normalise(list(agent.frames), str(ws), str(tmp / "state"))
    return expected, actual, agent


def _session_ids(frames: list[dict[str, Any]]) -> list[str]:
    """Session ids in the order the agent created them (from `session/new` answers)."""
    return [f["result"]["sessionId"] for f in frames
            if isinstance(f.get("result"), dict) and isinstance(f["result"].get("sessionId"), str)]


def _wait_for_non_chunks(agent: AgentProcess, count: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for f in list(agent.frames) if not is_chunk(f) and not is_optional(f)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the agent produced fewer frames than recorded ({count}); stderr:\n{agent.stderr}")
        time.sleep(0.005)


def _nth_agent_request(agent: AgentProcess, method: str | None, n: int, timeout: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        reqs = [r for r in list(agent.agent_requests) if r["method"] == method]
        if len(reqs) > n:
            return reqs[n]
        if time.monotonic() > deadline:
            raise AssertionError(f"the agent never sent request #{n} of {method}")
        time.sleep(0.005)
