"""`gatewright permissions list` as text: aligned columns, and a project rule said from where the reader is."""

from __future__ import annotations

from permissions.report import format_rules
from permissions.rules import Rule

RULES = [
    Rule("p-1", "allow", "bash", "k1", "`npm test`", "project", project="/home/me/app"),
    Rule("g-22", "deny", "bash", "k2", "`git push --force`", "global"),
]


def test_the_columns_line_up_whatever_the_lengths():
    lines = format_rules(RULES).splitlines()
    assert lines[0].index("ACTION") == lines[1].index("allow") == lines[2].index("deny")
    assert lines[0].index("COVERS") == lines[1].index("`npm") == lines[2].index("`git")
    assert lines[0].index("SCOPE") == lines[1].index("in the") == lines[2].index("everywhere")


def test_a_project_rule_is_in_this_project_only_when_listed_from_it():
    assert "in the project /home/me/app" in format_rules(RULES)  # listed from anywhere: before, "in this project"
    assert "in this project (/home/me/app)" in format_rules(RULES, here="/home/me/app")
    assert "in the project /home/me/app" in format_rules(RULES, here="/elsewhere")
