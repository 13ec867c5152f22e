"""The options of a permission question, each saying exactly what it covers, and what choosing one means.

The first option of each kind has the standard meaning the CLI contract promises (`allow_once`, `allow_always` for
the identical call in this session, `reject_once` that stops the turn, `reject_always` for the identical call in this
session). Further options follow the first of their kind: the same rule in this project (persisted), a command
everywhere, edits under a directory in this session, and a rejection that lets the model try another way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from permissions.gateway import PermissionOption
from permissions.policy import CallFacts
from permissions.rules import MatchKind, RuleAction, Scope, is_within

REJECT_AND_CONTINUE = "reject_continue"


@dataclass(frozen=True, slots=True)
class Choice:
    """One offered option and its meaning. `remember` is the scope of the rule it adds, if any."""

    option: PermissionOption
    allow: bool
    remember: Scope | None = None
    match: MatchKind = "exact"
    directory: str | None = None  # for an "edits under DIR" rule
    label: str = ""  # what the remembered rule covers
    keep_going: bool = False  # a rejection that lets the model continue (it gets a TOOL_ERROR)

    @property
    def action(self) -> RuleAction:
        return "allow" if self.allow else "deny"


def edit_directory(facts: CallFacts) -> str | None:
    """The directory an "edits under DIR" rule would name for this call, or None when none is sensible.

    Only for calls that purely write ordinary files inside the workspace, in a directory below the root (a rule for
    the whole workspace is `auto` mode, not a remembered rule).
    """
    if facts.effect != "write" or not facts.paths or facts.dangerous or not facts.root:
        return None
    if not all(p.writes and p.klass == "inside" for p in facts.paths):
        return None
    try:
        common = os.path.commonpath([os.path.dirname(p.path) for p in facts.paths])
    except ValueError:
        return None
    if common == facts.root or not is_within(common, facts.root):
        return None
    return common


def build_choices(facts: CallFacts, summary: str, persistent: bool) -> tuple[Choice, ...]:
    """The options for one question. `persistent`: project (and global) rules can be stored."""
    what = summary
    allow: list[Choice] = [
        Choice(PermissionOption("allow_once", "Allow once", "allow_once"), True),
        Choice(PermissionOption("allow_always", f"Always allow {what} in this session", "allow_always"), True,
               "session", label=what),
    ]
    if persistent:
        allow.append(Choice(PermissionOption("allow_always_project", f"Always allow {what} in this project",
                                             "allow_always"), True, "project", label=what))
    directory = edit_directory(facts)
    if directory is not None:
        shown = os.path.relpath(directory, facts.root) + "/"
        label = f"edits under `{shown}`"
        allow.append(Choice(PermissionOption("allow_under", f"Always allow {label} in this session", "allow_always"),
                            True, "session", "under", directory, label))
    if persistent and facts.effect == "execute" and facts.portable_key and not facts.dangerous:
        allow.append(Choice(PermissionOption("allow_always_global", f"Always allow {what} everywhere",
                                             "allow_always"), True, "global", label=what))
    reject: list[Choice] = [
        Choice(PermissionOption("reject_once", "Reject and stop", "reject_once"), False),
        Choice(PermissionOption(REJECT_AND_CONTINUE, "Reject, and let the agent try another way", "reject_once"),
               False, keep_going=True),
        Choice(PermissionOption("reject_always", f"Always reject {what} in this session", "reject_always"), False,
               "session", label=what),
    ]
    if persistent:
        reject.append(Choice(PermissionOption("reject_always_project", f"Always reject {what} in this project",
                                              "reject_always"), False, "project", label=what))
    return (*allow, *reject)
