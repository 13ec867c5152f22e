"""CI: check an installed `gatewright` as a user gets it (a wheel in a fresh venv, or pipx), from outside the checkout.

Usage: python smoke_install.py PATH/TO/gatewright   (run it from a directory outside the repository)

1. `gatewright --version` prints `gatewright X.Y.Z`;
2. `gatewright demo` runs;
3. `gatewright run` with a scripted model reads a file and writes one (auto mode);
4. `gatewright acp`, driven over stdio as an editor drives it, does the same in an ACP session.
Only the standard library is used, so nothing here comes from the checkout. Exits non-zero on the first failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMEOUT_S = 120


def fail(msg: str) -> None:
    sys.stderr.write(f"smoke_install: FAILED: {msg}\n")
    raise SystemExit(1)


def run(argv: list[str], env: dict[str, str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, **kw)
    if proc.returncode != 0:
        fail(f"{' '.join(argv[:3])} … exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def scripted(tmp: Path, name: str, target: str) -> Path:
    script = {
        "responses": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "input.txt"}}]},
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": target, "content": "written by gatewright\n"}}
                ]
            },
            {"text": "Done."},
        ]
    }
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def workspace(tmp: Path, name: str) -> Path:
    ws = tmp / name
    ws.mkdir()
    (ws / "input.txt").write_text("some input\n", encoding="utf-8")
    (ws / "AGENTS.md").write_text("Smoke-test instructions: keep it short.\n", encoding="utf-8")
    return ws


def check_acp(exe: str, tmp: Path, env: dict[str, str]) -> None:
    ws = workspace(tmp, "acp-ws")
    script = scripted(tmp, "acp", "from-acp.txt")
    proc = subprocess.Popen(
        [exe, "acp", "--model", f"scripted:{script}", "--mode", "auto"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(msg: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()

    def answer(rid: int) -> dict[str, object]:
        deadline = time.monotonic() + TIMEOUT_S
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                fail(f"gatewright acp closed stdout; stderr:\n{proc.stderr.read() if proc.stderr else ''}")
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    fail(f"request {rid} failed: {msg['error']}")
                return msg["result"]
        fail(f"no answer to request {rid} within {TIMEOUT_S} s")
        raise AssertionError  # unreachable

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        answer(1)
        send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(ws), "mcpServers": []}})
        sid = answer(2)["sessionId"]
        send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "copy the input"}]},
            }
        )
        result = answer(3)
        if result.get("stopReason") != "end_turn":
            fail(f"the ACP prompt ended {result}")
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("gatewright acp did not exit at EOF")
    if proc.returncode != 0:
        fail(f"gatewright acp exited {proc.returncode}")
    if (ws / "from-acp.txt").read_text(encoding="utf-8") != "written by gatewright\n":
        fail("the ACP session did not write its file")


def main() -> None:
    exe = sys.argv[1]
    here = Path.cwd().resolve()
    repo = Path(__file__).resolve().parents[1]
    if here == repo or repo in here.parents:
        fail(f"run me from outside the repository (cwd {here})")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "config.toml").write_text("", encoding="utf-8")
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("GATEWRIGHT_")
        }
        env.update(GATEWRIGHT_STATE_DIR=str(tmp / "state"), GATEWRIGHT_CONFIG=str(tmp / "config.toml"))

        out = run([exe, "--version"], env).stdout.strip()
        if not re.fullmatch(r"gatewright \d+\.\d+\.\d+\S*", out):
            fail(f"--version printed {out!r}")
        run([exe, "demo"], env, cwd=tmp)

        ws = workspace(tmp, "run-ws")
        script = scripted(tmp, "run", "from-run.txt")
        res = run(
            [exe, "run", "--model", f"scripted:{script}", "--mode", "auto", "--cwd", str(ws), "copy it"],
            env,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
        )
        if (ws / "from-run.txt").read_text(encoding="utf-8") != "written by gatewright\n" or "Done." not in res.stdout:
            fail(f"gatewright run did not do its read and write:\n{res.stdout}\n{res.stderr}")

        check_acp(exe, tmp, env)
    sys.stdout.write(
        f"smoke_install: {out} from {exe}: --version, demo, run and acp sessions with read_file and write_file: ok\n"
    )


if __name__ == "__main__":
    main()
