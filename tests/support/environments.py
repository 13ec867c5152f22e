"""The environments users run the agent in, built for a test: each is a command line to run the agent under.

- `refusing(...)`: a seccomp filter (`tests/support/refuse.py`) that refuses user namespaces (Docker's default
  profile), Landlock (a kernel without it), its enforcement, or mounts (a user namespace without capabilities, as
  Ubuntu's AppArmor restriction leaves one).
- `chroot(...)`: a real rbind chroot in a private mount namespace (root only): the kernel refuses user namespaces to
  a chrooted process.

`unavailable(why)`: a test whose environment cannot be built here skips, and fails instead where
`GATEWRIGHT_REQUIRE_ENVIRONMENTS=1` (CI): a skip must never hide that the environment was not tested.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

from tests.support import refuse
from tests.support.refuse import ARCHES

REFUSE = str(Path(refuse.__file__).resolve())

REQUIRE = os.environ.get("GATEWRIGHT_REQUIRE_ENVIRONMENTS") == "1"


def unavailable(why: str) -> NoReturn:
    if REQUIRE:
        pytest.fail(f"GATEWRIGHT_REQUIRE_ENVIRONMENTS=1, and this environment cannot be built: {why}")
    pytest.skip(why)


def refusing(*whats: str) -> list[str]:
    if platform.machine() not in ARCHES:
        unavailable(f"no seccomp syscall table for {platform.machine()}")
    probe = subprocess.run(
        [sys.executable, REFUSE, ",".join(whats), "--", "true"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode:
        unavailable(f"the seccomp filter cannot be installed: {probe.stderr.strip()}")
    return [sys.executable, REFUSE, ",".join(whats), "--"]


def chroot(root: Path, cwd: Path) -> list[str]:
    """Run in a real chroot of the whole system at `root` (an empty directory), entering `cwd` inside it."""
    if os.geteuid() != 0:
        unavailable("a chroot needs root")
    for tool in ("unshare", "mount", "chroot"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed")
    root.mkdir(parents=True, exist_ok=True)
    script = 'mount --make-rprivate / && mount --rbind / "$0" && exec chroot "$0" sh -c \'cd "$0" && exec "$@"\' "$@"'
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(root), "/", "true"], capture_output=True, timeout=30
    )
    if probe.returncode:
        unavailable(f"no chroot here: {probe.stderr.decode(errors='replace').strip()}")
    return ["unshare", "-m", "sh", "-c", script, str(root), str(cwd)]
