"""The sandbox launcher: `python -m runtime.sandbox -- CMD [ARG...]`, what an editor terminal runs for `bash`.

It reads the spec the agent put in its environment (`launcher_env`), applies the same sandbox a local spawn gets
(namespaces, read-only protected paths, Landlock) and execs the command with those variables removed. It refuses
to run anything without a spec: a launcher started by hand, or by an editor that dropped the environment, must not
run a command unconfined. If the agent has already exited, nothing runs either; if it exits later, the namespace's
init kills the command (with namespaces; without them the command is on its own once exec'd).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from runtime.sandbox.child import FORWARDED, SETUP_FAILED, SETUP_PREFIX, Capabilities, Plan
from runtime.sandbox.launcher_env import AGENT_ENV, ALL, CAPS_ENV, SPEC_ENV, start_time
from runtime.sandbox.spec import SandboxSpec


def _refuse(why: str) -> int:
    os.write(2, SETUP_PREFIX + why.encode("utf-8", "replace") + b"\n")
    return SETUP_FAILED


def _agent_pidfd(value: str) -> int | None:
    pid_text, _, started = value.partition(":")
    pid = int(pid_text)
    fd = os.pidfd_open(pid)
    if started and start_time(pid) != started:
        os.close(fd)
        raise ProcessLookupError(pid)
    return fd


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        return _refuse("usage: python -m runtime.sandbox -- COMMAND [ARG...]")
    env = dict(os.environ)
    values = {name: env.pop(name, None) for name in ALL}
    if not values[SPEC_ENV]:
        return _refuse(f"no {SPEC_ENV} in the environment: refusing to run a command unconfined")
    try:
        spec = SandboxSpec.from_json(values[SPEC_ENV] or "")
        abi, ns = (values[CAPS_ENV] or "0,0").split(",")
        caps = Capabilities(int(abi), ns == "1")
    except (ValueError, TypeError) as exc:
        return _refuse(f"unreadable sandbox spec ({exc})")
    agent_fd = None
    if values[AGENT_ENV]:
        try:
            agent_fd = _agent_pidfd(values[AGENT_ENV] or "")
        except (OSError, ValueError):
            return _refuse("the agent that asked for this command is gone")
    report_r, report_w = os.pipe()
    try:
        plan = Plan(args, env, spec, caps, cwd=os.getcwd(), report_w=report_w, grace=spec.grace)
    except OSError as exc:
        return _refuse(f"the sandbox could not be prepared ({exc})")
    if not caps.namespaces:
        plan.exec_here()  # Landlock on this process, then exec: the editor's child becomes the command
    try:
        init = plan.start(agent_pidfd=agent_fd)
    except OSError as exc:
        return _refuse(str(exc))
    finally:
        plan.close()
        os.close(report_w)
    return _follow(init, report_r)


def _follow(init: int, report_r: int) -> int:
    """Pass the editor's signals on to the namespace's init, then end the way the command did."""
    waited = set(FORWARDED) | {signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    init_fd = os.pidfd_open(init)
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
    data = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(report_r, 65536):
            data += chunk
    status = next((int(line[1:]) for line in data.splitlines() if line.startswith(b"S")), None)
    if status is None:
        return 128 + signal.SIGKILL if os.WIFSIGNALED(init_status) or not os.WEXITSTATUS(init_status) \
            else os.WEXITSTATUS(init_status)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
