"""The workspace boundary's classification (`runtime.workspace.Workspace.classify`): which paths are protected, so
that writing them asks in every mode."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.workspace import Workspace


@pytest.mark.parametrize(
    ("rel", "klass"),
    [
        ("src/a.py", "inside"),
        (".git/hooks/pre-commit", "protected"),
        ("vendor/lib/.git/config", "protected"),
        (".gatewright/commands/x.md", "protected"),
        # A file system that ignores case (macOS, a Windows drive under WSL) opens `.git/hooks` for these.
        (".GIT/hooks/pre-commit", "protected"),
        ("vendor/.Git/config", "protected"),
        (".GateWright/commands/x.md", "protected"),
        (".github/workflows/ci.yml", "inside"),
        ("git/notes.txt", "inside"),
        (".gitignore", "inside"),
    ],
)
def test_a_path_is_protected_by_its_components_in_any_case(tmp_path: Path, rel: str, klass: str) -> None:
    ws = Workspace(str(tmp_path))
    assert ws.classify(os.path.join(os.path.realpath(tmp_path), rel))[0] == klass


def test_the_agent_private_paths_are_protected_where_a_root_holds_them(tmp_path: Path) -> None:
    home = os.path.realpath(tmp_path)
    state, config_file = os.path.join(home, ".local/state/gatewright"), os.path.join(home, "dots/gw.toml")
    ws = Workspace(home, private=[state, config_file])
    assert ws.classify(os.path.join(state, "gatewright.sqlite3"))[0] == "protected"
    assert ws.classify(config_file)[0] == "protected"
    assert ws.classify(os.path.join(home, "dots/other.toml"))[0] == "inside"
    assert ws.classify(os.path.join(home, ".local/state/other"))[0] == "inside"
