"""Run a command on a system that refuses what a real one might: `python -m tests.support.refuse WHAT[,WHAT] -- CMD`.

A seccomp filter (installed with `prctl(PR_SET_SECCOMP)` and a classic BPF program built here, no library needed)
that the command and everything it starts inherit, and cannot remove:

- `userns`: `clone`/`unshare` with CLONE_NEWUSER fail with EPERM, as under Docker's default seccomp profile (and as
  in a chroot, where the kernel refuses the same call); `clone3` fails with ENOSYS, so that the C library falls back
  to `clone`, whose flags a filter can read (Docker does the same).
- `landlock`: the three Landlock calls fail with ENOSYS: a kernel built without Landlock.
- `landlock-enforce`: only `landlock_restrict_self` fails (EPERM): a kernel that reports an ABI it cannot enforce.
- `mount`: `mount` fails with EPERM: a user namespace without the capability to mount (Ubuntu's AppArmor
  restriction of unprivileged user namespaces leaves one like that).

x86_64 and aarch64 only (the syscall numbers below); elsewhere it refuses to run rather than pretend.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
CLONE_NEWUSER = 0x10000000
# BPF opcodes: ld|w|abs, jmp|jeq|k, jmp|jset|k, ret|k
LD_ABS, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data (args[0]'s low word on little-endian machines)

ARCHES = {
    "x86_64": (0xC000003E, {"clone": 56, "unshare": 272, "clone3": 435, "mount": 165}),
    "aarch64": (0xC00000B7, {"clone": 220, "unshare": 97, "clone3": 435, "mount": 40}),
}
LANDLOCK = {"create": 444, "add": 445, "restrict": 446}
WHATS = ("userns", "landlock", "landlock-enforce", "mount")


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(whats: set[str], machine: str) -> bytes:
    """The filter: for each refused call, its number → its errno (or the flag test first), otherwise allow."""
    arch, nrs = ARCHES[machine]
    by_nr: list[tuple[int, int, bool]] = []  # (nr, errno, only with CLONE_NEWUSER)
    if "userns" in whats:
        by_nr += [(nrs["clone"], errno.EPERM, True), (nrs["unshare"], errno.EPERM, True)]
        by_nr += [(nrs["clone3"], errno.ENOSYS, False)]
    if "landlock" in whats:
        by_nr += [(nr, errno.ENOSYS, False) for nr in LANDLOCK.values()]
    if "landlock-enforce" in whats:
        by_nr += [(LANDLOCK["restrict"], errno.EPERM, False)]
    if "mount" in whats:
        by_nr += [(nrs["mount"], errno.EPERM, False)]
    allow = _insn(RET, SECCOMP_RET_ALLOW)
    body = [_insn(LD_ABS, OFF_ARCH), _insn(JEQ, arch, 1, 0), allow, _insn(LD_ABS, OFF_NR)]
    for nr, err, flag in by_nr:
        refuse = _insn(RET, SECCOMP_RET_ERRNO | err)
        if flag:
            # nr? → load arg0, test the flag → refuse; otherwise reload nr and go on
            body += [_insn(JEQ, nr, 0, 4), _insn(LD_ABS, OFF_ARG0), _insn(JSET, CLONE_NEWUSER, 0, 1), refuse]
            body += [_insn(LD_ABS, OFF_NR)]
        else:
            body += [_insn(JEQ, nr, 0, 1), refuse]
    body.append(allow)
    return b"".join(body)


def install(whats: set[str]) -> None:
    machine = platform.machine()
    if machine not in ARCHES:
        raise OSError(f"no syscall table for {machine}")
    code = program(whats, machine)
    buf = ctypes.create_string_buffer(code, len(code))

    class Fprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    prog = Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write(f"usage: python -m tests.support.refuse {{{','.join(WHATS)}}}[,...] -- COMMAND [ARG...]\n")
        return 2
    whats = set(argv[0].split(","))
    if not whats <= set(WHATS):
        sys.stderr.write(f"refuse: unknown {sorted(whats - set(WHATS))}; known: {', '.join(WHATS)}\n")
        return 2
    try:
        install(whats)
    except OSError as exc:
        sys.stderr.write(f"refuse: the filter could not be installed ({exc})\n")
        return 125
    os.execvp(argv[2], argv[2:])
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
