"""The first prompt of a fresh process, as an editor meets it: spawn the agent, send `session/new` the moment
`initialize` is answered and `session/prompt` the moment `session/new` is, against a zero-latency mock LLM on
loopback (`bench/mock_llm.py`) that plays a 3-step task (read notes.txt, write out.txt, answer).

Per run and subject: spawn → initialize answered, session/new, prompt → first LLM request (the request's arrival at
the mock), prompt → stop, LLM requests seen, and from `wait4` once the agent exits on EOF the CPU time (user + system,
its reaped children included) and peak RSS. Subjects run interleaved, run by run: gatewright on the OpenAI-compatible
and on the Anthropic provider, then each `--peer NAME=COMMAND`.

Peers get the same mock through their usual environment: `OPENAI_BASE_URL`/`OPENAI_API_KEY`,
`ANTHROPIC_BASE_URL`/`ANTHROPIC_API_KEY`, and a `CODEX_HOME` whose config.toml points Codex at the mock's Responses
endpoint; `HOME` is a scratch directory, so no user configuration or login takes part.

    python bench/first_prompt.py [--runs 5] [--peer NAME=COMMAND ...]     (also part of `python -m bench`)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._client import Client, agent_env, gatewright_argv
from bench.mock_llm import NOTES, OUT_TEXT, MockLLM

KEY = "sk-bench-not-a-real-key"
TASK = "Read notes.txt, then write what it says to out.txt, then tell me you are done."
GW_OPENAI = "gatewright (openai-compatible)"
GW_ANTHROPIC = "gatewright (anthropic)"
GW_TYPED = "gatewright (openai-compatible), prompt 0.5 s after session/new"
GW_AGAIN = "gatewright (openai-compatible), second session of the process"
BARE = "python -c pass"
FLOOR = "floor: anyio loop + httpx2 + one POST (bench/http_floor.py)"
TYPING_S = 0.5


@dataclass
class Run:
    initialize: float  # spawn → initialize answered (for the bare interpreter: spawn → exit)
    session_new: float | None
    first_request: float | None  # prompt sent → first LLM request arrived; None: the agent never called the model
    spawn_request: float | None  # spawn → first LLM request arrived (for the floor: spawn → its one request)
    prompt: float | None  # prompt sent → answered
    requests: int
    cpu: float | None
    peak_rss_kb: int | None
    task_done: bool  # out.txt holds what the model asked to write
    stop: str


@dataclass
class Samples:
    runs: list[Run] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    steps: list[dict[str, float]] = field(default_factory=list)  # the floor's own step durations, per run

    def med(self, attr: str) -> float | None:
        xs = [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None]
        return statistics.median(xs) if xs else None


_TICK = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as f:
                todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


def _hwm_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _sample(pid: int) -> tuple[int, float]:
    """(peak RSS KiB, CPU s) of a process tree so far: the sum of each process's high-water mark (`VmHWM`; not
    `wait4`'s maxrss, which counts the forking parent's pages before exec), and user + system time including reaped
    children. A tree, because a Node launcher runs the real agent as a child that `wait4` on the launcher misses."""
    rss, cpu = 0, 0.0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rpartition(")")[2].split()
            cpu += sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
            rss += _hwm_kb(p)
        except (OSError, IndexError, ValueError):
            continue
    return rss, cpu


def _sampler(pid: int, stop: threading.Event, out: list[tuple[int, float]]) -> None:
    while not stop.wait(0.01):
        out.append(_sample(pid))


def _task(c: Client, ws: Path, llm: MockLLM, pause: float) -> tuple[float, float | None, float, int, str, float | None]:
    """session/new, then the task's prompt: (session/new s, prompt → first LLM request s, prompt → stop s,
    LLM requests, stop reason, perf_counter of the first LLM request)."""
    (ws / "out.txt").unlink(missing_ok=True)
    llm.reset()
    answer, new_dt = c.request("session/new", {"cwd": str(ws), "mcpServers": []}, 60)
    sid = answer["result"]["sessionId"]
    if pause:
        time.sleep(pause)
    t_prompt = time.perf_counter()
    answer, prompt_dt = c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": TASK}]}, 120)
    seen = llm.reset()
    first = min((s.at for s in seen), default=None)
    return (
        new_dt,
        None if first is None else first - t_prompt,
        prompt_dt,
        len(seen),
        answer["result"]["stopReason"],
        first,
    )


def one_run(
    argv: list[str], env: dict[str, str], ws: Path, llm: MockLLM, pause: float = 0.0, again: bool = False
) -> Run:
    """One fresh process through the task. `pause`: seconds between the session/new answer and the prompt (a user
    typing), 0 for a client that sends everything at once. `again`: then the same task in a second session of the
    same process, whose timings are returned instead (the process's CPU and memory then count both tasks)."""
    (ws / "notes.txt").write_text(NOTES, encoding="utf-8")
    t0 = time.perf_counter()
    c = Client(argv, cwd=ws, env=env)
    stop = threading.Event()
    samples: list[tuple[int, float]] = []
    sampler = threading.Thread(target=_sampler, args=(c.pid, stop, samples), daemon=True)
    sampler.start()
    try:
        rid = c.start(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            },
        )
        _, t_init = c.wait(rid, 60)
        task = _task(c, ws, llm, pause)
        if again:
            task = _task(c, ws, llm, pause)
        samples.append(_sample(c.pid))  # the task is done: what the tree used up to here
    finally:
        stop.set()
        sampler.join(1)
        usage = c.close_with_usage(3)
    out = ws / "out.txt"
    done = out.exists() and out.read_text(encoding="utf-8", errors="replace").strip() == OUT_TEXT.strip()
    cpu = max(usage[0] if usage else 0.0, max((c for _, c in samples), default=0.0)) or None
    peak = max((r for r, _ in samples), default=0) or None
    new_dt, first, prompt_dt, requests, stop_reason, first_at = task
    return Run(
        t_init - t0,
        new_dt,
        first,
        None if first_at is None else first_at - t0,
        prompt_dt,
        requests,
        cpu,
        peak,
        done,
        stop_reason,
    )


