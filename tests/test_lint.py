"""Static rules that keep the code honest (ARCHITECTURE.md, "Style"): the project's full ruff configuration, one
formatter (`ruff format`), and no `print` in the packages (stdout in `acp` mode carries ACP frames only). `.ci/run` runs
ruff and mypy --strict itself; these tests keep ruff's verdict visible in the test run too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_print_calls_in_the_packages():
    """The packages never call print (they write to chosen streams)."""
    proc = _ruff("--select", "T201", "acp_server", "runtime", "permissions")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_whole_repository_is_clean_under_the_projects_ruff_configuration():
    proc = _ruff(".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_whole_repository_is_formatted_by_ruff_format():
    """One formatter (`ruff format`, configured in pyproject.toml); the generated wire models are excluded there."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
