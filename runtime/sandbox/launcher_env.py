"""What the agent hands the sandbox launcher through an editor terminal's command line (and nothing else does).

`terminal/create` runs `python -I -S -c BOOT INSTALL_ROOT --spec JSON -- CMD...` (`boot`: an isolated interpreter
running this install's `runtime.sandbox.__main__`, whatever the terminal's cwd and environment hold). The JSON
carries the call's sandbox minus the baseline reads (the launcher adds the baseline of the environment the command
really runs in), the capabilities the agent's helper found (so the launcher does not probe again), and the agent's
pid with its start time (so the launcher's namespace ends when the agent does, though the editor, not the agent, is
its parent). An argument, not the environment: an editor that does not pass `env` still passes `args`.
"""

from __future__ import annotations

import json
import os

from runtime.sandbox.boot import LAUNCHER_BOOT, interpreter
from runtime.sandbox.spec import SandboxSpec, baseline


def start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, its identity."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def launcher_command(spec: SandboxSpec, argv: list[str]) -> tuple[str, list[str]]:
    """(command, args) for `terminal/create` that run `argv` under `spec`."""
    from runtime.sandbox import support

    sup = support()
    base = set(baseline())
    pid = os.getpid()
    payload = {
        "read": [p for p in spec.read if p not in base],
        "write": list(spec.write),
        "protected": list(spec.protected),
        "network": spec.network,
        "tmpdir": spec.tmpdir,
        "grace": spec.grace,
        "hosts": spec.hosts,
        "proxy_port": spec.proxy_port,
        "proxy_path": spec.proxy_path,
        "caps": [sup.landlock_abi, sup.namespaces, sup.netfilter],
        "agent": [pid, start_time(pid)],
    }
    exe, *args = interpreter(LAUNCHER_BOOT)  # isolated: no workspace file can stand in for the launcher's code
    return exe, [*args, "--spec", json.dumps(payload, separators=(",", ":")), "--", *argv]


def parse(text: str) -> tuple[SandboxSpec, tuple[int, bool, bool], tuple[int, str | None] | None]:
    """The launcher's side. Raises ValueError on anything malformed."""
    d = json.loads(text)
    if not isinstance(d, dict):
        raise ValueError("not an object")
    hosts = d.get("hosts")
    port, path = d.get("proxy_port"), d.get("proxy_path")
    spec = SandboxSpec(
        read=tuple(dict.fromkeys((*baseline(), *map(str, d.get("read") or ())))),
        write=tuple(map(str, d.get("write") or ())),
        protected=tuple(map(str, d.get("protected") or ())),
        network=bool(d.get("network")),
        tmpdir=d.get("tmpdir"),
        grace=d.get("grace"),
        hosts=None if hosts is None else tuple(map(str, hosts)),
        proxy_port=None if port is None else int(port),
        proxy_path=None if path is None else str(path),
    )
    abi, ns, *rest = d.get("caps") or (0, False)
    agent = d.get("agent")
    return spec, (int(abi), bool(ns), bool(rest and rest[0])), (int(agent[0]), agent[1]) if agent else None