def bare_run() -> Run:
    """The interpreter alone: what any CPython agent pays before its first line runs (CPU of `python -c pass`,
    the peak RSS of one waiting on its input)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    _, _, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    wall = time.perf_counter() - t0
    w = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        time.sleep(0.2)
        peak = _hwm_kb(w.pid)
    finally:
        w.communicate(b"")
    return Run(wall, None, None, None, None, 0, ru.ru_utime + ru.ru_stime, peak, True, "")


def floor_run(llm: MockLLM) -> tuple[Run, dict[str, float]]:
    """`bench/http_floor.py` against the mock: spawn → its request's arrival, and its own step durations."""
    llm.reset()
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("http_floor.py")), f"{llm.url}/v1/chat/completions"],
        stdout=subprocess.PIPE,
        env=agent_env(tempfile.gettempdir()),
    )
    assert p.stdout is not None
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise RuntimeError(f"bench/http_floor.py failed ({p.returncode})")
    seen = llm.reset()
    at = min(x.at for x in seen)
    return (Run(0.0, None, None, at - t0, None, len(seen), ru.ru_utime + ru.ru_stime, None, True, ""), json.loads(out))


def _codex_home(root: Path, url: str) -> Path:
    home = root / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'model = "mock"\nmodel_provider = "mock"\napproval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
        'model_reasoning_effort = "none"\n\n[model_providers.mock]\nname = "mock"\n'
        f'base_url = "{url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n",
        encoding="utf-8",
    )
    return home


