"""Transcript recording (`--record FILE`): every frame, both directions, as JSON lines, secrets redacted.

Both hosts record in this one format: `gatewright acp` its real frames, `gatewright run` the frames an ACP client
would have seen (so `gatewright replay` re-drives either).

The first line of each recording is its `meta` (`transcript_meta`): gatewright's version, the host, model spec,
mode, the config's permission rules, the state dir, the client's `clientInfo` (from the first `initialize`, so the
line is written with the first frame), and the scripted model's file content when the model is scripted, so that
`gatewright replay --check` can re-drive a user's recording on its own.

Redacted: environment values and headers of `mcpServers` entries and `authenticate` payloads beyond the method id
(by their place in the frame), and every value in the secret registry (`runtime.secrets`: provider keys, configured
key variables, MCP values, anything secret-looking in this process's environment) wherever it appears.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import orjson

from permissions.secret_files import is_secret_file_name
from permissions.store import state_dir as resolve_state_dir
from runtime import config
from runtime import secrets as secret_registry
from runtime.version import __version__

if TYPE_CHECKING:
    from runtime import ModelFactory

REDACTED = "<redacted>"
log = logging.getLogger("gatewright.recording")


# What an editor is sent about the session rather than the conversation: the terminal hosts record none of it.
EDITOR_ONLY_UPDATES = frozenset(
    {"available_commands_update", "session_info_update", "current_mode_update", "config_option_update"}
)


def transcript_meta(
    factory: ModelFactory, mode: str, *, host: str = "acp", cwd: str | None = None, state_dir: str | None = None
) -> dict[str, Any]:
    """The facts a recording needs to be replayed elsewhere (redacted like every frame when written)."""
    spec = factory.spec
    meta: dict[str, Any] = {
        "gatewright": __version__,
        "host": host,
        "model": str(spec) if spec else None,
        "mode": str(mode),
        "python": platform.python_version(),
        "platform": sys.platform,
    }
    if cwd is not None:
        meta["cwd"] = cwd
    try:
        meta["state_dir"] = resolve_state_dir(state_dir)
    except Exception:  # noqa: S110 - informational only
        pass
    permissions = _config_permissions()
    if permissions:
        meta["permissions"] = permissions
    if spec is not None and spec.provider == "scripted":
        try:
            with open(os.path.expanduser(spec.name), encoding="utf-8") as f:
                meta["scripted_model"] = f.read()
        except (OSError, UnicodeDecodeError):
            pass  # the agent reports an unreadable script itself
    return meta


class WorkspaceFiles:
    """The files a recording needs to replay on its own: the content each file had when the recorded agent first
    named it (a tool call's path or locations, a search's matches), before the call could change it. A file that did
    not exist then is left out (the replay starts without it); a secret file (`.env`, keys) is never embedded, nor
    is one outside the first workspace root, one that is not text, or one past the size limits: each is listed with
    its reason under `workspace_files_missing`, so the replay can say what it lacks."""

    PER_FILE = 1024 * 1024
    TOTAL = 8 * 1024 * 1024

    def __init__(self, cwd: str | None) -> None:
        self.roots: list[str] = [os.path.realpath(cwd)] if cwd else []
        self.files: dict[str, str] = {}
        self.lacks: dict[str, str] = {}
        self._seen: set[str] = set()
        self._bytes = 0

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workspace_files": dict(sorted(self.files.items()))}
        if self.lacks:
            out["workspace_files_missing"] = dict(sorted(self.lacks.items()))
        return out

    def observe(self, direction: str, msg: Any) -> None:
        if not isinstance(msg, dict) or not isinstance(msg.get("params"), dict):
            return
        params = msg["params"]
        if direction == "in" and msg.get("method") in ("session/new", "session/load", "session/resume"):
            for root in [params.get("cwd"), *(params.get("additionalDirectories") or [])]:
                if isinstance(root, str) and os.path.isabs(root) and os.path.realpath(root) not in self.roots:
                    self.roots.append(os.path.realpath(root))
            return
        if direction != "out" or msg.get("method") != "session/update":
            return
        update = params.get("update")
        if not isinstance(update, dict) or update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return
        for loc in update.get("locations") or ():
            if isinstance(loc, dict) and isinstance(loc.get("path"), str):
                self.capture(loc["path"])
        raw_input = update.get("rawInput")
        if isinstance(raw_input, dict) and isinstance(raw_input.get("path"), str):
            self.capture(raw_input["path"])
        raw = update.get("rawOutput")
        if isinstance(raw, dict) and isinstance(raw.get("matches"), list):
            base = str(raw["path"]) if isinstance(raw.get("path"), str) else ""
            for m in raw["matches"]:
                found = m.get("path") if isinstance(m, dict) else m
                if isinstance(found, str):
                    self.capture(os.path.join(base, found))

    def capture(self, path: str) -> None:
        if not self.roots:
            return
        full = os.path.realpath(os.path.join(self.roots[0], path))
        if full in self._seen:
            return
        self._seen.add(full)
        first = self.roots[0]
        root = next((r for r in self.roots if full == r or full.startswith(r.rstrip(os.sep) + os.sep)), None)
        if root is None or full == root:
            return  # outside the workspace (the replay refuses such calls anyway), or a root itself
        if root != first:
            self.lacks[full] = "in another workspace root (only the first is embedded)"
            return
        rel = os.path.relpath(full, first).replace(os.sep, "/")
        if is_secret_file_name(rel):
            self.lacks[rel] = "a secret file (never embedded)"
            return
        try:
            size = os.stat(full).st_size
            if not os.path.isfile(full):
                return  # a directory searched, a device: nothing to embed
        except OSError:
            return  # did not exist when first named: the replay starts without it too
        if size > self.PER_FILE or self._bytes + size > self.TOTAL:
            self.lacks[rel] = f"too large to embed ({size} bytes)"
            return
        try:
            with open(full, "rb") as f:
                text = f.read(self.PER_FILE + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            self.lacks[rel] = "not a UTF-8 text file"
            return
        self.files[rel] = text
        self._bytes += size


def _config_permissions() -> dict[str, list[str]]:
    """The config file's `[permissions]` allow/deny rules (they change what is asked); empty when there are none."""
    try:
        settings = config.load().permissions
    except Exception:  # already checked at start-up; a file changed since is not worth failing the recording for
        return {}
    return {k: list(v) for k, v in (("allow", settings.allow), ("deny", settings.deny)) if v}


