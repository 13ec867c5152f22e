"""What the operating-system sandbox lets one approved call do: the policy's decision turned into a confinement.

Approval decides *whether* a call runs; the confinement decides *where its processes may reach* while it runs, so
that a wrong analysis of a command cannot exceed what was approved. It is pure data, decided here from the same
facts the policy saw, and enforced by `runtime.sandbox` in every process the call starts.

The rule (docs/sandbox.md's matrix documents it for users):
- A call proven read-only (a shell command the analysis proved harmless, or any call in `read-only` mode) writes
  nothing and reaches no network, even inside the workspace.
- Any other call that runs (approved by the user, allowed by a remembered rule, or by the mode) may write the
  workspace and the session's private temp dir, and has the network.
- Paths outside the workspace, and protected paths inside it (`.git/`, the agent's settings), are reachable only when
  the call named them and was allowed with them in view: reads of every such path it named, writes of those it
  named as written (never for a proven read-only call).

Network by name: when the user's config names hosts (`[sandbox] network`, `CallFacts.network_hosts`), a call that
has the network reaches only those, through the sandbox's proxy; a call without the network is not changed by it.
Where the sandbox cannot hold that limit (no network namespace: UDP, DNS included, is not blocked and Landlock's TCP
rule matches the proxy's port on every address; or nothing restricts TCP at all), the runtime says so in
`CallFacts.network_unheld`, and the policy asks before such a call runs in every mode (`policy.decide`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from permissions.modes import ApprovalMode
    from permissions.policy import CallFacts


@dataclass(frozen=True, slots=True)
class Confinement:
    """The sandbox of one call. The defaults are an ordinary command: workspace writes, no network, nothing extra."""

    write: bool = True  # False: nothing is writable, the workspace and the temp dir included
    network: bool = False
    extra_read: tuple[str, ...] = ()  # resolved paths outside the baseline readable set the call may read
    extra_write: tuple[str, ...] = ()  # resolved outside or protected paths the call may write
    hosts: tuple[str, ...] | None = None  # with `network`: the only hosts it may reach (None: every host)

    @property
    def read_only(self) -> bool:
        return not self.write and not self.network


READ_ONLY = Confinement(write=False, network=False)


def confinement_for(facts: CallFacts, mode: ApprovalMode | None) -> Confinement:
    """The confinement of a call the policy (or the user) allowed to run in `mode`."""
    if facts.proven_read_only or mode == "read-only":
        reads = tuple(dict.fromkeys(p.path for p in facts.paths if p.klass != "inside"))
        return Confinement(write=False, network=False, extra_read=reads)
    reads = tuple(dict.fromkeys(p.path for p in facts.paths if p.klass != "inside"))
    writes = tuple(dict.fromkeys(p.path for p in facts.paths if p.klass != "inside" and p.writes))
    return Confinement(write=True, network=True, extra_read=reads, extra_write=writes, hosts=facts.network_hosts)
