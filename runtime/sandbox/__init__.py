"""The operating-system sandbox under every process the agent starts: `permissions` decides, this enforces.

- `support()`: what this system offers (cached): Landlock's ABI, whether unprivileged user/pid/mount/net
  namespaces work, a one-line `describe()` for `/status`. `GATEWRIGHT_SANDBOX=off` forces "no sandbox" (as on a
  machine without Landlock or namespaces), `GATEWRIGHT_SANDBOX=landlock` forces Landlock without namespaces (as where
  unprivileged user namespaces are forbidden); both exist for tests and for a user who must opt out.
- `build_spec(confinement, roots, tmpdir=...)`: the `SandboxSpec` of one call (what it may read, write, reach).
- `baseline_readable(path)`: reads the sandbox always allows (the policy need not ask for them).
- `grants`: what the user's `[sandbox]` table lets every command also read and write, and the toolchains'
  per-project caches.
- `network_hosts()`: the user's `[sandbox] network` (None: every host); `network_unheld()`: why this system cannot
  hold it ("" when a network namespace can).
- `session_tmpdir(session_id)` / `remove_session_tmpdir`: the per-session private temp dir (`TMPDIR`).
- `client.Spawner`: the agent's connection to the sandbox helper (`helper`), which forks every sandboxed child
  (`child`); `runtime.processes` is its only user.
- `__main__`: the launcher that editor terminals run (`launcher_env`), and `boot`: how it and the helper start, as
  isolated interpreters of the install.

Backends. Only Linux is built: Landlock for files, TCP, signals and abstract sockets; namespaces for containment
(pid), protected paths (mount), the network (net). A macOS backend would slot in at the same two seams: the helper's
probe reports it (`/usr/bin/sandbox-exec` present), and `child.Plan` execs `sandbox-exec -p PROFILE -- CMD` instead
of entering namespaces and Landlock, the profile generated from the same `SandboxSpec`: `(deny default)`,
`(allow file-read* (subpath …))` per read tree, `(allow file-write* (subpath …))` per write tree followed by
`(deny file-write* (subpath …))` per protected path (Seatbelt, unlike Landlock, can carve a subtree out, so no mount
trick is needed), `(deny network*)` unless the network is allowed, `(allow process-fork) (allow process-exec)`. The
kill guarantee would rest on the helper as here without namespaces: process groups, a subreaper-like watch of what
left them, and the helper's end when the agent's socket closes.
"""

from __future__ import annotations

import os
import sys

from runtime.sandbox._frozen import Frozen
from runtime.sandbox.spec import (
    SandboxSpec,
    baseline,
    baseline_readable,
    build_spec,
    child_env,
    remove_all_tmpdirs,
    remove_session_tmpdir,
    session_tmpdir,
)

__all__ = [
    "SandboxSpec",
    "Support",
    "baseline",
    "baseline_readable",
    "build_spec",
    "child_env",
    "harden_agent",
    "describe_network",
    "network_hosts",
    "network_unheld",
    "prestart",
    "remove_all_tmpdirs",
    "remove_session_tmpdir",
    "session_tmpdir",
    "support",
]

ENV_SWITCH = "GATEWRIGHT_SANDBOX"


# What each Landlock ABI adds that the sandbox uses (landlock.py), in a user's words.
_ABI_FEATURES = (
    (1, "files"),
    (2, "renames"),
    (3, "truncation"),
    (4, "TCP"),
    (6, "scoped signals and sockets"),
)