def _vibe_home(root: Path, url: str) -> Path:
    """Mistral Vibe (Python) pointed at the mock as an OpenAI-compatible provider, tools approved without asking."""
    home = root / "vibe-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'active_model = "mock"\ndefault_agent = "auto-approve"\nenable_telemetry = false\n'
        "enable_update_checks = false\nenable_auto_update = false\nenable_notifications = false\n"
        "enable_connectors = false\n\n"
        f'[[providers]]\nname = "mock"\napi_base = "{url}/v1"\napi_key_env_var = "OPENAI_API_KEY"\n'
        'api_style = "openai"\nbackend = "generic"\n\n'
        '[[models]]\nname = "mock"\nprovider = "mock"\nalias = "mock"\n',
        encoding="utf-8",
    )
    return home


def measure(
    runs: int,
    peers: dict[str, list[str]] | None = None,
    *,
    typed: bool = True,
    ttft: float = 0.0,
    per_chunk: float = 0.0,
) -> dict[str, Samples]:
    """Samples per subject: gatewright on both providers, gatewright's second session in one process (the
    "hundredth prompt" baseline), gatewright with a user's pause before the prompt (when `typed`), and each peer
    (name → argv). `ttft` and `per_chunk` (seconds) make the mock answer like a real provider."""
    root = Path(tempfile.mkdtemp(prefix="gw-first-")).resolve()
    ws = root / "ws"
    ws.mkdir()
    try:
        with MockLLM(str(ws), ttft=ttft, per_chunk=per_chunk) as llm:
            base = agent_env(str(root / "state"))
            base.update(
                OPENAI_BASE_URL=f"{llm.url}/v1", OPENAI_API_KEY=KEY, ANTHROPIC_BASE_URL=llm.url, ANTHROPIC_API_KEY=KEY
            )
            for var in ("GATEWRIGHT_CONFIG", "XDG_CONFIG_HOME"):
                base.pop(var, None)
            peer_env = dict(
                base,
                IS_SANDBOX="1",
                HOME=str(root / "home"),
                CODEX_HOME=str(_codex_home(root, llm.url)),
                VIBE_HOME=str(_vibe_home(root, llm.url)),
                DISABLE_AUTOUPDATER="1",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                DISABLE_TELEMETRY="1",
                DO_NOT_TRACK="1",
            )
            (root / "home").mkdir()
            openai, anthropic = gatewright_argv("--model", "openai:mock"), gatewright_argv("--model", "anthropic:mock")
            subjects: dict[str, tuple[list[str], dict[str, str], float, bool]] = {
                GW_OPENAI: (openai, base, 0.0, False),
                GW_ANTHROPIC: (anthropic, base, 0.0, False),
                GW_AGAIN: (openai, base, 0.0, True),
            }
            if typed:
                subjects[GW_TYPED] = (openai, base, TYPING_S, False)
            for name, argv in (peers or {}).items():
                # Agents run in the workspace: a command relative to where the bench was started is made absolute.
                first = argv[0] if "/" not in argv[0] else os.path.abspath(argv[0])
                subjects[name] = ([first, *argv[1:]], peer_env, 0.0, False)
            samples = {name: Samples() for name in (BARE, FLOOR, *subjects)}
            for i in range(runs + 1):  # the first round warms the page cache and bytecode, and is dropped
                floor, steps = floor_run(llm)
                if i:
                    samples[BARE].runs.append(bare_run())
                    samples[FLOOR].runs.append(floor)
                    samples[FLOOR].steps.append(steps)
                for name, (argv, env, pause, again) in subjects.items():
                    try:
                        run = one_run(argv, env, ws, llm, pause, again)
                    except Exception as exc:  # one broken peer must not hide the others
                        if i:
                            samples[name].failures.append(f"{type(exc).__name__}: {exc}"[:200])
                        continue
                    if i:
                        samples[name].runs.append(run)
            return samples
    finally:
        shutil.rmtree(root, ignore_errors=True)


