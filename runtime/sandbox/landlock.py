"""Landlock rulesets (Linux ≥ 5.13), built in the agent and enforced in a child just before `exec`.

A small ctypes module instead of a binding from PyPI: the three system calls and four structures are stable kernel
ABI, and what we need on top of them (choosing the handled rights by ABI, path-beneath rules that only carry the
rights a non-directory accepts, TCP denial, scopes) is a few lines. The bindings that exist wrap the same calls
with more surface and no pre-exec story.

What a ruleset handles (everything not granted by a rule is denied):
- files: every access right of the running ABI except `IOCTL_DEV` (ABI 5): handling it would break the ioctls the
  inherited terminal and pipes need (`isatty`, window size), and device ioctls are not our threat;
  `REFER` (ABI 2) is handled and granted on writable trees, so renames inside them work (ABI 1 refuses every
  rename between directories); `TRUNCATE` (ABI 3) goes with writes.
- TCP (ABI 4): `bind` and `connect` handled with no rule when the network is off; not handled at all when on.
  When `[sandbox] network` limits a command and there is no network namespace, only `connect` is handled, with one
  rule: the port of the proxy (`proxy`). Such a rule matches the port on every address, and Landlock has no UDP or
  raw-socket control: the network namespace is what cuts those (see `child`).
- scopes (ABI 6): signals and abstract unix sockets cannot reach outside the sandbox's domain.
- ptrace (every ABI): a sandboxed process cannot trace, or open the `/proc/<pid>/fd`, `mem`, `environ` of, any
  process outside its domain (the agent included).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time
from collections.abc import Iterable

from runtime.sandbox._libc import check, libc

CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5: never handled (see the module docstring)

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
_WRITE_ABI1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
)
# The rights the kernel accepts in a rule on a non-directory (EINVAL otherwise).
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

MAX_KNOWN_ABI = 7


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header: 12 bytes
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


_abi: int | None = None


def abi() -> int:
    """The running kernel's Landlock ABI version; 0 when Landlock is absent or disabled (cached)."""
    global _abi
    if _abi is None:
        lc = libc()
        if lc.landlock_nrs is None:
            _abi = 0
        else:
            v = lc.landlock_create_ruleset(None, 0, CREATE_RULESET_VERSION)
            _abi = v if v > 0 else 0
    return _abi


def handled_fs(version: int) -> int:
    rights = READ | _WRITE_ABI1
    if version >= 2:
        rights |= FS_REFER
    if version >= 3:
        rights |= FS_TRUNCATE
    return rights


def write_rights(version: int) -> int:
    return handled_fs(version) & ~READ


class _Handles:
    """O_PATH descriptors of the baseline paths, kept open between spawns (a rule is added from an fd; opening and
    checking ~60 system paths per spawn costs ~0.2 ms). Reopened after `TTL` seconds, so a system file replaced by
    a rename (`/etc/resolv.conf` rewritten by a DHCP client) is picked up again soon."""

    TTL = 10.0

    def __init__(self) -> None:
        self._fds: dict[str, tuple[int, bool]] = {}
        self._opened = 0.0
        self._lock = threading.Lock()

    def get(self, paths: Iterable[str]) -> list[tuple[int, bool]]:
        with self._lock:
            now = time.monotonic()
            if now - self._opened > self.TTL:
                self._close_all()
                self._opened = now
            out = []
            for p in paths:
                h = self._fds.get(p)
                if h is None:
                    h = _open_path(p)
                    if h is None:
                        continue
                    self._fds[p] = h
                out.append(h)
            return out

    def _close_all(self) -> None:
        for fd, _ in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()


def _open_path(path: str) -> tuple[int, bool] | None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return fd, _is_dir(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        return None


HANDLES = _Handles()


class Ruleset:
    """An open ruleset fd (close-on-exec; the child that enforces it inherits it across `fork` only)."""

    def __init__(self, version: int, *, network: bool, connect_ports: tuple[int, ...] = ()) -> None:
        """`network`: TCP is not handled at all; `connect_ports` (ABI 4+): only connecting is handled, and allowed to
        these ports (on any address); neither: no TCP bind or connect."""
        self.version = version
        self.fs = handled_fs(version)
        if version < 4 or (network and not connect_ports):
            net = 0
        elif connect_ports:
            net = NET_CONNECT_TCP
        else:
            net = NET_BIND_TCP | NET_CONNECT_TCP
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
        # Older kernels reject a larger struct with unknown (even zero) fields: pass only the size they know.
        size = 8 if version < 4 else 16 if version < 6 else 24
        attr = _RulesetAttr(self.fs, net, scoped)
        lc = libc()
        fd = check(lc.landlock_create_ruleset(ctypes.byref(attr), size, 0), "landlock_create_ruleset")
        os.set_inheritable(fd, False)
        self.fd = fd
        assert lc.landlock_nrs is not None
        self._add_rule = lc.syscall
        self._add_args = (ctypes.c_long(lc.landlock_nrs[1]), ctypes.c_int(fd), ctypes.c_int(RULE_PATH_BENEATH))
        self._attr = PathBeneathAttr(0, -1)
        self._attr_ref = ctypes.byref(self._attr)
        self._zero = ctypes.c_uint32(0)
        for port in connect_ports if net else ():
            rule = NetPortAttr(NET_CONNECT_TCP, port)
            args = (ctypes.c_long(lc.landlock_nrs[1]), ctypes.c_int(fd), ctypes.c_int(RULE_NET_PORT))
            if lc.syscall(*args, ctypes.byref(rule), self._zero) < 0:
                os.close(fd)
                check(-1, f"landlock rule for TCP port {port}")

    def allow(self, path: str, rights: int) -> bool:
        """Grant `rights` beneath `path` (or on the file itself). False when the path does not exist."""
        h = _open_path(path)
        if h is None:
            return False
        try:
            self._add(h[0], h[1], rights, path)
        finally:
            os.close(h[0])
        return True

    def allow_all(self, paths: Iterable[str], rights: int) -> None:
        for p in paths:
            self.allow(p, rights)

    def allow_cached(self, paths: Iterable[str], rights: int) -> None:
        """`allow_all` for the baseline: from the descriptors `HANDLES` keeps open."""
        for fd, is_dir in HANDLES.get(paths):
            self._add(fd, is_dir, rights, "")

    def _add(self, fd: int, is_dir: bool, rights: int, what: str) -> None:
        granted = rights & self.fs
        if not is_dir:
            granted &= FILE_RIGHTS
        if not granted:
            return
        attr = self._attr
        attr.allowed_access = granted
        attr.parent_fd = fd
        if self._add_rule(*self._add_args, self._attr_ref, self._zero) < 0:
            check(-1, f"landlock rule {what or fd}")

    def restrict_self(self) -> None:
        """Enforce the ruleset on the calling thread (no-new-privs must be set), then close it."""
        lc = libc()
        assert lc.landlock_nrs is not None
        if lc.syscall(ctypes.c_long(lc.landlock_nrs[2]), ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            check(-1, "landlock_restrict_self")
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Ruleset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_dir(mode: int) -> bool:
    return (mode & 0o170000) == 0o040000