class Support(Frozen):
    """What this system lets the sandbox do, layer by layer, and why a layer is missing (in a user's words).

    `active`: processes are confined (Landlock works). `namespaces`: user, pid, mount, ipc and net namespaces work
    (they come together: without a user namespace an unprivileged process can make none of the others). What each
    missing layer costs (`costs`) is what the modes make up for by asking more (docs/sandbox.md)."""

    __slots__ = ("landlock_abi", "namespaces", "netfilter", "forced", "landlock_why", "namespaces_why", "note", "root")
    landlock_abi: int
    namespaces: bool
    netfilter: bool  # without a net namespace, a seccomp filter leaves a call without network approval no socket
    forced: str | None  # the value of GATEWRIGHT_SANDBOX that limited it
    landlock_why: str  # why Landlock is missing ("" when it holds)
    namespaces_why: str  # why the namespaces are missing
    note: str  # what happened to the helper (restarted, a weaker one after a failed start), "" when nothing
    root: bool  # the agent runs as root

    def __init__(
        self,
        landlock_abi: int = 0,
        namespaces: bool = False,
        netfilter: bool = False,
        forced: str | None = None,
        landlock_why: str = "",
        namespaces_why: str = "",
        note: str = "",
        root: bool = False,
    ) -> None:
        self._init(
            landlock_abi=landlock_abi,
            namespaces=namespaces,
            netfilter=netfilter,
            forced=forced,
            landlock_why=landlock_why,
            namespaces_why=namespaces_why,
            note=note,
            root=root,
        )

    @property
    def active(self) -> bool:
        return self.landlock_abi > 0

    @property
    def network_held(self) -> bool:
        """A call without network approval reaches no network at all: a net namespace, or where there is none the
        seccomp filter that refuses it every socket but unix and netlink ones (Landlock alone cuts TCP, from ABI 4,
        and nothing else)."""
        return self.namespaces or self.netfilter

    @property
    def complete(self) -> bool:
        return self.active and self.namespaces

    def landlock_words(self) -> str:
        if not self.active:
            return f"no Landlock ({self.landlock_why or 'not available'})"
        feats = [name for abi, name in _ABI_FEATURES if self.landlock_abi >= abi]
        return f"Landlock ABI {self.landlock_abi} ({', '.join(feats)})"

    def costs(self) -> list[str]:
        """What each missing layer costs, one line each (empty when everything holds)."""
        out: list[str] = []
        if not self.active:
            out.append(
                "no Landlock: commands are not confined to the workspace (they read and write whatever this user "
                "can), so commands ask more: proven read-only ones that name paths outside or paths only known "
                "when they run, and git commands that may run programs of the repository"
            )
        if not self.namespaces:
            if self.active:
                out.append(
                    "no mount namespace: .git and the agent's settings stay read-only by granting a workspace root "
                    "entry by entry, so a command cannot create a new file directly in a root"
                )
            out.append(
                "no pid namespace: what a command starts is ended by its process group and an environment marker; "
                "a process that leaves both can outlive the command"
            )
            if self.active and self.landlock_abi >= 4:
                out.append(
                    "no net namespace: without network approval only TCP is cut (UDP and raw sockets are not), so "
                    "git commands that may run programs of the repository ask first"
                )
            else:
                out.append(
                    "no net namespace: a command reaches the network whether or not it was approved for it, so git "
                    "commands that may run programs of the repository ask first"
                )
            if self.active and self.landlock_abi < 6:
                out.append("Landlock ABI < 6 and no pid namespace: a command can signal the agent's other processes")
        if self.root and not self.namespaces:
            out.append(
                "running as root without a user namespace: commands keep root's file access where they are "
                "allowed to write, and have none of root's other privileges"
                if self.active
                else "running as root with no sandbox: a command has every privilege of root, can trace the agent "
                "and read its memory, so every command asks"
            )
        return out

    def describe(self) -> str:
        """One line: what holds, what is missing and why."""
        if self.forced == "off":
            return f"sandbox: off ({ENV_SWITCH}=off): commands run unconfined and more calls ask"
        if not self.active and not self.namespaces:
            why = self.landlock_why or "no Landlock"
            if self.namespaces_why and self.namespaces_why != why:
                why += f"; no namespaces: {self.namespaces_why}"
            return f"sandbox: not available ({why}): commands run unconfined and more calls ask"
        if not self.active:
            return (
                f"sandbox: {self.landlock_words()}: commands run unconfined, in user/pid/mount/net namespaces "
                "(contained, no network unless approved, .git read-only); more calls ask"
            )
        text = f"sandbox: {self.landlock_words()}"
        if self.namespaces:
            return text + ", user/pid/mount/net namespaces"
        why = f"{ENV_SWITCH}=landlock" if self.forced == "landlock" else self.namespaces_why or "unavailable"
        return (
            f"{text}, no namespaces: {why}. Commands are confined to the workspace; they cannot create files "
            "directly in a workspace root, UDP is not cut, and a process that leaves its group can outlive them"
        )

    def status_lines(self) -> list[str]:
        """For /status: the summary, then what each missing layer costs, then what happened to the helper."""
        lines = ["S" + self.describe()[1:]]
        lines += [f"Sandbox cost: {c}" for c in self.costs()]
        if self.note:
            lines.append(f"Sandbox helper: {self.note}")
        return lines


