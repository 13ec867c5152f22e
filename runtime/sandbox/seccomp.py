"""Without a network namespace: a seccomp filter that leaves a command no network at all when it has none.

Landlock (ABI 4) cuts TCP `connect` and `bind`, and nothing else: UDP (DNS included), raw and packet sockets, SCTP,
vsock to a hypervisor's host stay open, and below ABI 4 TCP does too. Where the system allows no network namespace
(the chroot, the container, the AppArmor policy that refuse user namespaces), a command that was not approved for
the network gets this filter instead: `socket()` of any family but unix and netlink fails with EACCES,
`io_uring_setup` with ENOSYS (io_uring can open sockets past seccomp), and so does every system call of another ABI
(`int 0x80` on x86_64, x32: their socket calls have other numbers). The filter is classic BPF, built once in the
helper (`program`) and installed by the child right before `exec` (`install`, after no-new-privs), which the
command and everything it starts inherit and cannot remove.

Its `tcp` variant is for a command limited by `[sandbox] network` where there is no network namespace: it also
allows a TCP socket (`AF_INET`/`AF_INET6`, `SOCK_STREAM`, protocol 0 or TCP), which Landlock then lets connect to the
proxy's port only; datagram, raw and SCTP sockets are refused as above, so UDP (DNS included) cannot get out.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
LD_ABS, JEQ, JGE, RET, AND = 0x20, 0x15, 0x35, 0x06, 0x54  # ld|w|abs, jmp|jeq|k, jmp|jge|k, ret|k, alu|and|k
# struct seccomp_data: the arguments' low words on little-endian machines
OFF_NR, OFF_ARCH, OFF_ARG0, OFF_ARG1, OFF_ARG2 = 0, 4, 16, 24, 32
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM, SOCK_TYPE_MASK, IPPROTO_TCP = 1, 0xF, 6  # the type without SOCK_NONBLOCK / SOCK_CLOEXEC
X32_BIT = 0x40000000

# machine → (AUDIT_ARCH, socket, io_uring_setup, whether x32 numbers exist)
ARCHES = {
    "x86_64": (0xC000003E, 41, 425, True),
    "aarch64": (0xC00000B7, 198, 425, False),
    "riscv64": (0xC00000F3, 198, 425, False),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None, *, tcp: bool = False) -> bytes | None:
    """The filter's instructions for this machine, or None where its system call numbers are not known here.
    `tcp`: TCP sockets are allowed too (see the module docstring)."""
    arch_info = ARCHES.get(machine or os.uname().machine)
    if arch_info is None:
        return None
    arch, nr_socket, nr_uring, x32 = arch_info
    refuse = _insn(RET, RET_ERRNO | errno.EACCES)
    nosys = _insn(RET, RET_ERRNO | errno.ENOSYS)
    allow = _insn(RET, RET_ALLOW)
    code = [_insn(LD_ABS, OFF_ARCH), _insn(JEQ, arch, 1, 0), nosys, _insn(LD_ABS, OFF_NR)]
    if x32:
        code += [_insn(JGE, X32_BIT, 0, 1), nosys]
    code += [_insn(JEQ, nr_uring, 0, 1), nosys]
    code += [_insn(JEQ, nr_socket, 1, 0), allow]
    if not tcp:
        code += [_insn(LD_ABS, OFF_ARG0), _insn(JEQ, AF_UNIX, 2, 0), _insn(JEQ, AF_NETLINK, 1, 0), refuse, allow]
        return b"".join(code)
    code += [
        _insn(LD_ABS, OFF_ARG0),
        _insn(JEQ, AF_UNIX, 10, 0),  # → allow
        _insn(JEQ, AF_NETLINK, 9, 0),  # → allow
        _insn(JEQ, AF_INET, 1, 0),  # → the type
        _insn(JEQ, AF_INET6, 0, 6),  # the type, or → refuse
        _insn(LD_ABS, OFF_ARG1),
        _insn(AND, SOCK_TYPE_MASK),
        _insn(JEQ, SOCK_STREAM, 0, 3),  # the protocol, or → refuse
        _insn(LD_ABS, OFF_ARG2),
        _insn(JEQ, 0, 2, 0),  # → allow
        _insn(JEQ, IPPROTO_TCP, 1, 0),  # → allow, or → refuse
        refuse,
        allow,
    ]
    return b"".join(code)


class _Fprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class Filter:
    """A filter prepared before the fork (its buffer and the prctl entry point), installed in the child."""

    def __init__(self, code: bytes) -> None:
        self._buf = ctypes.create_string_buffer(code, len(code))
        self._prog = _Fprog(len(code) // 8, ctypes.cast(self._buf, ctypes.c_void_p))
        lib = ctypes.CDLL(None, use_errno=True)
        self._prctl = lib.prctl
        self._prctl.restype = ctypes.c_int
        self._prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong)

    def install(self) -> None:
        """In the child, after PR_SET_NO_NEW_PRIVS.

        Raises:
            OSError: the kernel refused the filter.
        """
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._prog), 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp filter: {os.strerror(err)}")


_FILTERS: dict[bool, Filter | None] = {}


def network_filter(*, tcp: bool = False) -> Filter | None:
    """The no-network filter of this machine (`tcp`: the one that also allows TCP sockets), built once per process;
    None where none can be built."""
    if tcp not in _FILTERS:
        code = program(tcp=tcp)
        _FILTERS[tcp] = Filter(code) if code is not None else None
    return _FILTERS[tcp]
