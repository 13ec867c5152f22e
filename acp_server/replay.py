"""`gatewright replay --check FILE`: re-drive a recorded transcript's client side against the current agent and find
the first frame where the agent now answers differently (docs/transcripts.md, "Replay").

For each recording in the file (each `meta` line starts one), `gatewright acp` is started the way the recording was
made: the scripted model from `meta.scripted_model`, the mode from `meta.mode`, in a temporary workspace (the files of
`meta.workspace_files`, or a copy of `--workspace DIR`) and a temporary state dir, with an empty config and no
provider keys, so the check is the same on every machine and never calls a real model. Every `in` frame is sent in
recorded order, once the agent has written as many frames (text chunks aside) as it had at that point of the
recording; answers to the agent's own requests are sent when it asks, matched by method and position, with the id it
used this time. Recorded workspace paths are mapped to the temporary ones, recorded session ids to this run's.

Then both sides are normalised (`acp_server.transcript`) and compared frame by frame.

A transcript is someone else's conversation: its scripted model decides the tool calls and its `in` frames answer
the permission questions. Before anything runs, `untrusted_actions` lists what would act outside the temporary
workspace (commands, MCP servers, writes to other paths); the check refuses those unless `--trust` is given.

A `gatewright run --record` transcript (`meta.host` is "run") has no initialize or session/new: the check opens a
session itself and compares the frames the run host records (it never writes the editor-only updates in
`RUN_HOST_OMITS`).
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import os
import posixpath
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_server.transcript import (
    STATE,
    WORKSPACE,
    Normalised,
    Segment,
    Transcript,
    TranscriptError,
    describe,
    id_key,
    is_chunk,
    is_optional,
    is_request,
    is_response,
    load,
    normalise,
    substitute,
    substitute_path,
    update_kind,
)
from permissions.gateway import EDITOR_COULD_NOT_ASK, NO_TERMINAL_TO_ASK
from runtime import secrets as secret_registry
from runtime.recording import EDITOR_ONLY_UPDATES, redact

DEFAULT_IDLE_S = 10.0
"""How long the check waits for an agent that has gone quiet before it calls the rest of the recording missing."""
SETTLE_S = 0.05  # after the last expected frame: time for a frame the recording does not have to show up
RUN_HOST_OMITS = EDITOR_ONLY_UPDATES
MODES = ("manual", "safe", "auto", "read-only")
SESSION_OPENERS = ("session/new", "session/load", "session/resume", "session/fork")
PROCESS_FREE_BASH = ("status", "logs", "list", "stop")
WRITERS = ("write_file", "edit")
PATCH_HEADERS = ("*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:")
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
CLEARED_ENV = (
    "GATEWRIGHT_MODEL",
    "GATEWRIGHT_MODE",
    "GATEWRIGHT_RECORD",
    "GATEWRIGHT_PERMISSION_TIMEOUT",
    *PROVIDER_ENV,
)


class CheckError(Exception):
    """The transcript cannot be checked as it is (no scripted model, an untrusted action): one readable message."""


@dataclass(slots=True)
class Divergence:
    index: int  # position among the compared (normalised) frames
    line: int  # the recorded frame's line in the file; 0 when the recording has no frame there
    summary: str
    detail: str


@dataclass(slots=True)
class CheckResult:
    transcript: Transcript
    expected: list[Normalised]
    actual: list[Normalised]
    frames: list[dict[str, Any]]  # the agent's frames as they came, every segment
    requests: dict[str, str]  # id → method of the requests the check sent (to name their answers)
    stderr: str
    divergence: Divergence | None
    stalled: str | None  # why the check stopped driving before the end of the recording, if it did
    seconds: float

    @property
    def ok(self) -> bool:
        return self.divergence is None


@dataclass
class _Live:
    """The mapping from the recording to this run, carried across segments."""

    roots: dict[str, str]  # recorded workspace path → temporary path
    state_dir: str
    recorded_sessions: list[str] = field(default_factory=list)
    live_sessions: list[str] = field(default_factory=list)

    def to_live(self, msg: Any) -> Any:
        for old, new in sorted(self.roots.items(), key=lambda x: -len(x[0])):
            msg = substitute_path(msg, old, new)
        ids = {old: new for old, new in zip(self.recorded_sessions, self.live_sessions, strict=False) if old != new}
        return _replace_ids(msg, ids) if ids else msg


def _replace_ids(value: Any, ids: dict[str, str]) -> Any:
    """Session ids swapped: a string that is a recorded id, and long ids (`sess_…`) inside text. A short id (the run
    host's `cli`) is replaced only as a whole value, never inside words."""
    if isinstance(value, str):
        if value in ids:
            return ids[value]
        for old, new in ids.items():
            if len(old) >= 16 and old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_replace_ids(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _replace_ids(v, ids) for k, v in value.items()}
    return value


# ---- the agent process --------------------------------------------------------------------------------------------
class _Agent:
    """`gatewright acp` on pipes: every frame it writes is kept, in order; nothing is answered automatically."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        self.frames: list[dict[str, Any]] = []
        self.eof = False
        self.last_frame_at = time.monotonic()
        self._stderr: list[bytes] = []
        self._cond = threading.Condition()
        self._threads = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    msg = {"<not JSON>": raw.decode("utf-8", errors="replace").rstrip("\n")}
                if not isinstance(msg, dict):
                    msg = {"<not an object>": msg}
                with self._cond:
                    self.frames.append(msg)
                    self.last_frame_at = time.monotonic()
                    self._cond.notify_all()
        except (OSError, ValueError):  # closed under us at teardown
            pass
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def _read_err(self) -> None:
        stderr = self.proc.stderr
        assert isinstance(stderr, io.BufferedReader)  # a pipe with Popen's default buffering
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: stderr.read1(65536), b""):
                self._stderr.append(chunk)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", errors="replace")

    def send(self, msg: Any) -> None:
        self.send_raw(json.dumps(msg, ensure_ascii=False).encode("utf-8"))

    def send_raw(self, line: bytes, repeat: int = 1) -> None:
        assert self.proc.stdin is not None
        try:
            for _ in range(repeat):
                self.proc.stdin.write(line)
            self.proc.stdin.write(b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the agent is gone: what it wrote so far is compared

    def wait(self, done: Any, idle: float) -> bool:
        """Wait until `done(frames)` holds; False when the agent exits or writes nothing for `idle` seconds first."""
        with self._cond:
            while not done(self.frames):
                if self.eof:
                    return False
                left = self.last_frame_at + idle - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.25))
            return True

    def settle(self, quiet: float) -> None:
        """Until the agent has written nothing for `quiet` seconds (frames the recording may not have)."""
        with self._cond:
            while not self.eof:
                left = self.last_frame_at + quiet - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def close(self, timeout: float = 10) -> int | None:
        """EOF on its stdin, then wait for it to exit (ACP's stdio transport says it must); killed if it does not."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        try:
            code: int | None = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        for t in self._threads:
            t.join(timeout=2)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()
        return code

    def kill(self) -> None:
        """No process of the check survives it: the agent's whole process group goes."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


# ---- what a transcript would do -----------------------------------------------------------------------------------
def scripted_responses(meta: dict[str, Any]) -> list[dict[str, Any]]:
    text = meta.get("scripted_model")
    if text is None:
        return []
    if not isinstance(text, str):
        raise TranscriptError("meta.scripted_model must be the script file's text")
    try:
        doc = json.loads(text)
    except ValueError:
        raise TranscriptError("meta.scripted_model is not valid JSON") from None
    responses = doc.get("responses") if isinstance(doc, dict) else None
    if not isinstance(responses, list):
        raise TranscriptError('meta.scripted_model has no "responses" list')
    return [r for r in responses if isinstance(r, dict)]


def untrusted_actions(transcript: Transcript, roots: list[str] | None = None) -> list[str]:
    """What re-driving the transcript would do beyond reading and writing inside its temporary workspace: commands
    the scripted model runs, MCP servers the client starts, writes to paths outside the workspace. Empty: safe to
    check without `--trust`. `roots` are the workspace paths (as the script names them) writes may go to."""
    roots = [r for r in (roots or []) if r]
    found: list[str] = []
    has_mcp = False
    for seg in transcript.segments:
        for e in seg.entries:
            msg = e.msg
            if e.dir != "in" or not is_request(msg) or msg["method"] not in SESSION_OPENERS:
                continue
            servers = msg.get("params", {}).get("mcpServers") if isinstance(msg.get("params"), dict) else None
            for s in servers if isinstance(servers, list) else []:
                has_mcp = True
                if isinstance(s, dict):
                    what = s.get("command") or s.get("url") or "?"
                    found.append(f"starts the MCP server {s.get('name', '?')!r} ({what}) (line {e.line})")
    for seg in transcript.segments:
        in_editor = _editor_runs_commands(seg)
        for i, response in enumerate(scripted_responses(seg.meta)):
            for call in response.get("tool_calls") or []:
                if isinstance(call, dict):
                    why = _call_risk(call, roots, has_mcp, in_editor)
                    if why:
                        found.append(f"{why} (scripted response {i})")
    return found


def _editor_runs_commands(seg: Segment) -> bool:
    """True when every `initialize` of the recording advertised `terminal`: then `bash` exec runs in the editor's
    terminal (`terminal/*`), which the check answers from the recording, so nothing runs here."""
    caps = [
        e.msg.get("params", {}).get("clientCapabilities")
        for e in seg.entries
        if e.dir == "in"
        and is_request(e.msg)
        and e.msg["method"] == "initialize"
        and isinstance(e.msg.get("params"), dict)
    ]
    return not seg.terminal_host and bool(caps) and all(isinstance(c, dict) and c.get("terminal") is True for c in caps)


def _call_risk(call: dict[str, Any], roots: list[str], has_mcp: bool, in_editor: bool) -> str | None:
    name, args = call.get("name"), call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None  # the tool refuses arguments that are not JSON
    if not isinstance(args, dict):
        return None
    if name == "bash":
        action = args.get("action") or "exec"
        if action in PROCESS_FREE_BASH or (action == "exec" and in_editor):
            return None
        what = args.get("command") if action in ("exec", "start") else f"input to process {args.get('processId')}"
        return f"runs a command: {what!r}"
    if name in WRITERS:
        path = args.get("path")
        return f"writes {path!r}, outside the workspace" if _outside(path, roots) else None
    if name == "apply_patch" and isinstance(args.get("patch"), str):
        for line in args["patch"].splitlines():
            for header in PATCH_HEADERS:
                if line.startswith(header) and _outside(line[len(header) :].strip(), roots):
                    return f"patches {line[len(header) :].strip()!r}, outside the workspace"
        return None
    if isinstance(name, str) and has_mcp and name not in _BUILTIN_TOOLS:
        return f"calls the MCP tool {name!r}"
    return None


_BUILTIN_TOOLS = frozenset(
    {
        "bash",
        "read_file",
        "write_file",
        "apply_patch",
        "glob",
        "grep",
        "edit",
        "update_agents_md",
        "update_plan",
        "delegate_explore",
        "delegate_task",
    }
)


def _outside(path: Any, roots: list[str]) -> bool:
    """True unless `path` provably stays inside a workspace root (fail closed: `~`, `..` out, other absolutes)."""
    if not isinstance(path, str):
        return False  # the tool refuses it
    if path.startswith("~"):
        return True
    if posixpath.isabs(path):
        norm = posixpath.normpath(path)
        return not any(norm == r or norm.startswith(r.rstrip("/") + "/") for r in roots)
    norm = posixpath.normpath(path)
    return norm == ".." or norm.startswith("../")


# ---- the check ----------------------------------------------------------------------------------------------------
def recorded_roots(transcript: Transcript) -> list[str]:
    """The workspace paths of the recording: `<WORKSPACE>` (already placeholdered), `meta.cwd`, and every absolute
    `cwd` and additional directory the client opened a session in, in order of first appearance."""
    roots: list[str] = []

    def add(p: Any) -> None:
        if isinstance(p, str) and (p == WORKSPACE or posixpath.isabs(p)) and p not in roots:
            roots.append(p.rstrip("/") or p)

    for seg in transcript.segments:
        add(seg.meta.get("cwd"))
        for e in seg.entries:
            if e.dir == "in" and is_request(e.msg) and e.msg["method"] in SESSION_OPENERS:
                params = e.msg.get("params") if isinstance(e.msg.get("params"), dict) else {}
                add(params.get("cwd"))
                for d in params.get("additionalDirectories") or []:
                    add(d)
    text = json.dumps([e.msg for e in transcript.entries])
    if WORKSPACE in text and WORKSPACE not in roots:
        roots.insert(0, WORKSPACE)
    return roots


def _map_roots(roots: list[str], tmp: Path) -> dict[str, str]:
    """Recorded root → its temporary copy: `ws`, `ws1`, … for the roots not inside another one (in order of first
    appearance), and the same place inside that copy for a root nested in another."""

    def parent(root: str) -> str | None:
        return next((r for r in roots if r != root and r != WORKSPACE and root.startswith(r.rstrip("/") + "/")), None)

    mapped: dict[str, str] = {}
    for root in roots:
        if parent(root) is None:
            mapped[root] = str(tmp / ("ws" if not mapped else f"ws{len(mapped)}"))
    for root in roots:
        top = root
        while (up := parent(top)) is not None:
            top = up
        if root != top:
            mapped[root] = mapped[top] + root[len(top.rstrip("/")) :]
    return {r: mapped[r] for r in roots}


def _placeholders(roots: list[str]) -> dict[str, str]:
    """Recorded root → placeholder: `<WORKSPACE>` for the first, `<WORKSPACE_1>`… for the others."""
    out: dict[str, str] = {}
    for n, root in enumerate(roots):
        out[root] = WORKSPACE if n == 0 else f"<WORKSPACE_{n}>"
    return out


def _prepare_workspace(transcript: Transcript, roots: dict[str, str], copy_from: str | None) -> None:
    for path in roots.values():
        os.makedirs(path, exist_ok=True)
    if not roots:
        return
    first = next(iter(roots.values()))
    if copy_from:
        shutil.copytree(copy_from, first, symlinks=True, dirs_exist_ok=True)
    for seg in transcript.segments:
        files = seg.meta.get("workspace_files") or {}
        if not isinstance(files, dict):
            raise TranscriptError("meta.workspace_files must map relative paths to file contents")
        for rel, content in files.items():
            norm = posixpath.normpath(rel) if isinstance(rel, str) else ""
            if (
                not norm
                or posixpath.isabs(norm)
                or norm == ".."
                or norm.startswith("../")
                or not isinstance(content, str)
            ):
                raise TranscriptError(f"meta.workspace_files: {rel!r} is not a relative path inside the workspace")
            target = Path(first) / norm
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content, encoding="utf-8")


def _agent_argv(seg: Segment, tmp: Path, n: int, model_override: str | None, live: _Live) -> list[str]:
    argv = [sys.executable, "-m", "acp_server"]
    mode = seg.meta.get("mode")
    if mode is not None:
        if mode not in MODES:
            raise TranscriptError(f"meta.mode {mode!r} is not one of {', '.join(MODES)}")
        argv += ["--mode", mode]
    if model_override:
        argv += ["--model", model_override]
    elif seg.meta.get("scripted_model") is not None:
        scripted_responses(seg.meta)  # a readable error for a bad script before the agent says it its way
        script = json.loads(seg.meta["scripted_model"])
        path = tmp / f"model-{n}.json"
        path.write_text(json.dumps(live.to_live(script), ensure_ascii=False), encoding="utf-8")
        argv += ["--model", f"scripted:{path}"]
    elif seg.meta.get("model"):
        raise CheckError(
            f"this recording was made with the model {seg.meta['model']!r} and carries no scripted "
            "model (meta.scripted_model); --check never calls a real model. Give one with "
            "--model scripted:FILE."
        )
    return argv


def _agent_env(tmp: Path, seg: Segment) -> dict[str, str]:
    env = dict(os.environ)
    for name in CLEARED_ENV:
        env.pop(name, None)
    # The agent checked is the code of this very `gatewright` (a source checkout too, not whatever is installed).
    here = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env["GATEWRIGHT_STATE_DIR"] = str(tmp / "state")
    config = tmp / "config.toml"
    config.write_text(_config_text(seg.meta.get("permissions")), encoding="utf-8")
    env["GATEWRIGHT_CONFIG"] = str(config)
    return env


def _config_text(permissions: Any) -> str:
    """The config file of the check: only the recording's `[permissions]` allow/deny rules (they change what is
    asked), never the models or providers of this machine."""
    if not permissions:
        return ""
    if (
        not isinstance(permissions, dict)
        or not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in permissions.values())
        or (set(permissions) - {"allow", "deny"})
    ):
        raise TranscriptError('meta.permissions must be {"allow": [...], "deny": [...]} lists of rules')
    lines = ["[permissions]"]
    for key in ("allow", "deny"):
        if permissions.get(key):
            lines.append(f"{key} = [{', '.join(json.dumps(x) for x in permissions[key])}]")
    return "\n".join(lines) + "\n"


def check(
    transcript: Transcript,
    *,
    workdir: str | Path | None = None,
    workspace: str | None = None,
    model: str | None = None,
    trust: bool = False,
    idle: float = DEFAULT_IDLE_S,
) -> CheckResult:
    """Re-drive `transcript` against a fresh `gatewright acp` and compare. Raises `CheckError` (cannot be checked as
    it is) or `TranscriptError` (not a valid transcript) before anything runs."""
    if model is not None and not model.startswith("scripted:"):
        raise CheckError("--check uses only a scripted model: --model scripted:FILE")
    started = time.monotonic()
    own_tmp = workdir is None
    tmp = Path(tempfile.mkdtemp(prefix="gatewright-replay-")) if workdir is None else Path(workdir)
    tmp = Path(os.path.realpath(tmp))
    try:
        roots = recorded_roots(transcript)
        live = _Live(_map_roots(roots, tmp), str(tmp / "state"))
        if not trust:
            risky = untrusted_actions(transcript, roots)
            if risky:
                raise CheckError(
                    "re-driving this transcript would act outside its temporary workspace:\n"
                    + "\n".join(f"  - {r}" for r in risky)
                    + "\nRead the transcript; if you trust it, run again with --trust."
                )
        _prepare_workspace(transcript, live.roots, workspace)
        expected_frames: list[tuple[Any, int]] = []
        actual_frames: list[tuple[Any, int]] = []
        all_frames: list[dict[str, Any]] = []
        requests: dict[str, str] = {}
        stderr: list[str] = []
        stalled: str | None = None
        for n, seg in enumerate(transcript.segments):
            argv = _agent_argv(seg, tmp, n, model, live)
            cwd = next(iter(live.roots.values()), str(tmp))
            os.makedirs(cwd, exist_ok=True)
            agent = _Agent(argv, cwd, _agent_env(tmp, seg))
            try:
                base, stall = _drive(seg, agent, live, idle, requests)
                code = agent.close()
            finally:
                agent.kill()
            if code not in (0, None) and stall is None:
                stall = f"the agent exited with code {code}"
            stalled = stalled or stall
            stderr.append(agent.stderr)
            all_frames.extend(agent.frames)
            keep = _run_host_keeps if seg.terminal_host else _keeps
            expected_frames += [(e.msg, e.line) for e in seg.entries if e.dir == "out"]
            actual_frames += [(_as_run(f) if seg.terminal_host else f, 0) for f in agent.frames[base:] if keep(f)]
            if len(transcript.segments) > 1:  # the boundary is part of what must match
                marker = {"<recording>": n}
                expected_frames.append((marker, seg.entries[-1].line if seg.entries else seg.line))
                actual_frames.append((marker, 0))
        secret_registry.register_environment()
        # The recording was redacted when written; the live frames get the same treatment before comparing.
        actual_frames = [(redact(f), line) for f, line in actual_frames]
        recorded_paths = {
            **_placeholders(roots),
            **{s.meta["state_dir"]: STATE for s in transcript.segments if isinstance(s.meta.get("state_dir"), str)},
        }
        live_paths = {**{live.roots[r]: ph for r, ph in _placeholders(roots).items()}, live.state_dir: STATE}
        expected = normalise(expected_frames, recorded_paths)
        actual = normalise(actual_frames, live_paths)
        methods = {**requests, **_recorded_requests(transcript)}
        return CheckResult(
            transcript,
            expected,
            actual,
            all_frames,
            requests,
            "".join(stderr),
            compare(expected, actual, methods, stalled),
            stalled,
            time.monotonic() - started,
        )
    finally:
        if own_tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _keeps(frame: dict[str, Any]) -> bool:
    return True


def _run_host_keeps(frame: dict[str, Any]) -> bool:
    return update_kind(frame) not in RUN_HOST_OMITS


def _as_run(frame: dict[str, Any]) -> dict[str, Any]:
    """A frame of the session that checks a `run` recording, in the run host's words: a question the recording
    answered "cannot ask" was one `run` had no terminal for, not one an editor could not show."""
    for editor, run in (
        (EDITOR_COULD_NOT_ASK, NO_TERMINAL_TO_ASK),
        (_capital(EDITOR_COULD_NOT_ASK), _capital(NO_TERMINAL_TO_ASK)),
    ):
        frame = substitute(frame, editor, run)
    return frame


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _counted(frame: Any) -> bool:
    return not is_chunk(frame) and not is_optional(frame)


def _recorded_requests(transcript: Transcript) -> dict[str, str]:
    return {id_key(e.msg["id"]): e.msg["method"] for e in transcript.entries if e.dir == "in" and is_request(e.msg)}


class _Tally:
    """What the agent has written since `base`, counted incrementally (frames only ever get appended): the frames
    that pace the replay, and its requests by method."""

    def __init__(self, base: int, keep: Any) -> None:
        self.base, self.keep = base, keep
        self.seen = base
        self.paced = 0
        self.requests: dict[str, list[dict[str, Any]]] = {}

    def update(self, frames: list[dict[str, Any]]) -> None:
        for f in frames[self.seen :]:
            if _counted(f) and self.keep(f):
                self.paced += 1
            if is_request(f):
                self.requests.setdefault(f["method"], []).append(f)
        self.seen = len(frames)

    def at_least(self, count: int) -> Any:
        def done(frames: list[dict[str, Any]]) -> bool:
            self.update(frames)
            return self.paced >= count

        return done

    def asked(self, method: str, n: int) -> Any:
        def done(frames: list[dict[str, Any]]) -> bool:
            self.update(frames)
            return len(self.requests.get(method, ())) > n

        return done


def _drive(seg: Segment, agent: _Agent, live: _Live, idle: float, requests: dict[str, str]) -> tuple[int, str | None]:
    """Play the segment's client side. Returns where the compared frames start and why driving stopped early."""
    recorded_out = [e.msg for e in seg.entries if e.dir == "out"]
    agent_methods = {id_key(m["id"]): m["method"] for m in recorded_out if is_request(m)}
    keep = _run_host_keeps if seg.terminal_host else _keeps
    base = 0
    if seg.terminal_host:
        base, stall = _open_run_session(seg, agent, live, idle)
        if stall:
            return base, stall
    live.recorded_sessions += _session_ids(recorded_out)
    known_live = len(live.live_sessions)
    tally = _Tally(base, keep)
    answered: dict[str, int] = {}
    count = 0
    for e in seg.entries:
        if e.dir == "out":
            count += _counted(e.msg)
            continue
        if not agent.wait(tally.at_least(count), idle):
            return base, _stall_reason(agent, idle, f"before sending line {e.line}")
        live.live_sessions[known_live:] = _session_ids(agent.frames[base:])
        if e.msg is None:
            agent.send_raw(*_raw_line(e.raw or ""))
            continue
        msg = live.to_live(e.msg)
        if is_response(msg):
            method = agent_methods.get(id_key(msg["id"]))
            if method is not None:
                n = answered.get(method, 0)
                answered[method] = n + 1
                if not agent.wait(tally.asked(method, n), idle):
                    return base, _stall_reason(
                        agent, idle, f"for the agent's request #{n + 1} of {method}, which line {e.line} answers"
                    )
                msg = {**msg, "id": tally.requests[method][n]["id"]}
        elif is_request(msg):
            requests[id_key(msg["id"])] = msg["method"]
        agent.send(msg)
    if not agent.wait(tally.at_least(count), idle):
        return base, _stall_reason(agent, idle, "for the rest of the recorded frames")
    agent.settle(SETTLE_S)
    return base, None


def _open_run_session(seg: Segment, agent: _Agent, live: _Live, idle: float) -> tuple[int, str | None]:
    """A `gatewright run` recording has no handshake: open the session an editor would have, and map the run host's
    session id to it."""
    cwd = live.to_live(seg.meta.get("cwd")) if isinstance(seg.meta.get("cwd"), str) else None
    cwd = cwd or next(iter(live.roots.values()), None) or os.getcwd()
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": "replay-init",
            "method": "initialize",
            "params": {
                "protocolVersion": 1,
                "clientCapabilities": {},
                "clientInfo": {"name": "gatewright-replay", "version": "1"},
            },
        }
    )
    agent.send(
        {"jsonrpc": "2.0", "id": "replay-new", "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}
    )

    def opened(frames: list[dict[str, Any]]) -> bool:
        return any(f.get("id") == "replay-new" and "method" not in f for f in frames)

    if not agent.wait(opened, idle):
        return len(agent.frames), _stall_reason(agent, idle, "for the session the run host would have had")
    at = next(i for i, f in enumerate(agent.frames) if f.get("id") == "replay-new" and "method" not in f)
    answer = agent.frames[at]
    if not isinstance(answer.get("result"), dict):
        return at + 1, f"the agent did not open a session: {json.dumps(answer)[:300]}"
    recorded = next(
        (
            e.msg["params"].get("sessionId")
            for e in seg.entries
            if e.dir == "in"
            and isinstance(e.msg, dict)
            and isinstance(e.msg.get("params"), dict)
            and e.msg["params"].get("sessionId")
        ),
        None,
    )
    if isinstance(recorded, str):
        live.recorded_sessions.append(recorded)
        live.live_sessions.append(answer["result"]["sessionId"])
    return at + 1, None


def _session_ids(frames: list[dict[str, Any]]) -> list[str]:
    """Session ids in the order the agent created them (answers carrying a `sessionId`: new, fork)."""
    return [
        f["result"]["sessionId"]
        for f in frames
        if is_response(f) and isinstance(f.get("result"), dict) and isinstance(f["result"].get("sessionId"), str)
    ]


def _raw_line(raw: str) -> tuple[bytes, int]:
    """The bytes of a recorded input line that was not JSON. An oversized line is recorded by its size only
    (`<N bytes dropped>`): a line of that size is sent again."""
    m = re.fullmatch(r"<(\d+) bytes dropped>", raw)
    if m:
        size = int(m.group(1))
        return b"x" * (1 << 20), max(1, -(-size // (1 << 20)))
    return raw.encode("utf-8"), 1


def _stall_reason(agent: _Agent, idle: float, what: str) -> str:
    code = agent.proc.poll()
    if code is not None:
        return f"the agent exited (code {code}) while the check waited {what}"
    if agent.eof:
        return f"the agent closed its output while the check waited {what}"
    return f"the agent wrote nothing for {idle:g} s while the check waited {what}"


# ---- comparing ----------------------------------------------------------------------------------------------------
def compare(
    expected: list[Normalised],
    actual: list[Normalised],
    methods: dict[str, str] | None = None,
    stalled: str | None = None,
) -> Divergence | None:
    """The first frame where the two sides differ, explained; None when they are the same."""
    methods = methods or {}
    for i in range(max(len(expected), len(actual))):
        e = expected[i].msg if i < len(expected) else None
        a = actual[i].msg if i < len(actual) else None
        if e == a:
            continue
        line = expected[i].line if i < len(expected) else 0
        where = f"frame {i + 1} of {len(expected)}" + (f" (line {line})" if line else "")
        if a is None:
            summary = f"{where}: the agent did not send {describe(e, methods)}"
            detail = _show("recorded", e)
        elif e is None:
            summary = f"frame {i + 1}: the agent sent {describe(a, methods)}, after the last recorded frame"
            detail = _show("agent now", a)
        elif i + 1 < len(actual) and actual[i + 1].msg == e:
            summary = f"{where}: the agent sent {describe(a, methods)}, which the recording does not have here"
            detail = _show("agent now", a) + "\nthen the recorded frame:\n" + _show("recorded", e)
        elif i + 1 < len(expected) and expected[i + 1].msg == a:
            summary = f"{where}: the agent did not send {describe(e, methods)}"
            detail = _show("recorded", e) + "\nand went on with the next recorded frame."
        else:
            path, ev, av = _first_difference(e, a)
            summary = f"{where}: {describe(e, methods)} differs at {path or 'the top level'}"
            detail = _value_diff(ev, av) + "\n" + _json_diff(e, a)
        if stalled:
            detail += f"\nnote: {stalled}"
        return Divergence(i, line, summary, detail)
    return None


def _show(label: str, msg: Any) -> str:
    text = json.dumps(msg, indent=2, ensure_ascii=False, sort_keys=True)
    lines = text.splitlines()
    if len(lines) > 30:
        lines = [*lines[:30], f"  … ({len(lines) - 30} more lines)"]
    return f"{label}:\n" + "\n".join("  " + ln for ln in lines)


def _first_difference(e: Any, a: Any, path: str = "") -> tuple[str, Any, Any]:
    if isinstance(e, dict) and isinstance(a, dict):
        for k in list(e) + [k for k in a if k not in e]:
            if e.get(k, _MISSING) != a.get(k, _MISSING):
                return _first_difference(e.get(k, _MISSING), a.get(k, _MISSING), f"{path}.{k}" if path else k)
    if isinstance(e, list) and isinstance(a, list):
        for i in range(max(len(e), len(a))):
            ev = e[i] if i < len(e) else _MISSING
            av = a[i] if i < len(a) else _MISSING
            if ev != av:
                return _first_difference(ev, av, f"{path}[{i}]")
    return path, e, a


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


_MISSING = _Missing()


def _value_diff(ev: Any, av: Any) -> str:
    def show(v: Any) -> str:
        return repr(v) if isinstance(v, _Missing) else json.dumps(v, ensure_ascii=False)

    if isinstance(ev, str) and isinstance(av, str) and ("\n" in ev or "\n" in av or len(ev) + len(av) > 120):
        lines = difflib.unified_diff(ev.splitlines(), av.splitlines(), "recorded", "agent now", lineterm="", n=2)
        return "\n".join("  " + ln for ln in lines)
    return f"  recorded:  {show(ev)[:600]}\n  agent now: {show(av)[:600]}"


def _json_diff(e: Any, a: Any) -> str:
    el = json.dumps(e, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    al = json.dumps(a, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    lines = list(difflib.unified_diff(el, al, "recorded", "agent now", lineterm="", n=3))
    if len(lines) > 60:
        lines = [*lines[:60], f"… ({len(lines) - 60} more diff lines)"]
    return "whole frame:\n" + "\n".join("  " + ln for ln in lines)


# ---- the command --------------------------------------------------------------------------------------------------
def run_check(
    path: str,
    *,
    workspace: str | None = None,
    model: str | None = None,
    trust: bool = False,
    idle: float = DEFAULT_IDLE_S,
    out: Any = None,
    err: Any = None,
) -> int:
    """`gatewright replay --check FILE`: 0 when the agent answers as recorded, 1 at the first divergence, 2 when the
    file is not a transcript or cannot be checked."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        transcript = load(path)
        if workspace is not None and not os.path.isdir(workspace):
            raise CheckError(f"--workspace {workspace} is not a directory")
        result = check(transcript, workspace=workspace, model=model, trust=trust, idle=idle)
    except (TranscriptError, CheckError) as exc:
        err.write(f"gatewright replay: {exc}\n")
        return 2
    name = path if path != "-" else "(stdin)"
    if result.divergence is None:
        prompts = sum(
            1 for e in transcript.entries if e.dir == "in" and is_request(e.msg) and e.msg["method"] == "session/prompt"
        )
        out.write(
            f"{name}: no divergence: {len(result.expected)} frames match ({prompts} prompt"
            f"{'' if prompts == 1 else 's'}, {len(transcript.segments)} recording"
            f"{'' if len(transcript.segments) == 1 else 's'}) in {result.seconds:.1f} s\n"
        )
        return 0
    d = result.divergence
    out.write(f"{name}: diverged at {d.summary}\n")
    if d.index > 0:
        last = describe(result.expected[d.index - 1].msg, {**result.requests, **_recorded_requests(transcript)})
        out.write(f"  (frames 1–{d.index} matched; the last: {last})\n")
    out.write(d.detail.rstrip("\n") + "\n")
    if workspace is None and not any(seg.meta.get("workspace_files") for seg in transcript.segments):
        out.write(
            "note: the check started from an empty workspace (the transcript carries no files); if the "
            "recording read or changed files, give a copy of them with --workspace DIR\n"
        )
    lacks: dict[str, Any] = {}
    for seg in transcript.segments:
        missing = seg.meta.get("workspace_files_missing")
        lacks.update(missing if isinstance(missing, dict) else {})
    if lacks and workspace is None:
        listed = "; ".join(f"{path} ({why})" for path, why in list(lacks.items())[:10])
        out.write(f"note: the transcript does not carry {len(lacks)} file(s) the recording used: {listed}\n")
    tail = [ln for ln in result.stderr.splitlines() if ln.strip()][-15:]
    if tail:
        out.write("agent stderr (last lines):\n" + "\n".join("  " + ln for ln in tail) + "\n")
    return 1