def redact(msg: Any) -> Any:
    if isinstance(msg, dict):
        out: dict[str, Any] = {}
        for k, v in msg.items():
            if k in ("env", "headers") and isinstance(v, list):
                out[k] = [{**e, "value": REDACTED} if isinstance(e, dict) and "value" in e else REDACTED for e in v]
            elif k in ("env", "headers") and isinstance(v, dict):
                out[k] = dict.fromkeys(v, REDACTED)
            else:
                out[k] = redact(v)
        if msg.get("method") == "authenticate" and isinstance(msg.get("params"), dict):
            out["params"] = {k: (v if k == "methodId" else REDACTED) for k, v in msg["params"].items()}
        return out
    if isinstance(msg, list):
        return [redact(v) for v in msg]
    if isinstance(msg, str):
        return secret_registry.redact_text(msg)
    return msg


_RAW_VALUE = re.compile(r'("value"\s*:\s*)"(?:[^"\\]|\\.)*"?')
_RAW_MAPPING = re.compile(r'("(?:env|headers)"\s*:\s*\{)[^}]*\}?')


def redact_raw(text: str) -> str:
    """Redact an input line that is not valid JSON (recorded raw, so `redact` cannot see its structure): the string
    after any `"value":` (env and header entries), `env`/`headers` mappings, and anything mentioning `authenticate`
    are replaced, even when the line is cut short."""
    if "authenticate" in text:
        return REDACTED
    text = _RAW_VALUE.sub(lambda m: m.group(1) + f'"{REDACTED}"', text)
    return _RAW_MAPPING.sub(lambda m: m.group(1) + REDACTED + "}", text)


class TranscriptRecorder:
    """Appends to `path` (opened at once: an unwritable file is reported before anything runs). The meta line is
    written with the first frame, so that it can carry the client's `clientInfo` from `initialize`; at `close` it is
    written again with the files the recording needs (`WorkspaceFiles`), so that it replays from anywhere."""

    def __init__(self, path: str, meta: dict[str, Any] | None = None) -> None:
        self.path = path
        self._f = open(path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the server
        self._t0: float | None = None
        self._lock = threading.Lock()
        self._meta = meta
        self._written_meta: dict[str, Any] | None = None
        self._meta_at: int | None = None  # where the meta line starts in the file
        self.files = WorkspaceFiles(meta.get("cwd") if meta else None)
        secret_registry.register_environment()  # what the environment holds now (tests set keys late)

    def _write_meta(self, first: Any) -> None:
        meta, self._meta = self._meta, None
        if meta is None:
            return
        if isinstance(first, dict) and first.get("method") == "initialize" and isinstance(first.get("params"), dict):
            info = first["params"].get("clientInfo")
            if isinstance(info, dict):
                meta = {**meta, "client": info}
        self._meta_at = os.fstat(self._f.fileno()).st_size
        self._written_meta = meta
        self._f.write(orjson.dumps({"meta": redact(meta)}) + b"\n")

    def record(self, direction: str, msg: Any, raw: bytes | None = None) -> None:
        now = time.monotonic()
        redacted = redact(msg)
        text = (
            None
            if raw is None
            else secret_registry.redact_text(redact_raw(raw.decode("utf-8", errors="replace")[:4096]))
        )
        with self._lock:
            if self._t0 is None:
                self._t0 = now
                self._write_meta(msg if direction == "in" else None)
            entry: dict[str, Any] = {"dir": direction, "t": round(now - self._t0, 4), "msg": redacted}
            if text is not None:
                entry["raw"] = text
            self._f.write(orjson.dumps(entry) + b"\n")
            try:
                self.files.observe(direction, msg)
            except Exception:  # what a replay needs is a bonus: it never costs the recording itself
                log.debug("could not note the files a frame names", exc_info=True)

    def close(self) -> None:
        with self._lock:
            if self._meta is not None:  # nothing was recorded: the facts of the run still say what it was
                self._write_meta(None)
            self._f.close()
            if self._meta_at is not None and self._written_meta is not None and (self.files.files or self.files.lacks):
                self._rewrite_meta({**self._written_meta, **self.files.meta()})

    def _rewrite_meta(self, meta: dict[str, Any]) -> None:
        """Replace this recording's meta line with `meta` (the file is rewritten whole, atomically; a recording that
        cannot be rewritten keeps the meta it had)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
            at = self._meta_at or 0
            end = data.index(b"\n", at)
            if not data[at:end].startswith(b'{"meta"'):
                return
            line = orjson.dumps({"meta": redact(meta)})
            tmp = f"{self.path}.{os.getpid()}.tmp"
            mode = os.stat(self.path).st_mode & 0o777
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as out:
                out.write(data[:at] + line + data[end:])
            os.replace(tmp, self.path)
        except (OSError, ValueError):
            log.warning("could not add the workspace files to the transcript %s", self.path, exc_info=True)
