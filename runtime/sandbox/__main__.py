"""The sandbox launcher: `python -m runtime.sandbox -- CMD [ARG...]`, what an editor terminal runs for `bash`.

It reads the spec the agent put in its environment (`launcher_env`), applies the same sandbox a local spawn gets
(namespaces, read-only protected paths, Landlock) and execs the command with those variables removed. It refuses
to run anything without a spec: a launcher started by hand, or by an editor that dropped the environment, must not
run a command unconfined. If the agent has already exited, nothing runs either; if it exits later, the namespace's
init kills the command (with namespaces; without them the command is on its own once exec'd).
"""

from __future__ import annotations

import os
import sys

from runtime.sandbox.child import SETUP_FAILED, SETUP_PREFIX, Capabilities, Plan
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
    plan.report_r = report_r
    plan.run(parent_pid=None, keep=(report_r,), agent_pidfd=agent_fd)  # never returns: execs or exits
    return SETUP_FAILED


if __name__ == "__main__":
    sys.exit(main())
