"""The sandbox launcher: `... --spec JSON -- CMD [ARG...]`, what an editor terminal runs (started by `launcher_env`
as an isolated interpreter of the install, `boot`; `python -m runtime.sandbox` by hand runs the same `main`).

It applies the sandbox the agent described (`launcher_env`): the same namespaces, read-only protected paths and
Landlock a local spawn gets, then runs the command and exits the way it did. Under `[sandbox] network` with
namespaces it first connects to the one-shot socket of the agent's network proxy (`proxy_path`) and hands that
channel to the namespace's init, as the helper does for its spawns. It refuses to run anything without a
spec: a launcher started by hand, or by an editor that mangled the arguments, must not run a command unconfined. If
the agent has already exited, nothing runs either; if it exits later, the namespace's init ends the command (with
namespaces; without them this process stays the command's parent and ends its group and what left it).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import time

from runtime.sandbox._libc import PR_SET_CHILD_SUBREAPER, libc
from runtime.sandbox.child import FORWARDED, MARKER_ENV, SETUP_FAILED, SETUP_PREFIX, Capabilities, Plan
from runtime.sandbox.launcher_env import parse, start_time
from runtime.sandbox.orphans import adopted_alive, group_alive, sweep


def _refuse(why: str) -> int:
    os.write(2, SETUP_PREFIX + why.encode("utf-8", "replace") + b"\n")
    return SETUP_FAILED


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "--spec" or args[2] != "--":
        return _refuse(
            "usage: python -m runtime.sandbox --spec JSON -- COMMAND [ARG...] (refusing to run a command "
            "without its sandbox)"
        )
    try:
        spec, (abi, ns, netfilter), agent = parse(args[1])
    except (ValueError, TypeError, KeyError) as exc:
        return _refuse(f"unreadable sandbox spec ({exc})")
    command = args[3:]
    agent_fd = None
    if agent is not None:
        try:
            agent_fd = os.pidfd_open(agent[0])
            if agent[1] and start_time(agent[0]) != agent[1]:
                raise ProcessLookupError(agent[0])
        except OSError:
            return _refuse("the agent that asked for this command is gone")
    channel = None
    if spec.limited and ns:
        try:
            channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            channel.connect(spec.proxy_path or "")
        except OSError as exc:
            return _refuse(f"the network proxy cannot be reached ({exc.strerror or exc})")
    report_r, report_w = os.pipe()
    try:
        plan = Plan(
            command,
            dict(os.environ),
            spec,
            Capabilities(abi, ns, netfilter),
            cwd=os.getcwd(),
            report_w=report_w,
            grace=spec.grace,
            proxy_fd=channel.fileno() if channel is not None else None,
        )
    except OSError as exc:
        return _refuse(f"the sandbox could not be prepared ({exc})")
    if not ns:
        return _contain(plan, agent_fd, report_r, report_w)
    try:
        init = plan.start(agent_pidfd=agent_fd)
    except OSError as exc:
        return _refuse(str(exc))
    finally:
        plan.close()
        os.close(report_w)
        if channel is not None:
            channel.close()  # the init has its own: the endpoint ends with it
    return _follow(init, report_r)


def _follow(init: int, report_r: int) -> int:
    """Pass the editor's signals on to the namespace's init, then end the way the command did."""
    waited = set(FORWARDED) | {signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    init_fd = os.pidfd_open(init)
    init_status = 0
    while True:
        info = signal.sigwaitinfo(waited)
        if info.si_signo != signal.SIGCHLD:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(init_fd, info.si_signo)
            continue
        with contextlib.suppress(ChildProcessError):
            pid, init_status = os.waitpid(init, os.WNOHANG)
            if pid == init:
                break
    return _end_like(report_r, None)


def _contain(plan: Plan, agent_fd: int | None, report_r: int, report_w: int) -> int:
    """Without namespaces: the command in its own process group under this process (a child subreaper), which
    passes the editor's signals on to the group and, once the command has exited (after the drain grace) or the
    agent is gone, kills the group and whatever left it carrying the spawn's marker, as the sandbox helper does."""
    tag = os.urandom(8).hex()
    plan.env[MARKER_ENV] = tag
    libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    waited = set(FORWARDED) | {signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        pid = plan.start()
    except OSError as exc:
        return _refuse(str(exc))
    finally:
        plan.close()
        os.close(report_w)
    watch = select.poll()
    if agent_fd is not None:
        watch.register(agent_fd, select.POLLIN)
    status: int | None = None
    deadline: float | None = None
    while True:
        if status is not None:
            busy = group_alive(pid) or adopted_alive(tag)
            if not busy or (deadline is not None and time.monotonic() >= deadline):
                break
        info = signal.sigtimedwait(waited, 0.05 if status is not None else 1.0)
        if watch.poll(0):  # the agent is gone: nothing it asked for may stay
            status = status if status is not None else signal.SIGKILL
            break
        if info is None:
            continue
        if info.si_signo != signal.SIGCHLD:
            with contextlib.suppress(OSError):
                os.killpg(pid, info.si_signo)
            continue
        with contextlib.suppress(ChildProcessError):
            while (got := os.waitpid(-1, os.WNOHANG))[0]:
                if got[0] == pid:
                    status = got[1]
                    grace = plan.grace
                    deadline = None if grace is None else time.monotonic() + grace
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    sweep(tag)
    return _end_like(report_r, status)


def _end_like(report_r: int, status: int | None) -> int:
    """Report the set-up's failure if there was one, then end the way the command did (its wait status from the
    report, or `status`)."""
    data = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(report_r, 65536):
            data += chunk
    lines = data.splitlines()
    for line in lines:
        if line.startswith(b"E"):
            os.write(2, SETUP_PREFIX + line[1:] + b"\n")
    if any(line.startswith(b"E") for line in lines):
        return SETUP_FAILED
    if status is None:
        status = next((int(line[1:]) for line in lines if line.startswith(b"S")), None)
    if status is None:  # killed (the agent went away, or the editor killed the init)
        return 128 + signal.SIGKILL
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
