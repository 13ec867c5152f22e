"""Process-group bookkeeping for every child the agent starts.

Children run in their own session (process group). Each group is registered here so that cancel, timeout, session
close and agent exit can kill the whole group, grandchildren included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

_groups: set[int] = set()
_lock = threading.Lock()


def register_group(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)


def unregister_group(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_all_process_groups() -> None:
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        kill_group(pgid)
