"""Redaction of what this package writes to disk (audit rows, remembered rules' labels): this process's secret-looking
environment values, the values of the host's secret registry, and well-known token shapes.

This package imports neither `runtime` nor `acp_server`, so the process-wide secret registry (`runtime.secrets`) adds
its values here itself (`add_secret_source`) when it is created; the runtime imports it before any tool call exists,
so every value it knows is redacted from every row and label written here.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping

REDACTED = "<redacted>"
_SECRET_NAMES = ("API_KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY", "AUTH")
# Well-known token shapes and `name=value` / `--name value` / `Authorization: Bearer x` forms.
_SECRET_PATTERNS = (
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b(ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
    re.compile(
        r"(?i)\b(\w*(?:api[_-]?key|secret|token|password|passwd|credential)\w*)(\s*[=:]\s*|\s+)"
        r"(['\"]?)[^\s'\"]{4,}\3"
    ),
)
# Callables giving secret values known elsewhere in the process (see the module docstring).
_SOURCES: list[Callable[[], Iterable[str]]] = []
_sources_lock = threading.Lock()


def add_secret_source(values: Callable[[], Iterable[str]]) -> None:
    """Redact every value `values()` gives, at each redaction from now on (adding the same callable twice is one)."""
    with _sources_lock:
        if values not in _SOURCES:
            _SOURCES.append(values)


def env_secret_values(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Secret-looking environment values, and every value of the added secret sources (the host's secret registry:
    configured key variables, MCP values)."""
    env = os.environ if environ is None else environ
    return frozenset(
        v for k, v in env.items() if len(v) >= 6 and any(m in k.upper() for m in _SECRET_NAMES)
    ) | frozenset(v for values in _SOURCES for v in values())


def redact(text: str, secrets: frozenset[str] | None = None) -> str:
    """Remove secret values from a string: this process's secret environment values and well-known token shapes."""
    for value in sorted(secrets if secrets is not None else env_secret_values(), key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern in _SECRET_PATTERNS:
        if pattern.groups >= 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text
