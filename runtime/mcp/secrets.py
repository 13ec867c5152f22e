"""Keeps MCP secrets (env values, header values, pinned values) out of every log line.

Our own messages are scrubbed where they are built (`config.redact`); this covers what third-party loggers write
(the MCP SDK and its HTTP client log URLs and exceptions): while a session holds a secret, a filter on the root
logger's handlers replaces it in every record before it is formatted.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterable

from runtime.mcp.config import MIN_SECRET_LEN, redact

_lock = threading.Lock()
_active: collections.Counter[str] = collections.Counter()


class SecretFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        with _lock:
            secrets = list(_active)
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:
            return True
        record.msg = redact(message, secrets)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, secrets)
        return True


_FILTER = SecretFilter()


def install_filter() -> None:
    """Attach the filter to the root logger's handlers (idempotent; handlers added later are covered on the next
    session start)."""
    for handler in logging.getLogger().handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)


def remember_secrets(values: Iterable[str]) -> None:
    install_filter()
    with _lock:
        _active.update(v for v in values if len(v) >= MIN_SECRET_LEN)


def forget_secrets(values: Iterable[str]) -> None:
    with _lock:
        _active.subtract(v for v in values if len(v) >= MIN_SECRET_LEN)
        for v in [k for k, n in _active.items() if n <= 0]:
            del _active[v]


def active_secrets() -> list[str]:
    with _lock:
        return list(_active)
