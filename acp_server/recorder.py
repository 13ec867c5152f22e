"""Transcript recording (`--record FILE`): every frame, both directions, as JSON lines, secrets redacted.

Redacted: environment values and headers of `mcpServers` entries and `authenticate` payloads beyond the method id
(by their place in the frame), and every value in the secret registry (`runtime.secrets`: provider keys, configured
key variables, MCP values, anything secret-looking in this process's environment) wherever it appears.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import orjson

from runtime import secrets as secret_registry

REDACTED = "<redacted>"


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
    def __init__(self, path: str, meta: dict[str, Any] | None = None) -> None:
        self._f = open(path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the server
        self._t0: float | None = None
        self._lock = threading.Lock()
        secret_registry.register_environment()  # what the environment holds now (tests set keys late)
        if meta is not None:
            self._f.write(orjson.dumps({"meta": redact(meta)}) + b"\n")

    def record(self, direction: str, msg: Any, raw: bytes | None = None) -> None:
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        entry: dict[str, Any] = {"dir": direction, "t": round(now - self._t0, 4), "msg": redact(msg)}
        if raw is not None:
            entry["raw"] = secret_registry.redact_text(redact_raw(raw.decode("utf-8", errors="replace")[:4096]))
        with self._lock:
            self._f.write(orjson.dumps(entry) + b"\n")

    def close(self) -> None:
        self._f.close()