def support() -> Support:
    """What the sandbox helper for the current GATEWRIGHT_SANDBOX found (it is started once per process: ~20–30
    ms, or none after `prestart`; a helper that died is started again, so this can become weaker mid-session)."""
    if not sys.platform.startswith("linux"):
        return Support(landlock_why="not Linux", namespaces_why="not Linux")
    from runtime.sandbox.client import Spawner

    sp = Spawner.get()
    key = (sp, sp.caps, sp.note)
    cached = _last.get(key)
    if cached is None:
        _last.clear()
        cached = _last[key] = Support(
            sp.caps.landlock_abi,
            sp.caps.namespaces,
            netfilter=sp.caps.netfilter,
            forced=sp.forced,
            landlock_why=sp.landlock_why,
            namespaces_why=sp.namespaces_why,
            note=sp.note,
            root=os.geteuid() == 0,
        )
    return cached


_last: dict[object, Support] = {}


def network_hosts() -> tuple[str, ...] | None:
    """The user's `[sandbox] network` in force (`runtime.config.use_sandbox`; None: commands with the network reach
    every host). Unlike the table's read and write grants it applies whatever file it came from: it only narrows."""
    from runtime import config  # the agent's side only: the helper never asks

    return config.sandbox_in_force().settings.network


def describe_network() -> str | None:
    """One line for `/status` about `[sandbox] network`, or None when it is not set."""
    hosts = network_hosts()
    if hosts is None:
        return None
    names = ", ".join(hosts) or "no host"
    unheld = network_unheld()
    held = "held by a network namespace"
    if unheld:
        held = unheld.removeprefix("[sandbox] network is ") + "; such commands ask first"
    return f"Network: commands reach only {names} ([sandbox] network), through the sandbox's proxy; {held}"


def network_unheld() -> str:
    """Why the sandbox cannot hold `[sandbox] network` on this system, in one line ("" when it can: a command then
    gets a network namespace whose only way out is the proxy)."""
    found = support()
    if found.namespaces:
        return ""
    port = "TCP is allowed to the proxy's port on every address"
    if found.landlock_abi >= 4 and found.netfilter:  # the seccomp filter refuses every socket but TCP (`seccomp`)
        return f"[sandbox] network is not fully held here (no network namespace): {port}"
    if found.landlock_abi >= 4:
        return (
            f"[sandbox] network is not fully held here (no network namespace): UDP, DNS included, is not blocked, "
            f"and {port}"
        )
    why = f"Landlock ABI {found.landlock_abi} has no TCP rules" if found.active else "no sandbox"
    return (
        f"[sandbox] network is not held here (no network namespace, {why}): a command that ignores the proxy "
        "variables reaches every host"
    )


def prestart() -> None:
    """Start the sandbox helper on a thread (for warm-up: the first command then does not wait for it)."""
    if sys.platform.startswith("linux"):
        from runtime.sandbox.client import prestart as start

        start()


def harden_agent() -> None:
    """Once at start-up of `acp`/`run`: the agent becomes not dumpable, so that no other process of the user (a
    sandboxed one above all) can ptrace it or open its `/proc/<pid>/mem`, `environ` or `fd/*`. (No child subreaper
    is needed in the agent: the sandbox helper is the subreaper of everything it spawns.)"""
    if not sys.platform.startswith("linux"):
        return
    from runtime.sandbox._libc import PR_SET_DUMPABLE, libc

    libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
