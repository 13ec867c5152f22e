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


def _peak_sampler(pid: int, stop: threading.Event, out: list[int]) -> None:
    """The process tree's RSS every 10 ms (a Node launcher's child is a separate process)."""
    from bench.figures import _tree_rss_kb

    while not stop.wait(0.01):
        try:
            out.append(_tree_rss_kb(pid))
        except (OSError, RuntimeError):
            return


def one_run(argv: list[str], env: dict[str, str], ws: Path, llm: MockLLM, pause: float = 0.0) -> Run:
    """One fresh process through the task. `pause`: seconds between the session/new answer and the prompt (a user
    typing), 0 for a client that sends everything at once."""
    (ws / "notes.txt").write_text(NOTES, encoding="utf-8")
    llm.reset()
    t0 = time.perf_counter()
    c = Client(argv, cwd=ws, env=env)
    stop = threading.Event()
    tree: list[int] = []
    sampler = threading.Thread(target=_peak_sampler, args=(c.pid, stop, tree), daemon=True)
    sampler.start()
    try:
        rid = c.start("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}})
        _, t_init = c.wait(rid, 60)
        answer, new_dt = c.request("session/new", {"cwd": str(ws), "mcpServers": []}, 60)
        sid = answer["result"]["sessionId"]
        if pause:
            time.sleep(pause)
        t_prompt = time.perf_counter()
        answer, prompt_dt = c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": TASK}]},
                                      120)
        seen = llm.reset()
        stop_reason = answer["result"]["stopReason"]
    finally:
        usage = c.close_with_usage(10)
        stop.set()
        sampler.join(1)
    out = ws / "out.txt"
    done = out.exists() and out.read_text(encoding="utf-8", errors="replace").strip() == OUT_TEXT.strip()
    first = min((s.at for s in seen), default=None)
    cpu, maxrss = usage if usage is not None else (None, None)
    peak = max([*tree, maxrss or 0]) or None
    return Run(t_init - t0, new_dt, None if first is None else first - t_prompt, prompt_dt, len(seen), cpu, peak,
               done, stop_reason)


def _codex_home(root: Path, url: str) -> Path:
    home = root / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'model = "mock"\nmodel_provider = "mock"\napproval_policy = "never"\nsandbox_mode = "workspace-write"\n'
        'model_reasoning_effort = "none"\n\n[model_providers.mock]\nname = "mock"\n'
        f'base_url = "{url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n", encoding="utf-8")
    return home


def measure(runs: int, peers: dict[str, list[str]] | None = None, *, typed: bool = True) -> dict[str, Samples]:
    """Samples per subject: gatewright on both providers, gatewright with a user's pause before the prompt (when
    `typed`), and each peer (name → argv)."""
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
            peer_env = dict(base, HOME=str(root / "home"), CODEX_HOME=str(_codex_home(root, llm.url)),
                            DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                            DISABLE_TELEMETRY="1", DO_NOT_TRACK="1")
            (root / "home").mkdir()
            subjects: dict[str, tuple[list[str], dict[str, str], float]] = {
                GW_OPENAI: (gatewright_argv("--model", "openai:mock"), base, 0.0),
                GW_ANTHROPIC: (gatewright_argv("--model", "anthropic:mock"), base, 0.0),
            }
            if typed:
                subjects[GW_TYPED] = (gatewright_argv("--model", "openai:mock"), base, TYPING_S)
            for name, argv in (peers or {}).items():
                subjects[name] = (argv, peer_env, 0.0)
            samples = {name: Samples() for name in subjects}
            for i in range(runs + 1):  # the first round warms the page cache and bytecode, and is dropped
                for name, (argv, env, pause) in subjects.items():
                    (ws / "out.txt").unlink(missing_ok=True)
                    try:
                        run = one_run(argv, env, ws, llm, pause)
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
