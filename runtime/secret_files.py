"""Which files a call touches may hold secrets: the facts the policy asks on (`CallFacts.secrets`).

A file is a secret file when its name is a well-known one (`permissions.secret_files`: `.env`, `*.pem`,
`.aws/credentials`...), as written or where it resolves, or when it holds the whole value of a secret the agent knows
of (`runtime.secrets`: a provider's key, a token in the environment, an MCP server's env value) under any name.
Reading such a file asks in every mode, because once the model has a value no redaction follows it through a
transform.

The content check must be cheap, since every file a call names is checked before the call is decided: only regular
files (a FIFO or a device is never read; the open does not block), up to `SCAN_LIMIT` bytes, read in chunks and
searched for each value's bytes (memchr-fast): 20 µs for a 4 KB file, 0.27 ms for 1 MB, against 9 µs to resolve the
path alone (`python -m bench --only secrets`). A larger file is checked in its first `SCAN_LIMIT` bytes only
(docs/secrets.md says so).
"""

from __future__ import annotations

import os
import stat

from permissions.secret_files import is_secret_file_name, why_secret_name
from runtime import secrets

SCAN_LIMIT = 16 << 20
_CHUNK = 1 << 20


def value_in_file(path: str) -> str | None:
    """Where the secret value `path` holds comes from (`OPENAI_API_KEY`), or None: not a regular file, unreadable,
    or holding none of the registered values in its first `SCAN_LIMIT` bytes."""
    values = secrets.REGISTRY.labelled()
    if not values:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    # Read in chunks, not mapped: a file truncated while it is mapped would kill the agent with SIGBUS. Each chunk
    # keeps the tail of the one before, so a value across the boundary is found.
    overlap = max(len(v) for v, _ in values) - 1
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        tail, read = b"", 0
        while read < SCAN_LIMIT:
            chunk = os.read(fd, min(_CHUNK, SCAN_LIMIT - read))
            if not chunk:
                break
            read += len(chunk)
            data = tail + chunk
            for value, label in values:
                if value in data:
                    return label
            tail = data[-overlap:] if overlap else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def secret_reason(given: str, real: str, shown: str) -> str | None:
    """Why reading the existing file `given` (resolved: `real`) may put a secret in the model's context, in the words
    a question shows (`shown` is the resolved path as the user reads it), or None."""
    if not os.path.isfile(real):
        return None  # a directory, a file that does not exist yet, a device: nothing to read a secret from
    if is_secret_file_name(given):
        return why_secret_name(given)
    if is_secret_file_name(real):
        return f"{why_secret_name(given)} (it leads to `{shown}`)"
    label = value_in_file(real)
    return None if label is None else f"`{given}` holds the value of {label}"
