"""What the agent hands the sandbox launcher through an editor terminal's environment (and nothing else does).

`terminal/create` runs `python -m runtime.sandbox -- CMD...` with these variables set: the spec, the capabilities
the agent's probe found (so the launcher does not probe again), and the agent's pid with its start time (so the
launcher's namespace ends when the agent does, even though the editor, not the agent, is its parent). The launcher
removes them before it execs the command.
"""

from __future__ import annotations

import os

from runtime.sandbox.spec import SandboxSpec

SPEC_ENV = "GATEWRIGHT_SANDBOX_SPEC"
CAPS_ENV = "GATEWRIGHT_SANDBOX_CAPS"
AGENT_ENV = "GATEWRIGHT_SANDBOX_AGENT"
ALL = (SPEC_ENV, CAPS_ENV, AGENT_ENV)


def start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, its identity."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[19].decode() if len(fields) > 19 else None


def launcher_env(env: dict[str, str], spec: SandboxSpec) -> dict[str, str]:
    from runtime.sandbox import support

    sup = support()
    env[SPEC_ENV] = spec.to_json()
    env[CAPS_ENV] = f"{sup.landlock_abi},{int(sup.namespaces)}"
    pid = os.getpid()
    env[AGENT_ENV] = f"{pid}:{start_time(pid) or ''}"
    return env
