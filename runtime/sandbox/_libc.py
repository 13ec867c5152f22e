"""The few Linux system calls the sandbox needs and the standard library lacks, as prepared ctypes function objects.

Resolved once in the sandbox helper (or the launcher) before any fork; the children only call these objects.
"""

from __future__ import annotations

import ctypes
import os

# Syscall numbers of the Landlock calls: one table for every architecture with the generic syscall table, which
# both x86_64 and aarch64 follow for these (asm-generic/unistd.h, arch/x86/entry/syscalls/syscall_64.tbl).
_LANDLOCK_NR = {
    "x86_64": (444, 445, 446),
    "aarch64": (444, 445, 446),
    "riscv64": (444, 445, 446),
    "ppc64le": (444, 445, 446),
    "s390x": (444, 445, 446),
    "loongarch64": (444, 445, 446),
}

# clone(2) numbers where its first argument is the flags (the fork-like use here passes no stack, no tids).
_CLONE_NR = {"x86_64": 56, "aarch64": 220, "riscv64": 220, "loongarch64": 220}
SIGCHLD = 17

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_READ = 23
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# What a command run as root keeps when there is no user namespace to take root's privileges away: file access
# (ownership, permission bits), which Landlock bounds. CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER,
# CAP_FSETID.
ROOT_KEEPS = frozenset(range(5))

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


class Libc:
    """Bound libc entry points with errno capture. Build once with `libc()`."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None, use_errno=True)
        self.syscall = lib.syscall
        self.syscall.restype = ctypes.c_long
        self.prctl = lib.prctl
        self.prctl.restype = ctypes.c_int
        self.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
        self.unshare = lib.unshare
        self.unshare.restype = ctypes.c_int
        self.unshare.argtypes = (ctypes.c_int,)
        self.mount = lib.mount
        self.mount.restype = ctypes.c_int
        self.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
        self.get_errno = ctypes.get_errno
        self.capget = lib.capget
        self.capset = lib.capset
        nrs = _LANDLOCK_NR.get(os.uname().machine)
        self.landlock_nrs = nrs  # None: an architecture whose numbers we have not checked: no Landlock
        self.clone_nr = _CLONE_NR.get(os.uname().machine)  # None: no namespaces (the fallback)

    def clone(self, flags: int) -> int:
        """`clone(flags | SIGCHLD)` without a new stack: fork-like, the child in the new namespaces from its first
        instruction (with CLONE_NEWPID: pid 1). Only for a single-threaded caller (the helper, the launcher): glibc's
        cached thread id is not updated in the child, so the child must not use `raise` or thread-owned locks."""
        assert self.clone_nr is not None
        return int(
            self.syscall(
                ctypes.c_long(self.clone_nr),
                ctypes.c_ulong(flags | SIGCHLD),
                ctypes.c_void_p(0),
                ctypes.c_void_p(0),
                ctypes.c_void_p(0),
                ctypes.c_void_p(0),
            )
        )

    def landlock_create_ruleset(self, attr: object, size: int, flags: int) -> int:
        assert self.landlock_nrs is not None
        return int(
            self.syscall(ctypes.c_long(self.landlock_nrs[0]), attr, ctypes.c_size_t(size), ctypes.c_uint32(flags))
        )


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


def drop_root_privileges(lc: Libc, last_cap: int) -> None:
    """In a child about to exec a command as uid 0 without a user namespace: every capability but `ROOT_KEEPS` leaves
    the bounding set (exec cannot give it back: uid 0 gets the bounding set), the inheritable and ambient sets are
    emptied. A capability still in the bounding set after its drop fails the set-up (never a root command with
    CAP_SYS_ADMIN, CAP_SYS_PTRACE or CAP_SYS_MODULE).

    Raises:
        OSError: a capability could not be dropped.
    """
    lc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(last_cap + 1):
        if cap in ROOT_KEEPS:
            continue
        if lc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and lc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0:
            raise OSError(f"capability {cap} could not be dropped: {os.strerror(lc.get_errno())}")
    hdr = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if lc.capget(ctypes.byref(hdr), data) != 0:
        raise OSError(f"capget: {os.strerror(lc.get_errno())}")
    for d in data:
        d.inheritable = 0
    if lc.capset(ctypes.byref(hdr), data) != 0:
        raise OSError(f"capset: {os.strerror(lc.get_errno())}")


_LIBC: Libc | None = None


def libc() -> Libc:
    global _LIBC
    if _LIBC is None:
        _LIBC = Libc()
    return _LIBC


def check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result