def rows(samples: dict[str, Samples], peers: list[str]) -> list[Any]:
    """The `python -m bench` rows: the first prompt of a fresh process against the same process's second session
    (the hundredth prompt), and the whole 3-step task against each peer, all from the same run."""
    from bench.figures import Row, ms, verdict

    def m(name: str, attr: str) -> float:
        value = samples[name].med(attr)
        if value is None:
            raise RuntimeError(f"{name}: no {attr} ({(samples[name].failures or ['no run'])[0]})")
        return value

    def mib(kb: float) -> str:
        return f"{kb / 1024:.0f} MiB"

    def delta(seconds: float) -> str:
        return ("+" if seconds >= 0 else "−") + ms(abs(seconds))

    out: list[Any] = []
    later = m(GW_AGAIN, "first_request")
    for name, label in ((GW_OPENAI, "openai-compatible"), (GW_ANTHROPIC, "anthropic")):
        first = m(name, "first_request")
        out.append(
            Row(
                f"first prompt in a fresh process → first LLM request ({label})",
                ms(first),
                f"second session, same process: {ms(later)}",
                delta(first - later),
                "≤ 30 ms",
                verdict(first <= 0.030),
            )
        )
    if GW_TYPED in samples:
        typed, at_once = m(GW_TYPED, "first_request"), m(GW_OPENAI, "first_request")
        out.append(
            Row(
                f"  the prompt typed {TYPING_S:g} s after session/new",
                ms(typed),
                f"sent at once: {ms(at_once)}",
                delta(typed - at_once),
                "(informational)",
                "",
            )
        )
    new, new_later = m(GW_OPENAI, "session_new"), m(GW_AGAIN, "session_new")
    out.append(
        Row(
            "  first session/new, sent as initialize is answered",
            ms(new),
            f"second session/new: {ms(new_later)}",
            delta(new - new_later),
            "≤ 30 ms",
            verdict(new <= 0.030),
        )
    )
    if samples[FLOOR].steps:
        # What the two 30 ms targets leave together, against what no agent on anyio + httpx2 can avoid.
        both = statistics.median(
            r.session_new + r.first_request
            for r in samples[GW_OPENAI].runs
            if r.session_new is not None and r.first_request is not None
        )
        loop = statistics.median(x["loop"] for x in samples[FLOOR].steps)
        http = statistics.median(x["http"] for x in samples[FLOOR].steps)
        out.append(
            Row(
                "  initialize answered → first LLM request, all at once",
                ms(both),
                f"floor: event loop {ms(loop)} + HTTP stack {ms(http)}",
                delta(both - loop - http),
                "≤ 60 ms (30 + 30)",
                verdict(both <= 0.060),
            )
        )
        spawn, spawn_floor = m(GW_OPENAI, "spawn_request"), m(FLOOR, "spawn_request")
        out.append(
            Row(
                "  spawn → first LLM request, all at once",
                ms(spawn),
                f"floor, spawn → POST: {ms(spawn_floor)}",
                f"{spawn / spawn_floor:.2f}× floor",
                "(informational)",
                "",
            )
        )
    stop, stop_later = m(GW_OPENAI, "prompt"), m(GW_AGAIN, "prompt")
    peer_stops = {p: m(p, "prompt") for p in peers if samples[p].runs}
    out.append(
        Row(
            "3-step task, fresh process: prompt → stop",
            ms(stop),
            f"second session: {ms(stop_later)}",
            f"{stop / stop_later:.1f}×",
            "below every peer",
            verdict(all(stop < v for v in peer_stops.values())) if peer_stops else "",
        )
    )
    cpu, bare_cpu = m(GW_OPENAI, "cpu"), m(BARE, "cpu")
    out.append(
        Row(
            "  CPU, spawn → exit (user + system)",
            f"{cpu:.2f} s",
            f"python -c pass: {bare_cpu:.2f} s",
            f"{cpu / bare_cpu:.1f}× bare",
            "≤ 0.5 s",
            verdict(cpu <= 0.5),
        )
    )
    if samples[FLOOR].runs:
        floor_cpu = m(FLOOR, "cpu")
        out.append(
            Row(
                "  CPU of the floor alone (bench/http_floor.py)",
                f"{floor_cpu:.2f} s",
                f"python -c pass: {bare_cpu:.2f} s",
                f"ours: {cpu / floor_cpu:.1f}× it",
                "(informational)",
                "",
            )
        )
    rss, bare_rss = m(GW_OPENAI, "peak_rss_kb"), m(BARE, "peak_rss_kb")
    out.append(
        Row(
            "  peak RSS",
            mib(rss),
            f"python -c pass: {mib(bare_rss)}",
            f"{rss / bare_rss:.1f}× bare",
            "≤ 50 MiB",
            verdict(rss <= 50 * 1024),
        )
    )
    for p in peers:
        if not samples[p].runs:
            out.append(Row(f"  vs peer: {p}", "FAILED", (samples[p].failures or ["no run"])[0][:60], "", "", "n/a"))
            continue
        pc, pr = m(p, "cpu"), m(p, "peak_rss_kb")
        out.append(
            Row(
                f"  vs peer: {p}, prompt → stop",
                ms(stop),
                f"{p}: {ms(peer_stops[p])}",
                f"{peer_stops[p] / stop:.1f}× faster",
                "faster",
                verdict(stop < peer_stops[p]),
            )
        )
        codex = "codex" in p
        out.append(
            Row(
                f"  vs peer: {p}, CPU",
                f"{cpu:.2f} s",
                f"{p}: {pc:.2f} s",
                f"{cpu / pc:.2f}× theirs",
                "≤ 0.7× theirs" if codex else "less",
                verdict(cpu <= 0.7 * pc if codex else cpu < pc),
            )
        )
        out.append(
            Row(
                f"  vs peer: {p}, peak RSS",
                mib(rss),
                f"{p}: {mib(pr)}",
                f"{rss / pr:.2f}× theirs",
                "smaller",
                verdict(rss < pr),
            )
        )
    return out


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1000:.0f}"


