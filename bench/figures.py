"""The benchmark figures. Each function returns table rows; every figure is a median over repeated runs, interleaved
with its baseline in the same run, so a noisy neighbour slows both sides alike."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._client import ROOT, Client, agent_env, gatewright_argv, rss_kb

HERE = Path(__file__).resolve().parent


@dataclass
class Row:
    figure: str
    value: str
    baseline: str
    ratio: str
    target: str
    verdict: str  # "met", "NOT met", "" (informational) or "n/a"


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("met" if ok else "NOT met")


def ms(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 10 else f"{s:.2f} s"


class Workdir:
    """A temporary workspace + state dir + scripted model files for one figure."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gw-bench-")).resolve()
        self.ws = self.root / "ws"
        self.ws.mkdir()
        self.state = self.root / "state"
        self.state.mkdir()

    def script(self, name: str, responses: list[dict[str, Any]]) -> str:
        p = self.root / f"{name}.json"
        p.write_text(json.dumps({"responses": responses}), encoding="utf-8")
        return str(p)

    def agent(self, *args: str, state: Path | None = None, **kw: Any) -> Client:
        return Client(gatewright_argv(*args), cwd=ROOT, env=agent_env(str(state or self.state)), **kw)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _new_session(c: Client, cwd: Path, mcp: list[dict[str, Any]] | None = None) -> tuple[str, float]:
    answer, dt = c.request("session/new", {"cwd": str(cwd), "mcpServers": mcp or []})
    return answer["result"]["sessionId"], dt


# ---- session/new with three MCP servers --------------------------------------------------------------------------
def mcp_servers(n: int = 3, sleep_s: int = 30) -> list[dict[str, Any]]:
    """Tiny stdio "MCP servers" that never answer: if session/new waited for them, it would take `sleep_s`."""
    return [
        {
            "name": f"slow{i}",
            "command": sys.executable,
            "args": ["-c", f"import time; time.sleep({sleep_s})"],
            "env": [],
        }
        for i in range(n)
    ]


