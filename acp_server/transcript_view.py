"""`gatewright replay FILE`: a recorded transcript shown the way a person reads a conversation, not as JSON.

Prompts, replies and thoughts (streamed chunks joined), tool calls with their status, output and diffs, permission
questions with their options and the answer chosen, the agent's requests to the editor (`fs/*`, `terminal/*`) with
the editor's answers, and errors. Plain text when stdout is not a terminal; colour when it is and `rich` is
installed (without it, plain text everywhere).

The view is built as a list of `Line`s (text plus a style name) by `render`, so it is testable without a terminal;
`run_render` prints them.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from acp_server.transcript import (
    CHUNKS,
    Entry,
    Segment,
    Transcript,
    TranscriptError,
    id_key,
    is_request,
    is_response,
    load,
    update_kind,
)
from runtime import lazy  # rich: only to print in colour

PREVIEW_LINES = 12  # of tool output, file contents and terminal output, unless --full
STYLES = {
    "header": "bold",
    "meta": "dim",
    "client": "bold cyan",
    "prompt": "bold",
    "agent": "",
    "thought": "dim italic",
    "tool": "yellow",
    "ok": "green",
    "failed": "red",
    "output": "dim",
    "added": "green",
    "removed": "red",
    "hunk": "cyan",
    "question": "bold magenta",
    "answer": "magenta",
    "editor": "blue",
    "error": "bold red",
    "info": "dim",
    "user": "cyan",
}
STATUS_MARK = {"pending": "…", "in_progress": "▸", "completed": "✓", "failed": "✗"}


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    style: str = ""
    markdown: bool = False  # an agent reply: rendered as Markdown when colour is on


class _View:
    def __init__(self, transcript: Transcript, full: bool) -> None:
        self.transcript = transcript
        self.full = full
        self.lines: list[Line] = []
        self.requests: dict[str, Entry] = {}  # the client's requests by id (to name their answers)
        self.agent_requests: dict[str, dict[str, Any]] = {}  # the agent's requests by id (for their answers)
        self.titles: dict[str, str] = {}  # tool call id → title
        self.sessions: dict[str, str] = {}  # session id → short label
        self.multi_session = len({sid for e in transcript.entries for sid in _session_ids_in(e.msg)}) > 1
        self._chunk: tuple[str, str] | None = None  # (session, kind) of the text being joined
        self._text: list[str] = []

    # ---- output --------------------------------------------------------------------------------------------------
    def say(self, text: str, style: str = "", indent: int = 0, markdown: bool = False) -> None:
        self.flush()
        if not text and (not self.lines or not self.lines[-1].text):
            return  # one blank line between parts is enough
        pad = " " * indent
        for ln in text.splitlines() or [""]:
            self.lines.append(Line(pad + ln, style, markdown))

    def block(self, text: str, style: str, indent: int, prefix: str = "│ ") -> None:
        lines = text.rstrip("\n").splitlines()
        if not self.full and len(lines) > PREVIEW_LINES:
            hidden = len(lines) - PREVIEW_LINES
            lines = [*lines[:PREVIEW_LINES], f"… ({hidden} more line{'s' if hidden != 1 else ''}; --full shows all)"]
        for ln in lines:
            self.say(prefix + ln, style, indent)

    def flush(self) -> None:
        if self._chunk is None:
            return
        (sid, kind), text = self._chunk, "".join(self._text)
        self._chunk, self._text = None, []
        glyph, style = {"agent_thought_chunk": ("💭 ", "thought"), "user_message_chunk": ("👤 ", "user")}.get(
            kind, ("🤖 ", "agent")
        )
        body = text.strip("\n")
        if not body:
            return
        tag = self.tag(sid)
        first, *rest = body.splitlines() or [""]
        self.lines.append(Line(f"  {tag}{glyph}{first}", style, kind == "agent_message_chunk"))
        for ln in rest:
            self.lines.append(Line(f"     {' ' * len(tag)}{ln}".rstrip(), style, kind == "agent_message_chunk"))

    def tag(self, sid: Any) -> str:
        if not self.multi_session or not isinstance(sid, str):
            return ""
        if sid not in self.sessions:
            self.sessions[sid] = f"S{len(self.sessions) + 1}"
        return f"[{self.sessions[sid]}] "

    # ---- the transcript ------------------------------------------------------------------------------------------
    def render(self) -> list[Line]:
        segs = self.transcript.segments
        self.say(f"Transcript {self.transcript.source}", "header")
        for n, seg in enumerate(segs):
            if len(segs) > 1:
                self.say("")
                self.say(f"── recording {n + 1} of {len(segs)} " + "─" * 40, "header")
            self.meta(seg)
            for e in seg.entries:
                self.entry(e, seg)
        self.flush()
        return self.lines

    def meta(self, seg: Segment) -> None:
        m = seg.meta
        facts = []
        if m.get("gatewright"):
            facts.append(f"gatewright {m['gatewright']}")
        if seg.terminal_host:
            facts.append(f"`gatewright {seg.host}`" + (f" in {m['cwd']}" if m.get("cwd") else ""))
        model = m.get("model")
        if m.get("scripted_model") is not None:
            n = _count_responses(m["scripted_model"])
            facts.append(f"scripted model ({n} response{'' if n == '1' else 's'}, in the file)")
        elif model:
            facts.append(f"model {model}")
        if m.get("mode"):
            facts.append(f"mode {m['mode']}")
        client = m.get("client")
        if isinstance(client, dict) and client.get("name"):
            facts.append(f"client {client.get('name')} {client.get('version') or ''}".rstrip())
        if facts:
            self.say("  " + " · ".join(facts), "meta")
        self.say("")

    def entry(self, e: Entry, seg: Segment) -> None:
        msg = e.msg
        if e.dir == "in":
            if msg is None:
                self.say(f"→ (not JSON) {(e.raw or '')[:200]}", "error")
            elif is_request(msg):
                self.requests[id_key(msg["id"])] = e
                self.client_request(msg)
            elif is_response(msg):
                self.client_answer(msg)
            elif isinstance(msg, dict) and isinstance(msg.get("method"), str):
                self.client_notification(msg)
            else:
                self.say(f"→ (not a JSON-RPC frame) {_compact(msg)}", "error")
            return
        kind = update_kind(msg)
        if kind is not None:
            self.update(msg["params"], kind)
        elif is_request(msg):
            self.agent_requests[id_key(msg["id"])] = msg
            self.agent_request(msg)
        elif is_response(msg):
            self.agent_answer(msg, e)
        elif isinstance(msg.get("method"), str):
            self.say(f"← {msg['method']} {_compact(msg.get('params'))}", "info", 2)
        else:
            self.say(f"← {_compact(msg)}", "info")

    # ---- client → agent ------------------------------------------------------------------------------------------
    def client_request(self, msg: dict[str, Any]) -> None:
        method, p = msg["method"], _obj(msg.get("params"))
        tag = self.tag(p.get("sessionId"))
        if method == "initialize":
            info = _obj(p.get("clientInfo"))
            who = f", client {info.get('name')} {info.get('version') or ''}".rstrip() if info.get("name") else ""
            caps = _capabilities(p.get("clientCapabilities"))
            self.say(f"→ initialize (protocol {p.get('protocolVersion')}{who}{caps})", "client")
        elif method in ("session/new", "session/load", "session/resume", "session/fork"):
            servers = [s.get("name", "?") for s in p.get("mcpServers") or [] if isinstance(s, dict)]
            extra = f", MCP servers: {', '.join(servers)}" if servers else ""
            which = f" {p['sessionId']}" if method != "session/new" and p.get("sessionId") else ""
            self.say(f"→ {tag}{method}{which} in {p.get('cwd')}{extra}", "client")
        elif method == "session/prompt":
            self.say("")
            self.say(f"→ {tag}prompt: {_prompt_text(p.get('prompt'))}", "prompt")
        elif method == "session/set_mode":
            self.say(f"→ {tag}set mode: {p.get('modeId')}", "client")
        elif method == "session/set_config_option":
            self.say(f"→ {tag}set {p.get('configId')} = {p.get('value')}", "client")
        elif method == "session/set_model":
            self.say(f"→ {tag}set model: {p.get('modelId')}", "client")
        elif method == "authenticate":
            self.say(f"→ authenticate with {p.get('methodId')}", "client")
        else:
            params = {k: v for k, v in p.items() if k != "sessionId"}
            self.say(f"→ {tag}{method} {_compact(params) if params else ''}".rstrip(), "client")

    def client_notification(self, msg: dict[str, Any]) -> None:
        p = _obj(msg.get("params"))
        if msg["method"] == "session/cancel":
            self.say(f"→ {self.tag(p.get('sessionId'))}cancel", "client")
        else:
            self.say(f"→ {msg['method']} {_compact(p)}".rstrip(), "client")

    def client_answer(self, msg: dict[str, Any]) -> None:
        """The editor's answer to one of the agent's requests."""
        request = self.agent_requests.get(id_key(msg["id"]))
        method = request["method"] if request else None
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            said = f"the editor answered with an error: {err.get('message')} ({err.get('code')})"
            if method == "session/request_permission":  # nobody was asked: nothing was approved or rejected
                said = f"not asked ({said}): the call was not run"
            self.say(f"└ {said}", "error", 4)
            return
        result = _obj(msg.get("result"))
        if method == "session/request_permission":
            outcome = _obj(result.get("outcome"))
            if outcome.get("outcome") == "cancelled":
                self.say("└ answer: cancelled (the turn is being cancelled)", "answer", 4)
                return
            oid = outcome.get("optionId")
            options = (request or {}).get("params", {}).get("options") or []
            name = next((o.get("name") for o in options if isinstance(o, dict) and o.get("optionId") == oid), None)
            self.say(f"└ answer: {name or oid}" + (f"  ({oid})" if name and name != oid else ""), "answer", 4)
        elif method == "fs/read_text_file":
            content = result.get("content")
            if isinstance(content, str):
                n = len(content.splitlines())
                self.say(f"└ the editor gave {n} line{'s' if n != 1 else ''}", "editor", 4)
                self.block(content, "output", 6)
            else:
                self.say(f"└ {_compact(result)}", "editor", 4)
        elif method == "terminal/create":
            self.say(f"└ terminal {result.get('terminalId')}", "editor", 4)
        elif method == "terminal/output":
            output = result.get("output")
            status = _exit_status(result.get("exitStatus"))
            self.say(
                "└ output" + (f" ({status})" if status else "") + (" (truncated)" if result.get("truncated") else ""),
                "editor",
                4,
            )
            if isinstance(output, str) and output:
                self.block(output, "output", 6)
        elif method == "terminal/wait_for_exit":
            self.say(f"└ {_exit_status(result) or 'exited'}", "editor", 4)
        elif method is not None and not result:
            self.say("└ done", "editor", 4)
        else:
            self.say(f"└ {_compact(result)}", "editor", 4)

    # ---- agent → client ------------------------------------------------------------------------------------------
    def agent_answer(self, msg: dict[str, Any], e: Entry) -> None:
        request = self.requests.get(id_key(msg["id"]))
        method = request.msg["method"] if request else None
        elapsed = f" ({e.t - request.t:.2f} s)" if request and e.t >= request.t else ""
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            what = f"{method} failed" if method else "error"
            data = err.get("data")
            extra = f" ({_compact(data)})" if data not in (None, {}, "") else ""
            self.say(f"✗ {what}: {err.get('message')} [{err.get('code')}]{extra}", "error")
            return
        result = _obj(msg.get("result"))
        if method == "initialize":
            info = _obj(result.get("agentInfo"))
            self.say(
                f"← {info.get('name', 'agent')} {info.get('version', '')}, protocol {result.get('protocolVersion')}",
                "info",
            )
        elif method in ("session/new", "session/fork") or (method and "sessionId" in result):
            modes = _obj(result.get("modes"))
            mode = f" (mode {modes['currentModeId']})" if modes.get("currentModeId") else ""
            self.say(f"← session {result.get('sessionId')}{mode}", "info")
        elif method == "session/prompt":
            self.flush()
            self.say(f"← {result.get('stopReason')}{elapsed}", "header")
        elif method == "session/list":
            sessions = result.get("sessions") or []
            self.say(f"← {len(sessions)} session{'s' if len(sessions) != 1 else ''}", "info")
            for s in sessions if isinstance(sessions, list) else []:
                if isinstance(s, dict):
                    self.say(f"{s.get('sessionId')}  {s.get('title') or ''}  {s.get('cwd') or ''}".rstrip(), "info", 4)
        elif not result:
            self.say("← ok", "info")
        elif isinstance(result.get("configOptions"), list):
            values = [f"{o.get('id')}={o.get('currentValue')}" for o in result["configOptions"] if isinstance(o, dict)]
            self.say(f"← ok ({', '.join(values)})", "info")
        else:
            self.say(f"← {_compact(result)}", "info")

    def agent_request(self, msg: dict[str, Any]) -> None:
        method, p = msg["method"], _obj(msg.get("params"))
        tag = self.tag(p.get("sessionId"))
        if method == "session/request_permission":
            tc = _obj(p.get("toolCall"))
            title = tc.get("title") or self.titles.get(_str(tc.get("toolCallId")), "a tool call")
            self.say(f"┌ {tag}permission asked: {title} ({tc.get('kind', 'other')})", "question", 4)
            self.tool_content(tc.get("content"), tc.get("rawInput"), 6, show_input=True)
            options = [o for o in p.get("options") or [] if isinstance(o, dict)]
            self.say("│ options:", "question", 4)
            for o in options:
                self.say(f"│   [{o.get('name')}]", "question", 4)
        elif method == "fs/read_text_file":
            where = f" from line {p['line']}" if p.get("line") else ""
            limit = f", {p['limit']} lines" if p.get("limit") else ""
            self.say(f"⇄ {tag}the agent asks the editor to read {p.get('path')}{where}{limit}", "editor", 4)
        elif method == "fs/write_text_file":
            content = _str(p.get("content"))
            n = len(content.splitlines())
            self.say(
                f"⇄ {tag}the agent asks the editor to write {p.get('path')} ({n} line{'s' if n != 1 else ''})",
                "editor",
                4,
            )
            self.block(content, "output", 6)
        elif method == "terminal/create":
            cmd = " ".join([str(p.get("command", ""))] + [_shell_word(a) for a in p.get("args") or []])
            self.say(f"⇄ {tag}the agent asks the editor for a terminal: $ {cmd}", "editor", 4)
            if p.get("cwd"):
                self.say(f"  in {p['cwd']}", "editor", 4)
        elif method.startswith("terminal/"):
            self.say(f"⇄ {tag}{method} {p.get('terminalId', '')}".rstrip(), "editor", 4)
        else:
            params = {k: v for k, v in p.items() if k != "sessionId"}
            self.say(f"⇄ {tag}the agent asks {method} {_compact(params)}", "editor", 4)

    def update(self, p: dict[str, Any], kind: str) -> None:
        sid = p.get("sessionId")
        u = p["update"]
        if kind in CHUNKS:
            content = _obj(u.get("content"))
            text = content.get("text") if content.get("type") == "text" else f"[{content.get('type')}]"
            if self._chunk != (sid, kind):
                self.flush()
                self._chunk = (str(sid), kind)
            self._text.append(text if isinstance(text, str) else "")
            return
        tag = self.tag(sid)
        if kind == "tool_call":
            tid = u.get("toolCallId")
            self.titles[tid] = u.get("title") or str(tid)
            self.say(f"🔧 {tag}{u.get('title')} ({u.get('kind', 'other')}) {u.get('status', 'pending')}", "tool", 2)
            raw = u.get("rawInput")
            if isinstance(raw, dict) and isinstance(raw.get("command"), str):
                self.say(f"$ {raw['command']}", "tool", 6)
        elif kind == "tool_call_update":
            self.tool_update(u, tag)
        elif kind == "plan":
            self.say(f"📋 {tag}plan:", "info", 2)
            for entry in u.get("entries") or []:
                if isinstance(entry, dict):
                    mark = {"completed": "[x]", "in_progress": "[~]"}.get(_str(entry.get("status")), "[ ]")
                    self.say(f"{mark} {entry.get('content')}", "info", 6)
        elif kind == "available_commands_update":
            names = [f"/{c.get('name')}" for c in u.get("availableCommands") or [] if isinstance(c, dict)]
            self.say(f"· {tag}commands: {' '.join(names)}", "info", 2)
        elif kind == "current_mode_update":
            self.say(f"· {tag}mode is now {u.get('currentModeId')}", "info", 2)
        elif kind == "config_option_update":
            values = [
                f"{o.get('id')}={o.get('currentValue')}" for o in u.get("configOptions") or [] if isinstance(o, dict)
            ]
            self.say(f"· {tag}settings: {', '.join(values)}", "info", 2)
        elif kind == "session_info_update":
            if u.get("title"):
                self.say(f"· {tag}title: {u['title']}", "info", 2)
        elif kind == "usage_update":
            cost = u.get("cost") if isinstance(u.get("cost"), dict) else None
            money = f", cost {cost.get('amount')} {cost.get('currency')}" if cost else ""
            self.say(f"· {tag}context: {u.get('used')} of {u.get('size')} tokens{money}", "info", 2)
        else:
            self.say(f"· {tag}{kind} {_compact({k: v for k, v in u.items() if k != 'sessionUpdate'})}", "info", 2)

    def tool_update(self, u: dict[str, Any], tag: str) -> None:
        tid = u.get("toolCallId")
        if u.get("title"):
            self.titles[_str(tid)] = u["title"]
        title = self.titles.get(_str(tid), str(tid))
        status = u.get("status")
        if status:
            style = {"completed": "ok", "failed": "failed"}.get(status, "tool")
            why = _decision(u)
            self.say(f"{STATUS_MARK.get(status, '·')} {tag}{title}: {status.replace('_', ' ')}{why}", style, 4)
        self.tool_content(u.get("content"), None, 6)

    def tool_content(self, content: Any, raw_input: Any, indent: int, show_input: bool = False) -> None:
        shown = False
        for c in content if isinstance(content, list) else []:
            if not isinstance(c, dict):
                continue
            if c.get("type") == "diff":
                self.diff(c, indent)
                shown = True
            elif c.get("type") == "content":
                inner = _obj(c.get("content"))
                if isinstance(inner.get("text"), str) and inner["text"].strip():
                    self.block(inner["text"], "output", indent)
                    shown = True
            elif c.get("type") == "terminal":
                self.say(f"(output in the editor's terminal {c.get('terminalId')})", "output", indent)
                shown = True
        if show_input and not shown and raw_input not in (None, {}, ""):
            if isinstance(raw_input, dict) and isinstance(raw_input.get("command"), str):
                self.say(f"$ {raw_input['command']}", "question", indent)
            else:
                self.block(json.dumps(raw_input, ensure_ascii=False, indent=1), "output", indent)

    def diff(self, c: dict[str, Any], indent: int) -> None:
        old = _str(c.get("oldText"))
        new = _str(c.get("newText"))
        path = str(c.get("path") or "file")
        label = "new file" if c.get("oldText") is None else "edit"
        self.say(f"{label} {path}", "hunk", indent)
        lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=2))
        lines = lines[2:]  # the ---/+++ header: the path is above
        if not lines:
            self.say("│ (no change)", "output", indent)
        if not self.full and len(lines) > PREVIEW_LINES * 2:
            hidden = len(lines) - PREVIEW_LINES * 2
            lines = [*lines[: PREVIEW_LINES * 2], f"… ({hidden} more diff lines; --full shows all)"]
        for ln in lines:
            style = (
                "added"
                if ln.startswith("+")
                else "removed"
                if ln.startswith("-")
                else "hunk"
                if ln.startswith("@@")
                else "output"
            )
            self.say(f"│ {ln}", style, indent)


# ---- helpers ------------------------------------------------------------------------------------------------------
def _obj(value: Any) -> dict[str, Any]:
    """A JSON object as recorded, or an empty one when the recording holds something else there."""
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _session_ids_in(msg: Any) -> list[str]:
    if isinstance(msg, dict):
        params = msg.get("params")
        result = msg.get("result")
        for holder in (params, result):
            if isinstance(holder, dict) and isinstance(holder.get("sessionId"), str):
                return [holder["sessionId"]]
    return []


def _count_responses(script: Any) -> str:
    try:
        return str(len(json.loads(script)["responses"]))
    except (ValueError, TypeError, KeyError):
        return "?"


def _capabilities(caps: Any) -> str:
    if not isinstance(caps, dict):
        return ""
    offered = []
    fs = _obj(caps.get("fs"))
    if fs.get("readTextFile") is True:
        offered.append("fs read")
    if fs.get("writeTextFile") is True:
        offered.append("fs write")
    if caps.get("terminal") is True:
        offered.append("terminals")
    return f"; offers {', '.join(offered)}" if offered else ""


def _prompt_text(blocks: Any) -> str:
    parts = []
    for b in blocks if isinstance(blocks, list) else []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            parts.append(str(b.get("text", "")))
        elif b.get("type") == "resource_link":
            parts.append(f"[link {b.get('uri')}]")
        elif b.get("type") == "resource":
            res = _obj(b.get("resource"))
            parts.append(f"[attached {res.get('uri')}]")
        else:
            parts.append(f"[{b.get('type')}]")
    text = " ".join(parts)
    return json.dumps(text, ensure_ascii=False) if text else "(empty)"


def _decision(u: dict[str, Any]) -> str:
    meta = _obj(u.get("_meta"))
    gw = _obj(meta.get("gatewright"))
    if not gw.get("decision"):
        return ""
    decision = {"allow": "allowed", "deny": "refused", "ask": "asked"}.get(gw["decision"], gw["decision"])
    by = f" by {gw['by']}" if gw.get("by") else ""
    reason = f": {gw['reason']}" if gw.get("reason") else ""
    return f"  ({decision}{by}{reason})"


def _exit_status(status: Any) -> str:
    if not isinstance(status, dict):
        return ""
    if status.get("signal"):
        return f"killed by {status['signal']}"
    if status.get("exitCode") is not None:
        return f"exit code {status['exitCode']}"
    return ""


def _shell_word(word: Any) -> str:
    return shlex.quote(str(word))


def _compact(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(transcript: Transcript, *, full: bool = False) -> list[Line]:
    return _View(transcript, full).render()


def render_text(transcript: Transcript, *, full: bool = False) -> str:
    """The plain-text view (what a pipe or a file gets)."""
    return "\n".join(line.text for line in render(transcript, full=full)) + "\n"


# ---- printing -----------------------------------------------------------------------------------------------------
def _wants_colour(color: str, stream: Any) -> bool:
    if color == "never":
        return False
    if color == "always":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def _print_rich(lines: list[Line], stream: Any, force: bool) -> bool:
    """Print with rich (colour, Markdown replies). False when rich is not installed."""
    try:
        console_mod, markdown, table, text = lazy.rich_console, lazy.rich_markdown, lazy.rich_table, lazy.rich_text
    except ImportError:
        return False
    console = console_mod.Console(file=stream, force_terminal=force or None, highlight=False)
    i = 0
    while i < len(lines):
        if lines[i].markdown:  # a whole reply, as Markdown beside its glyph
            j = i
            while j < len(lines) and lines[j].markdown:
                j += 1
            head, _, first = lines[i].text.partition("🤖 ")
            body = "\n".join([first] + [ln.text[len(head) + 3 :] for ln in lines[i + 1 : j]])
            grid = table.Table.grid(padding=(0, 1))
            grid.add_column(no_wrap=True)
            grid.add_column()
            grid.add_row(text.Text(head + "🤖"), markdown.Markdown(body))
            console.print(grid)
            i = j
            continue
        console.print(text.Text(lines[i].text, style=STYLES.get(lines[i].style, "")))
        i += 1
    return True


def run_render(path: str, *, color: str = "auto", full: bool = False, out: Any = None, err: Any = None) -> int:
    """`gatewright replay FILE`: 0 when shown, 2 when the file is not a transcript."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        lines = render(load(path), full=full)
    except TranscriptError as exc:
        err.write(f"gatewright replay: {exc}\n")
        return 2
    try:
        if not (_wants_colour(color, out) and _print_rich(lines, out, color == "always")):
            out.write("\n".join(line.text for line in lines) + "\n")
        out.flush()
    except BrokenPipeError:  # `gatewright replay FILE | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    return 0