def table(samples: dict[str, Samples]) -> str:
    head = (
        "agent",
        "spawn → initialize",
        "session/new",
        "prompt → first LLM request",
        "spawn → first LLM request",
        "prompt → stop",
        "CPU s",
        "peak RSS MiB",
        "task done",
    )
    rows = [head]
    for name, s in samples.items():
        if not s.runs:
            rows.append((name, "FAILED", (s.failures or ["no run"])[0], "", "", "", "", "", ""))
            continue
        cpu, rss = s.med("cpu"), s.med("peak_rss_kb")
        done = sum(r.task_done for r in s.runs)
        rows.append(
            (
                name,
                _ms(s.med("initialize")) if name != FLOOR else "—",
                _ms(s.med("session_new")),
                _ms(s.med("first_request")),
                _ms(s.med("spawn_request")),
                _ms(s.med("prompt")),
                "—" if cpu is None else f"{cpu:.2f}",
                "—" if rss is None else f"{rss / 1024:.0f}",
                f"{done}/{len(s.runs)}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=COMMAND")
    ap.add_argument("--ttft", type=float, default=0.0, metavar="MS", help="the mock's time to first token")
    ap.add_argument("--per-chunk", type=float, default=0.0, metavar="MS", help="the mock's delay between chunks")
    args = ap.parse_args()
    peers = {}
    for spec in args.peer:
        name, _, command = spec.partition("=")
        peers[name] = shlex.split(command)
    samples = measure(args.runs, peers, ttft=args.ttft / 1000, per_chunk=args.per_chunk / 1000)
    print(table(samples))
    for name, s in samples.items():
        for f in s.failures:
            print(f"{name}: {f}", file=sys.stderr)


if __name__ == "__main__":
    main()
