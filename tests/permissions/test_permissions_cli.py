"""`gatewright permissions list|revoke`: the terminal view of remembered project and global rules."""

from __future__ import annotations

import json

from permissions.policy import CallFacts
from permissions.rules import RuleStore
from permissions.store import RuleDatabase
from tests.support.permissions_helpers import run_gatewright


def test_rules_are_listed_and_revoked_from_the_terminal(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    rules = RuleStore(RuleDatabase(str(tmp_path)), str(proj))
    p = rules.add("allow", CallFacts("bash", "execute", "k1"), "`npm test`", "project")
    g = rules.add("deny", CallFacts("bash", "execute", "k2", portable_key="k2"), "`git push`", "global")

    out = run_gatewright("permissions", "list", state=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert f"{p.id}  allow   `npm test`  in the project {proj}" in out.stdout  # listed from no project
    assert f"{g.id}  deny    `git push`  everywhere" in out.stdout
    here = run_gatewright("permissions", "list", "--project", str(proj), state=str(tmp_path)).stdout
    assert f"{p.id}  allow   `npm test`  in this project ({proj})" in here
    listed = [
        json.loads(line)
        for line in run_gatewright("permissions", "list", "--json", state=str(tmp_path)).stdout.splitlines()
    ]
    assert {r["id"] for r in listed} == {p.id, g.id}
    elsewhere = run_gatewright("permissions", "list", "--project", str(tmp_path), state=str(tmp_path)).stdout
    assert g.id in elsewhere and p.id not in elsewhere

    done = run_gatewright("permissions", "revoke", p.id, state=str(tmp_path))
    assert done.returncode == 0 and f"Revoked {p.id}." in done.stdout
    assert [r.id for r in rules.list()] == [g.id], "the running session sees the revocation at once"
    again = run_gatewright("permissions", "revoke", p.id, state=str(tmp_path))
    assert again.returncode == 1 and "no remembered rule" in again.stderr


def test_with_no_rules_the_list_says_so(tmp_path):
    out = run_gatewright("permissions", "list", "--state-dir", str(tmp_path / "empty"), state=str(tmp_path))
    assert out.stdout.strip() == "No remembered rules."
