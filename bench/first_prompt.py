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
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._client import Client, agent_env, gatewright_argv
from bench.mock_llm import NOTES, OUT_TEXT, MockLLM

KEY = "sk-bench-not-a-real-key"
TASK = "Read notes.txt, then write what it says to out.txt, then tell me you are done."
GW_OPENAI = "gatewright (openai-compatible)"
GW_ANTHROPIC = "gatewright (anthropic)"
GW_TYPED = "gatewright (openai-compatible), prompt 0.5 s after session/new"
GW_AGAIN = "gatewright (openai-compatible), second session of the process"
TYPING_S = 0.5


@dataclass
class Run:
    initialize: float
    session_new: float
    first_request: float | None  # prompt sent → first LLM request arrived; None: the agent never called the model
    prompt: float  # prompt sent → answered
    requests: int
    cpu: float | None
    peak_rss_kb: int | None
    task_done: bool  # out.txt holds what the model asked to write
    stop: str


@dataclass
class Samples:
    runs: list[Run] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

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


def _sample(pid: int) -> tuple[int, float]:
    """(RSS KiB, CPU s) of a process tree: a Node launcher runs the real agent as a child, which `wait4` on the
    launcher only counts if the launcher reaps it."""
    rss, cpu = 0, 0.0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rpartition(")")[2].split()
            rss += int(fields[21]) * os.sysconf("SC_PAGE_SIZE") // 1024
            cpu += sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            continue
    return rss, cpu


def _sampler(pid: int, stop: threading.Event, out: list[tuple[int, float]]) -> None:
    while not stop.wait(0.01):
        out.append(_sample(pid))


def _task(c: Client, ws: Path, llm: MockLLM, pause: float) -> tuple[float, float | None, float, int, str]:
    """session/new, then the task's prompt: (session/new s, prompt → first LLM request s, prompt → stop s,
    LLM requests, stop reason)."""
    (ws / "out.txt").unlink(missing_ok=True)
    llm.reset()
    answer, new_dt = c.request("session/new", {"cwd": str(ws), "mcpServers": []}, 60)
    sid = answer["result"]["sessionId"]
    if pause:
        time.sleep(pause)
    t_prompt = time.perf_counter()
    answer, prompt_dt = c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": TASK}]},
                                  120)
    seen = llm.reset()
    first = min((s.at for s in seen), default=None)
    return new_dt, None if first is None else first - t_prompt, prompt_dt, len(seen), answer["result"]["stopReason"]


def one_run(argv: list[str], env: dict[str, str], ws: Path, llm: MockLLM, pause: float = 0.0,
            again: bool = False) -> Run:
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
        rid = c.start("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}})
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
    cpu, maxrss = usage if usage is not None else (0.0, 0)
    cpu = max(cpu, max((c for _, c in samples), default=0.0)) or None
    peak = max([*(r for r, _ in samples), maxrss]) or None
    new_dt, first, prompt_dt, requests, stop_reason = task
    return Run(t_init - t0, new_dt, first, prompt_dt, requests, cpu, peak, done, stop_reason)


def _codex_home(root: Path, url: str) -> Path:
    home = root / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'model = "mock"\nmodel_provider = "mock"\napproval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
        'model_reasoning_effort = "none"\n\n[model_providers.mock]\nname = "mock"\n'
        f'base_url = "{url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n", encoding="utf-8")
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
        '[[models]]\nname = "mock"\nprovider = "mock"\nalias = "mock"\n', encoding="utf-8")
    return home


def measure(runs: int, peers: dict[str, list[str]] | None = None, *, typed: bool = True) -> dict[str, Samples]:
    """Samples per subject: gatewright on both providers, gatewright's second session in one process (the
    "hundredth prompt" baseline), gatewright with a user's pause before the prompt (when `typed`), and each peer
    (name → argv)."""
    root = Path(tempfile.mkdtemp(prefix="gw-first-")).resolve()
    ws = root / "ws"
    ws.mkdir()
    try:
        with MockLLM(str(ws)) as llm:
            base = agent_env(str(root / "state"))
            base.update(OPENAI_BASE_URL=f"{llm.url}/v1", OPENAI_API_KEY=KEY, ANTHROPIC_BASE_URL=llm.url,
                        ANTHROPIC_API_KEY=KEY)
            for var in ("GATEWRIGHT_CONFIG", "XDG_CONFIG_HOME"):
                base.pop(var, None)
            peer_env = dict(base, IS_SANDBOX="1", HOME=str(root / "home"), CODEX_HOME=str(_codex_home(root, llm.url)),
                            VIBE_HOME=str(_vibe_home(root, llm.url)),
                            DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                            DISABLE_TELEMETRY="1", DO_NOT_TRACK="1")
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
            samples = {name: Samples() for name in subjects}
            for i in range(runs + 1):  # the first round warms the page cache and bytecode, and is dropped
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


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1000:.0f}"


def table(samples: dict[str, Samples]) -> str:
    head = ("agent", "spawn → initialize", "session/new", "prompt → first LLM request", "prompt → stop", "CPU s",
            "peak RSS MiB", "task done")
    rows = [head]
    for name, s in samples.items():
        if not s.runs:
            rows.append((name, "FAILED", (s.failures or ["no run"])[0], "", "", "", "", ""))
            continue
        cpu, rss = s.med("cpu"), s.med("peak_rss_kb")
        done = sum(r.task_done for r in s.runs)
        rows.append((name, _ms(s.med("initialize")), _ms(s.med("session_new")), _ms(s.med("first_request")),
                     _ms(s.med("prompt")), "—" if cpu is None else f"{cpu:.2f}",
                     "—" if rss is None else f"{rss / 1024:.0f}", f"{done}/{len(s.runs)}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=COMMAND")
    args = ap.parse_args()
    peers = {}
    for spec in args.peer:
        name, _, command = spec.partition("=")
        peers[name] = shlex.split(command)
    samples = measure(args.runs, peers)
    print(table(samples))
    for name, s in samples.items():
        for f in s.failures:
            print(f"{name}: {f}", file=sys.stderr)


if __name__ == "__main__":
    main()
