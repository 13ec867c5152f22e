"""Static rules that keep the protocol stream clean (DESIGN.md: ruff T201, no `print`, in the packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_print_calls_in_the_packages():
    """stdout in `acp` mode carries ACP frames only: the packages never call print (they write to chosen streams)."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "T201", "--no-cache",
                           "acp_server", "runtime", "permissions"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