def bench_session_new(runs: int) -> list[Row]:
    wd = Workdir()
    try:
        script = wd.script("m", [{"text": "ok"}])
        cold_mcp: list[float] = []
        cold_plain: list[float] = []
        idle_first: list[float] = []
        warm_mcp: list[float] = []
        warm_plain: list[float] = []
        for r in range(max(3, runs // 3)):  # cold: the first session/new in a fresh process imports the runtime
            for with_mcp in (True, False) if r % 2 == 0 else (False, True):
                c = wd.agent("--model", f"scripted:{script}")
                try:
                    c.initialize()
                    _, dt = _new_session(c, wd.ws, mcp_servers() if with_mcp else None)
                    (cold_mcp if with_mcp else cold_plain).append(dt)
                finally:
                    c.close()
            # An editor that opens its first thread a moment after `initialize`: the agent warmed up meanwhile.
            c = wd.agent("--model", f"scripted:{script}")
            try:
                c.initialize()
                time.sleep(0.5)
                idle_first.append(_new_session(c, wd.ws)[1])
            finally:
                c.close()
        c = wd.agent("--model", f"scripted:{script}")
        try:
            c.initialize()
            _new_session(c, wd.ws)
            for _ in range(runs):
                # Settle first: the previous session's MCP servers are Python processes starting up on these cores.
                time.sleep(0.3)
                warm_mcp.append(_new_session(c, wd.ws, mcp_servers())[1])
                time.sleep(0.3)
                warm_plain.append(_new_session(c, wd.ws)[1])
        finally:
            c.close()
        wm, wp, cm, cp = med(warm_mcp), med(warm_plain), med(cold_mcp), med(cold_plain)
        return [
            Row(
                "session/new, 3 stdio MCP servers",
                ms(wm),
                f"no MCP: {ms(wp)}",
                f"{wm / wp:.2f}×",
                "< 20 ms",
                verdict(wm < 0.020),
            ),
            Row(
                "  first session/new of a process, 3 MCP",
                ms(cm),
                f"no MCP: {ms(cp)}",
                f"{cm / cp:.2f}×",
                "(informational)",
                "",
            ),
            Row(
                "  first session/new 0.5 s after initialize",
                ms(med(idle_first)),
                f"at once: {ms(cp)}",
                f"{med(idle_first) / cp:.2f}×",
                "(informational)",
                "",
            ),
        ]
    finally:
        wd.cleanup()


# ---- streaming ---------------------------------------------------------------------------------------------------
class _ChunkCounter:
    """Counts one batch of `agent_message_chunk` frames as the client's reader thread parses them."""

    def __init__(self) -> None:
        self.target = 0
        self.count = 0
        self.done = threading.Event()
        self.first = 0.0
        self.last = 0.0

    def arm(self, n: int) -> None:
        self.count = 0
        self.target = n
        self.done.clear()

    def __call__(self, msg: dict[str, Any], now: float) -> None:
        if (
            msg.get("method") == "session/update"
            and msg["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
        ):
            self.count += 1
            if self.count == 1:
                self.first = now
            if self.count == self.target:
                self.last = now
                self.done.set()


def bench_streaming(runs: int, chunks: int = 20_000) -> list[Row]:
    """Frames per second from sending the request to the last chunk parsed by the client, for gatewright (a
    `session/prompt` to the scripted model, one frame per piece) and for a raw writer of the same frames. Each
    gatewright run is paired with the raw run right after it and the figure is the median of the pairs' ratios, so a
    noisy moment hits both sides of a pair. The time to the first chunk is reported on its own row."""
    wd = Workdir()
    piece = "tok "
    try:
        script = wd.script("s", [{"text": piece * chunks, "chunks": chunks}] * (runs + 1))
        gw_count, raw_count = _ChunkCounter(), _ChunkCounter()
        gw = wd.agent("--model", f"scripted:{script}", on_frame=gw_count)
        raw = Client(
            [sys.executable, str(HERE / "raw_writer.py")], cwd=ROOT, env=agent_env(str(wd.state)), on_frame=raw_count
        )
        try:
            gw.initialize()

            def run_gw() -> tuple[float, float]:
                # A fresh session each run: history would otherwise grow by the streamed text every run until
                # compaction (which calls the scripted model too) starts to take part in the figure.
                fresh, _ = _new_session(gw, wd.ws)
                gw_count.arm(chunks)
                t = time.perf_counter()
                rid = gw.start("session/prompt", {"sessionId": fresh, "prompt": [{"type": "text", "text": "go"}]})
                if not gw_count.done.wait(120):
                    raise RuntimeError(f"only {gw_count.count} of {chunks} chunks arrived")
                gw.wait(rid)
                return chunks / (gw_count.last - t), gw_count.first - t

            def run_raw() -> tuple[float, float]:
                raw_count.arm(chunks)
                t = time.perf_counter()
                rid = raw._next
                raw._next += 1
                raw.send({"id": rid, "n": chunks, "piece": piece, "sessionId": "s"})
                if not raw_count.done.wait(120):
                    raise RuntimeError("raw writer stalled")
                raw.wait(rid)
                return chunks / (raw_count.last - t), raw_count.first - t

            run_gw(), run_raw()  # warm-up
            g, r, g_first, r_first = [], [], [], []
            for _ in range(runs):
                rate, first = run_gw()
                g.append(rate)
                g_first.append(first)
                rate, first = run_raw()
                r.append(rate)
                r_first.append(first)
        finally:
            gw.close()
            raw.close()
        ratio = med([a / b for a, b in zip(g, r, strict=True)])
        return [
            Row(
                f"streaming: agent_message_chunk frames/s ({chunks} chunks)",
                f"{med(g):,.0f}/s",
                f"raw writer: {med(r):,.0f}/s",
                f"{ratio:.0%}",
                "≥ 50% of raw",
                verdict(ratio >= 0.5),
            ),
            Row("  request sent → first chunk", ms(med(g_first)), f"raw writer: {ms(med(r_first))}", "", "", ""),
        ]
    finally:
        wd.cleanup()


# ---- approval round trip -----------------------------------------------------------------------------------------
def bench_approval(turns: int) -> list[Row]:
    """The same write_file call in `auto` (runs without asking) and in `safe` (asks; this client answers at once).

    Measured at the client: from the `tool_call` frame to the `tool_call_update` saying `in_progress` (the tool
    runs). In `safe` that span holds describe → `session/request_permission` → answer → run; the added latency is
    the difference of the two medians. Whole-turn times are shown next to it."""
    wd = Workdir()
    try:
        responses: list[dict[str, Any]] = []
        for i in range(turns + 2):
            responses.append(
                {"tool_calls": [{"name": "write_file", "arguments": {"path": f"out/f{i}.txt", "content": f"{i}\n"}}]}
            )
            responses.append({"text": "done"})
        script = wd.script("a", responses)
        asked = {"auto": 0, "safe": 0}
        marks: dict[str, dict[str, float]] = {"auto": {}, "safe": {}}

        def watcher(mode: str):
            def on_frame(msg: dict[str, Any], now: float) -> None:
                method = msg.get("method")
                if method == "session/request_permission":
                    asked[mode] += 1
                elif method == "session/update":
                    u = msg["params"]["update"]
                    if u["sessionUpdate"] == "tool_call":
                        marks[mode]["call"] = now
                    elif u["sessionUpdate"] == "tool_call_update" and u.get("status") == "in_progress":
                        marks[mode]["run"] = now

            return on_frame

        agents = {
            m: wd.agent("--model", f"scripted:{script}", "--mode", m, state=wd.root / f"state-{m}", on_frame=watcher(m))
            for m in ("auto", "safe")
        }
        try:
            sids = {}
            for m, c in agents.items():
                (wd.root / f"ws-{m}").mkdir()
                c.initialize()
                sids[m] = _new_session(c, wd.root / f"ws-{m}")[0]

            def turn(m: str) -> tuple[float, float]:
                marks[m].clear()
                dt = agents[m].request(
                    "session/prompt", {"sessionId": sids[m], "prompt": [{"type": "text", "text": "write"}]}
                )[1]
                return marks[m]["run"] - marks[m]["call"], dt

            turn("auto"), turn("safe")  # warm-up: the first tool call imports the tool code
            spans: dict[str, list[float]] = {"auto": [], "safe": []}
            whole: dict[str, list[float]] = {"auto": [], "safe": []}
            for i in range(turns):
                for m in ("auto", "safe") if i % 2 == 0 else ("safe", "auto"):
                    span, dt = turn(m)
                    spans[m].append(span)
                    whole[m].append(dt)
        finally:
            for c in agents.values():
                c.close()
        if asked["safe"] < turns or asked["auto"]:
            raise RuntimeError(f"unexpected permission requests: {asked}")
        a, s = med(spans["auto"]), med(spans["safe"])
        added = s - a
        return [
            Row(
                "approval round trip: added latency p50",
                ms(added),
                f"auto: call→runs {ms(a)}",
                f"safe: {ms(s)}",
                "< 2 ms",
                verdict(added < 0.002),
            ),
            Row(
                "  whole turn with that call (auto / safe)",
                ms(med(whole["safe"])),
                f"auto: {ms(med(whole['auto']))}",
                f"{med(whole['safe']) / med(whole['auto']):.2f}×",
                "(informational)",
                "",
            ),
        ]
    finally:
        wd.cleanup()


# ---- memory ------------------------------------------------------------------------------------------------------
def _settle(c: Client) -> None:
    """Make sure the event loop is up (initialize is answered before it starts), then let the process settle."""
    answer, _ = c.wait(c.start("bench/ping", {}))
    time.sleep(0.3)


def _tree_rss_kb(pid: int) -> int:
    """RSS of a process and its descendants (a peer's npm launcher runs the real agent as a child)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += rss_kb(p)
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, RuntimeError):
            continue
    return total


def bench_memory(runs: int, sessions: int = 20, peers: dict[str, list[str]] | None = None) -> list[Row]:
    peers = peers or {}
    peer_idle: dict[str, list[int]] = {name: [] for name in peers}
    wd = Workdir()
    try:
        script = wd.script("m", [{"text": "ok"}])
        idle, one, many, bare, sdk = [], [], [], [], []
        for _ in range(runs):
            c = wd.agent("--model", f"scripted:{script}")
            try:
                c.initialize()
                _settle(c)
                idle.append(rss_kb(c.pid))
                _new_session(c, wd.ws)
                time.sleep(0.2)
                one.append(rss_kb(c.pid))
                for _ in range(sessions - 1):
                    _new_session(c, wd.ws)
                time.sleep(0.2)
                many.append(rss_kb(c.pid))
            finally:
                c.close()
            b = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
            try:
                time.sleep(0.3)
                bare.append(rss_kb(b.pid))
            finally:
                b.communicate(b"")
            s = Client([sys.executable, str(HERE / "sdk_echo_agent.py")], cwd=ROOT, env=agent_env(str(wd.state)))
            try:
                s.initialize()
                time.sleep(0.3)
                sdk.append(rss_kb(s.pid))
            finally:
                s.close()
            for name, argv in peers.items():
                peer = Client(argv, cwd=ROOT, env=agent_env(str(wd.state)))
                try:
                    peer.initialize()
                    time.sleep(0.5)
                    peer_idle[name].append(_tree_rss_kb(peer.pid))
                finally:
                    peer.close()
        mi, m1, mm, mb, ms_ = (med(x) / 1024 for x in (idle, one, many, bare, sdk))
        peer_rows = [
            Row(
                f"  vs peer: {name}",
                f"{mi:.1f} MB",
                f"{name}: {med(v) / 1024:.1f} MB",
                f"{med(v) / 1024 / mi:.2f}× ours",
                "smaller",
                verdict(mi < med(v) / 1024),
            )
            for name, v in peer_idle.items()
        ]
        return [
            Row(
                "memory: idle RSS (after initialize)",
                f"{mi:.1f} MB",
                f"bare python: {mb:.1f} MB; SDK echo: {ms_:.1f} MB",
                f"{mi / mb:.2f}× bare",
                "< 60 MB",
                verdict(mi < 60),
            ),
            Row(
                f"memory: {sessions} open sessions add",
                f"{mm - mi:.1f} MB",
                f"of which the 1st: {m1 - mi:.1f} MB",
                f"{(mm - m1) / (sessions - 1) * 1024:.0f} KB/session after",
                "< 40 MB",
                verdict(mm - mi < 40),
            ),
            *peer_rows,
        ]
    finally:
        wd.cleanup()


# ---- session/load of a long session ------------------------------------------------------------------------------
def _turn_script(n: int) -> list[dict[str, Any]]:
    """n turns; every other turn makes a read_file tool call (runs without asking in safe mode)."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i % 2:
            out.append({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]})
        out.append({"text": f"Turn {i}: here is a reply of a few words, streamed in a handful of chunks.", "chunks": 6})
    return out


def bench_load(runs: int, sizes: tuple[int, ...] = (100, 1000)) -> list[Row]:
    wd = Workdir()
    try:
        (wd.ws / "notes.txt").write_text("some notes\n" * 20)
        probe = wd.agent()
        try:
            caps = probe.initialize().get("agentCapabilities", {})
        finally:
            probe.close()
        if not caps.get("loadSession"):
            return [
                Row(
                    "session/load, 1,000-turn session",
                    "not available",
                    "(agent has no loadSession yet)",
                    "",
                    "linear",
                    "n/a",
                )
            ]
        sids: dict[int, str] = {}
        build: dict[int, float] = {}
        for n in sizes:
            script = wd.script(f"t{n}", _turn_script(n))
            c = wd.agent("--model", f"scripted:{script}")
            try:
                c.initialize()
                sid, _ = _new_session(c, wd.ws)
                t = time.perf_counter()
                for i in range(n):
                    c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"turn {i}"}]})
                build[n] = time.perf_counter() - t
            finally:
                c.close()
            sids[n] = sid
        times: dict[int, list[float]] = {n: [] for n in sizes}
        frames: dict[int, int] = {}
        for _ in range(runs):
            for n in sizes:
                c = wd.agent("--model", f"scripted:{wd.root / f't{n}.json'}")
                try:
                    c.initialize()
                    _settle(c)
                    before = c.frames
                    _, dt = c.request("session/load", {"sessionId": sids[n], "cwd": str(wd.ws), "mcpServers": []})
                    frames[n] = c.frames - before - 1
                    times[n].append(dt)
                finally:
                    c.close()
        lo, hi = sizes[0], sizes[-1]
        tl, th = med(times[lo]), med(times[hi])
        growth = th / tl
        rows = [
            Row(
                f"session/load, {n:,}-turn session",
                ms(med(times[n])),
                f"{frames[n]:,} frames replayed",
                f"{med(times[n]) / n * 1e6:.0f} µs/turn",
                "",
                "",
            )
            for n in sizes
        ]
        marginal = (th - tl) / (hi - lo)
        rows.append(
            Row(
                f"  load growth {lo}→{hi} turns",
                f"{growth:.1f}×",
                f"turns: {hi / lo:.0f}×; {marginal * 1e6:.0f} µs per extra turn",
                f"{growth / (hi / lo):.2f}× linear",
                "linear (≤ 1.2×)",
                verdict(growth / (hi / lo) <= 1.2),
            )
        )
        return rows
    finally:
        wd.cleanup()
