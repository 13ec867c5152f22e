"""Load benchmark: one `gatewright acp` process, N concurrent sessions streaming and approving at once.

    python bench/load.py [--sessions 50] [--chunks 60] [--rounds 2] [--json out.json]

A raw NDJSON client (asyncio, no SDK) drives the agent with a scripted model, in `safe` mode, in three phases:

1. stream + approve: every session prompts at once; each turn streams `--chunks` text chunks, proposes a
   `write_file` (which asks: the client approves it), then a `bash` read and more text. Repeated `--rounds` times.
2. cancel: every session starts a turn running `sleep` (approved), and once each command is running the client sends
   `session/cancel`; the latency measured is from sending the cancel to reading the `cancelled` answer (this
   includes killing the command's process group).
3. idle: memory after the turns are over.

Reported as a table: throughput (turns/s, session/update frames/s, frame MB/s), prompt latency (p50/p99), cancel
latency (p50/p99/max), the agent's RSS (after start, peak, after the run) and its CPU time. Not a test: numbers
depend on the machine. Frames are not schema-checked here (the test suite does that).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def rss_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


class Client:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.updates = 0
        self.update_bytes = 0
        self.permissions = 0
        self.running: dict[str, asyncio.Event] = {}
        self.errors: list[str] = []

    async def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Any) -> dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await fut

    async def reader(self) -> None:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            if "method" not in msg:
                fut = self.pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
            elif msg["method"] == "session/update":
                self.updates += 1
                self.update_bytes += len(line)
                upd = msg["params"]["update"]
                if upd.get("status") == "in_progress" and upd.get("toolCallId") == "call_sleep":
                    self.running.setdefault(msg["params"]["sessionId"], asyncio.Event()).set()
            elif msg["method"] == "session/request_permission" and "id" in msg:
                self.permissions += 1
                option = next(o["optionId"] for o in msg["params"]["options"] if o["kind"] == "allow_once")
                await self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": option}},
                    }
                )
            elif "id" in msg:
                await self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}})


def script(rounds: int, chunks: int) -> dict[str, Any]:
    words = " ".join(f"word{i}" for i in range(chunks))
    turn = [
        {"text": words, "chunks": chunks},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x" * 2000}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "wc -c out.txt"}}]},
        {"text": words, "chunks": chunks},
    ]
    # Each turn: text, then the write (approved), the read, and closing text; then the cancel phase's command.
    responses: list[dict[str, Any]] = []
    for _ in range(rounds):
        responses += [{**turn[0], "tool_calls": turn[1]["tool_calls"]}, turn[2], turn[3]]
    responses.append(
        {
            "tool_calls": [
                {
                    "id": "call_sleep",
                    "name": "bash",
                    "arguments": {"command": "sleep 120; echo done", "timeoutMs": 600_000},
                }
            ]
        }
    )
    return {"responses": responses}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="gw-load-"))
    model = tmp / "model.json"
    model.write_text(json.dumps(script(args.rounds, args.chunks)), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("GATEWRIGHT_MODEL", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acp_server",
        "--model",
        f"scripted:{model}",
        "--mode",
        "safe",
        "--state-dir",
        str(tmp / "state"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        limit=64 * 1024 * 1024,
        start_new_session=True,
    )
    client = Client(proc)
    reader = asyncio.create_task(client.reader())
    peak = 0
    stop_sampling = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not stop_sampling.is_set():
            peak = max(peak, rss_kib(proc.pid).get("VmRSS", 0))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    rss_start = rss_kib(proc.pid)["VmRSS"]
    sids = []
    for i in range(args.sessions):
        ws = tmp / f"ws{i}"
        ws.mkdir()
        res = await client.request("session/new", {"cwd": str(ws), "mcpServers": []})
        sids.append(res["result"]["sessionId"])

    # ---- phase 1: stream + approve ----
    prompt_latency: list[float] = []
    cpu0 = cpu_seconds(proc.pid)
    t0 = time.perf_counter()
    updates0, bytes0 = client.updates, client.update_bytes

    async def one_turn(sid: str) -> None:
        start = time.perf_counter()
        res = await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        prompt_latency.append(time.perf_counter() - start)
        if res.get("result", {}).get("stopReason") != "end_turn":
            client.errors.append(f"turn: {res}")

    for _ in range(args.rounds):
        await asyncio.gather(*(one_turn(s) for s in sids))
    stream_time = time.perf_counter() - t0
    stream_cpu = cpu_seconds(proc.pid) - cpu0
    turns = args.sessions * args.rounds
    updates = client.updates - updates0
    mbytes = (client.update_bytes - bytes0) / 1e6

    # ---- phase 2: cancel ----
    cancel_latency: list[float] = []

    async def cancel_one(sid: str) -> None:
        client.running.setdefault(sid, asyncio.Event())
        task = asyncio.create_task(
            client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]})
        )
        await asyncio.wait_for(client.running[sid].wait(), 60)
        start = time.perf_counter()
        await client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        res = await asyncio.wait_for(task, 60)
        cancel_latency.append(time.perf_counter() - start)
        if res.get("result", {}).get("stopReason") != "cancelled":
            client.errors.append(f"cancel: {res}")

    await asyncio.gather(*(cancel_one(s) for s in sids))
    await asyncio.sleep(0.5)
    rss_end = rss_kib(proc.pid)
    stop_sampling.set()
    await sampler
    total_cpu = cpu_seconds(proc.pid) - cpu0
    assert proc.stdin is not None
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 10)
    reader.cancel()
    return {
        "sessions": args.sessions,
        "rounds": args.rounds,
        "chunks_per_message": args.chunks,
        "turns": turns,
        "stream_seconds": round(stream_time, 3),
        "turns_per_s": round(turns / stream_time, 1),
        "updates": updates,
        "updates_per_s": round(updates / stream_time),
        "update_mb_per_s": round(mbytes / stream_time, 2),
        "permissions_answered": client.permissions,
        "prompt_p50_ms": round(pct(prompt_latency, 50) * 1000),
        "prompt_p99_ms": round(pct(prompt_latency, 99) * 1000),
        "cancel_p50_ms": round(pct(cancel_latency, 50) * 1000, 1),
        "cancel_p99_ms": round(pct(cancel_latency, 99) * 1000, 1),
        "cancel_max_ms": round(max(cancel_latency) * 1000, 1) if cancel_latency else None,
        "rss_start_mib": round(rss_start / 1024, 1),
        "rss_peak_mib": round(max(peak, rss_end.get("VmHWM", 0)) / 1024, 1),
        "rss_end_mib": round(rss_end["VmRSS"] / 1024, 1),
        "cpu_seconds_stream": round(stream_cpu, 2),
        "cpu_seconds_total": round(total_cpu, 2),
        "errors": client.errors[:5],
        "exit_code": proc.returncode,
    }


def table(r: dict[str, Any]) -> str:
    rows = [
        ("sessions × rounds (turns)", f"{r['sessions']} × {r['rounds']} ({r['turns']})"),
        ("stream+approve wall time", f"{r['stream_seconds']} s"),
        ("throughput: turns", f"{r['turns_per_s']} turns/s"),
        ("throughput: session/update frames", f"{r['updates_per_s']} frames/s ({r['updates']} frames)"),
        ("throughput: update bytes", f"{r['update_mb_per_s']} MB/s"),
        ("permission requests answered", str(r["permissions_answered"])),
        ("prompt latency p50 / p99", f"{r['prompt_p50_ms']} / {r['prompt_p99_ms']} ms"),
        (
            "session/cancel → cancelled p50 / p99 / max",
            f"{r['cancel_p50_ms']} / {r['cancel_p99_ms']} / {r['cancel_max_ms']} ms",
        ),
        ("agent RSS start / peak / end", f"{r['rss_start_mib']} / {r['rss_peak_mib']} / {r['rss_end_mib']} MiB"),
        ("agent CPU (stream phase / total)", f"{r['cpu_seconds_stream']} / {r['cpu_seconds_total']} s"),
        ("errors", str(len(r["errors"])) + (f" e.g. {r['errors'][0][:80]}" if r["errors"] else "")),
        ("exit code after stdin EOF", str(r["exit_code"])),
    ]
    width = max(len(k) for k, _ in rows)
    out = [f"| {'metric'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
    out += [f"| {k.ljust(width)} | {v} |" for k, v in rows]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--chunks", type=int, default=60, help="text chunks per streamed message")
    ap.add_argument("--rounds", type=int, default=2, help="stream+approve turns per session")
    ap.add_argument("--json", help="also write the raw numbers to this file")
    args = ap.parse_args()
    result = asyncio.run(run(args))
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0 if not result["errors"] and result["exit_code"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
