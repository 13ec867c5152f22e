"""Recorded transcripts as data (docs/transcripts.md): reading a `--record` file, normalising volatile values
for comparison, and naming a frame in one line. Used by `gatewright replay` (rendering and `--check`) and by the
test suite's replays; there is one implementation of the format and of its normalisation, here.

A file may hold several recordings one after another (`--record` appends): each `meta` line starts a new segment,
the run of one agent process. Frames before any `meta` line form a segment with empty meta.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
WORKSPACE = "<WORKSPACE>"
STATE = "<STATE>"
RUN_HOST = "run"  # `meta.host` of a `gatewright run --record` transcript: no initialize or session/new in it
# The terminal hosts (`run`, `chat`) record what an editor would have exchanged after its session/new.
TERMINAL_HOSTS = frozenset({RUN_HOST, "chat"})

_TIME_KEYS = {"updatedAt", "createdAt", "timestamp"}
_DURATION_KEYS = {"durationMs", "elapsedMs", "duration_ms"}
_ISO_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_SESSION_IN_TEXT = re.compile(r"sess_[0-9a-f]{32}")


class TranscriptError(ValueError):
    """The file is not a transcript: the message names the line and what is wrong with it."""


@dataclass(slots=True)
class Entry:
    dir: str  # "in" (client → agent) or "out" (agent → client)
    msg: Any  # the frame; None for an input line that was not JSON (then `raw` holds it)
    t: float
    line: int  # 1-based line in the file
    raw: str | None = None


@dataclass(slots=True)
class Segment:
    meta: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    line: int = 0  # the meta line (0: no meta line)

    @property
    def host(self) -> str:
        return str(self.meta.get("host") or "acp")

    @property
    def terminal_host(self) -> bool:
        """Recorded by `run` or `chat`: no initialize or session/new in it."""
        return self.host in TERMINAL_HOSTS


@dataclass(slots=True)
class Transcript:
    source: str
    segments: list[Segment]

    @property
    def entries(self) -> list[Entry]:
        return [e for s in self.segments for e in s.entries]


def load(path: str | Path) -> Transcript:
    """Read a transcript file (`-`: stdin). Raises `TranscriptError` for anything that is not one."""
    source = str(path)
    try:
        text = sys.stdin.read() if source == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TranscriptError(f"{source}: cannot be read ({reason})") from None
    return parse(text, source)


def parse(text: str, source: str = "<transcript>") -> Transcript:
    segments: list[Segment] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise TranscriptError(f"{source}: line {n} is not JSON (is this a `--record` transcript?)") from None
        if not isinstance(obj, dict):
            raise TranscriptError(f"{source}: line {n} is not a JSON object")
        if "meta" in obj and "dir" not in obj:
            if not isinstance(obj["meta"], dict):
                raise TranscriptError(f"{source}: line {n}: `meta` must be an object")
            segments.append(Segment(obj["meta"], line=n))
            continue
        direction, t = obj.get("dir"), obj.get("t", 0.0)
        if direction not in ("in", "out"):
            raise TranscriptError(f'{source}: line {n}: `dir` must be "in" or "out"')
        if "msg" not in obj:
            raise TranscriptError(f"{source}: line {n} has no `msg`")
        if not isinstance(t, int | float) or isinstance(t, bool):
            raise TranscriptError(f"{source}: line {n}: `t` must be a number")
        raw = obj.get("raw")
        if obj["msg"] is None and not (direction == "in" and isinstance(raw, str)):
            raise TranscriptError(f"{source}: line {n}: a null `msg` needs the `raw` input line")
        if direction == "out" and not isinstance(obj["msg"], dict):
            raise TranscriptError(f"{source}: line {n}: an agent frame must be a JSON object")
        if not segments:
            segments.append(Segment({}))
        segments[-1].entries.append(Entry(direction, obj["msg"], float(t), n, raw if isinstance(raw, str) else None))
    if not segments or not any(s.entries for s in segments):
        raise TranscriptError(f"{source}: no recorded frames")
    return Transcript(source, segments)


# ---- kinds of frames ----------------------------------------------------------------------------------------------
def update_kind(msg: Any) -> str | None:
    if isinstance(msg, dict) and msg.get("method") == "session/update":
        params = msg.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if isinstance(update, dict):
            kind = update.get("sessionUpdate")
            return kind if isinstance(kind, str) else None
    return None


def is_chunk(msg: Any) -> bool:
    return update_kind(msg) in CHUNKS


def is_optional(msg: Any) -> bool:
    """The agent's `$/cancel_request` for its own pending request: optional in ACP, and whether it is sent races with
    the client's answer to that request (a `session/cancel` followed at once by the answer), so it is not compared."""
    return isinstance(msg, dict) and msg.get("method") == "$/cancel_request"


def is_request(msg: Any) -> bool:
    return isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg


def is_response(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" not in msg and "id" in msg and ("result" in msg or "error" in msg)


def id_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def describe(msg: Any, methods: dict[str, str] | None = None) -> str:
    """One line naming a frame: `session/update tool_call_update (completed)`, `answer to #2 session/prompt`."""
    if not isinstance(msg, dict):
        return "a line that is not a JSON object"
    kind = update_kind(msg)
    if kind is not None:
        update = msg["params"]["update"]
        status = update.get("status")
        return f"session/update {kind}" + (f" ({status})" if isinstance(status, str) else "")
    if is_request(msg):
        return f"request {msg['method']}"
    if isinstance(msg.get("method"), str):
        return f"notification {msg['method']}"
    if "id" in msg:
        what = (methods or {}).get(id_key(msg["id"]))
        target = f"#{msg['id']}" + (f" {what}" if what else "") if msg["id"] is not None else "a bad request"
        return ("error answer to " if "error" in msg else "answer to ") + target
    return "an unrecognised frame"


# ---- normalisation ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Normalised:
    msg: Any
    line: int  # where the frame (the first of joined chunks) is in the file; 0 for frames of a live run
    index: int  # its position among the raw frames


class Normaliser:
    """Replaces volatile values by placeholders, consistently across one side of a comparison: the n-th distinct
    session id becomes `<SESSION_n>` wherever it appears, likewise tool call, terminal, message, compaction and agent
    request ids.

    `paths` maps absolute paths (workspaces, the state dir) to their placeholders; longer paths are replaced first.
    """

    def __init__(self, paths: dict[str, str]) -> None:
        self.paths = sorted(((p, ph) for p, ph in paths.items() if p), key=lambda x: -len(x[0]))
        self._names: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}

    def name(self, kind: str, value: Any) -> str:
        key = (kind, id_key(value))
        if key not in self._names:
            n = self._counts.get(kind, 0)
            self._counts[kind] = n + 1
            self._names[key] = f"<{kind}_{n}>"
        return self._names[key]

    def text(self, v: str) -> str:
        for path, placeholder in self.paths:
            v = replace_path(v, path, placeholder)
        v = re.sub(r"incident [0-9a-f]+", "incident <ID>", v)
        v = _ISO_TIME.sub("<TIME>", v)
        v = re.sub(r"\bpid \d+", "pid <PID>", v)
        return _SESSION_IN_TEXT.sub(lambda m: self.name("SESSION", m.group(0)), v)

    def value(self, v: Any, key: str | None = None) -> Any:
        if isinstance(v, dict):
            return {k: self.value(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if key in _TIME_KEYS and v is not None:
            return "<TIME>"
        if key in _DURATION_KEYS and isinstance(v, int | float):
            return "<DURATION>"
        if key == "pid" and isinstance(v, int):
            return "<PID>"
        if key == "nextCursor" and isinstance(v, str):
            return "<CURSOR>"
        if isinstance(v, str):
            if key == "sessionId":
                return self.name("SESSION", v)
            if key == "toolCallId":
                return self.name("TOOL", v)
            if key == "terminalId":
                return self.name("TERMINAL", v)
            if key == "messageId":
                return self.name("MESSAGE", v)
            if key == "compactionId":
                return self.name("COMPACTION", v)
            if key == "version":
                return "<VERSION>"
            return self.text(v)
        return v

    def frame(self, msg: Any) -> Any:
        if is_request(msg):  # an agent request: its id is volatile
            msg = {**msg, "id": self.name("REQ", msg["id"])}
            params = msg.get("params")
            if msg["method"] == "terminal/create" and isinstance(params, dict) and "env" in params:
                # The agent's own environment, handed on to the editor's terminal: this machine's, not the code's.
                msg["params"] = params = {**params, "env": "<ENVIRONMENT>"}
            if msg["method"] == "terminal/create" and isinstance(params, dict) and isinstance(params.get("args"), list):
                # The sandbox launcher's spec (`python -m runtime.sandbox --spec JSON -- …`) names this run's agent
                # pid, temp dir and the system's sandbox: this machine's, not the code's.
                args = list(params["args"])
                for i in range(len(args) - 1):
                    if args[i] == "--spec" and isinstance(args[i + 1], str):
                        args[i + 1] = "<SANDBOX>"
                msg["params"] = {**params, "args": args}
        return self.value(msg)


def normalise(
    frames: list[tuple[Any, int]], paths: dict[str, str], normaliser: Normaliser | None = None
) -> list[Normalised]:
    """The agent's frames `(msg, line)` ready to compare: placeholders for volatile values, optional frames dropped,
    consecutive text chunks of the same kind, session and message joined into one."""
    norm = normaliser or Normaliser(paths)
    out: list[Normalised] = []
    for index, (msg, line) in enumerate(frames):
        if is_optional(msg):
            continue
        f = norm.frame(msg)
        if is_chunk(f) and out and is_chunk(out[-1].msg):
            prev, cur = out[-1].msg["params"], f["params"]
            if (
                prev.get("sessionId") == cur.get("sessionId")
                and prev["update"]["sessionUpdate"] == cur["update"]["sessionUpdate"]
                and prev["update"].get("messageId") == cur["update"].get("messageId")
                and _chunk_text(prev) is not None
                and _chunk_text(cur) is not None
            ):
                prev["update"]["content"]["text"] += cur["update"]["content"]["text"]
                continue
        out.append(Normalised(f, line, index))
    return out


def _chunk_text(params: dict[str, Any]) -> str | None:
    content = params["update"].get("content")
    if isinstance(content, dict) and content.get("type") == "text" and isinstance(text := content.get("text"), str):
        return text
    return None


def substitute(value: Any, old: str, new: str) -> Any:
    """`value` with every occurrence of `old` in its strings (keys too) replaced by `new`."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [substitute(v, old, new) for v in value]
    if isinstance(value, dict):
        return {substitute(k, old, new): substitute(v, old, new) for k, v in value.items()}
    return value


def replace_path(text: str, path: str, new: str) -> str:
    """`text` with the path `path` replaced by `new` where it is a whole path or a prefix of one (`/w` in `/w/a`,
    never in `/wx`)."""
    if path not in text:
        return text
    return re.sub(re.escape(path) + r"(?![\w.-])", lambda m: new, text)


def substitute_path(value: Any, path: str, new: str) -> Any:
    """`replace_path` in every string of a frame (keys too)."""
    if isinstance(value, str):
        return replace_path(value, path, new)
    if isinstance(value, list):
        return [substitute_path(v, path, new) for v in value]
    if isinstance(value, dict):
        return {substitute_path(k, path, new): substitute_path(v, path, new) for k, v in value.items()}
    return value
