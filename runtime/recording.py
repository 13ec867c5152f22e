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

import os
import platform
import re
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import orjson

from permissions.store import state_dir as resolve_state_dir
from runtime import config
from runtime import secrets as secret_registry
from runtime.version import __version__

if TYPE_CHECKING:
    from runtime import ModelFactory

REDACTED = "<redacted>"


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
    written with the first frame, so that it can carry the client's `clientInfo` from `initialize`."""

    def __init__(self, path: str, meta: dict[str, Any] | None = None) -> None:
        self._f = open(path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the server
        self._t0: float | None = None
        self._lock = threading.Lock()
        self._meta = meta
        secret_registry.register_environment()  # what the environment holds now (tests set keys late)

    def _write_meta(self, first: Any) -> None:
        meta, self._meta = self._meta, None
        if meta is None:
            return
        if isinstance(first, dict) and first.get("method") == "initialize" and isinstance(first.get("params"), dict):
            info = first["params"].get("clientInfo")
            if isinstance(info, dict):
                meta = {**meta, "client": info}
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

    def close(self) -> None:
        with self._lock:
            if self._meta is not None:  # nothing was recorded: the facts of the run still say what it was
                self._write_meta(None)
            self._f.close()
