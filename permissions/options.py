"""The options of a permission question, each saying exactly what it covers, and what choosing one means.

Clients read these options in different ways (some show every label, some map each kind to a button and take the
first or the last option of that kind), so a question offers at most five, one of each kind except a second
`reject_once` right after the first:

    allow_once       "Allow once"
    allow_always     "Always allow “npm test” in this session"         (the session's scope setting, see below)
    reject_once      "Reject once and stop"                           (the turn stops)
    reject_once      "Reject, and let the agent try another way"      (`REJECT_AND_CONTINUE`: the model gets an error)
    reject_always    "Always reject “npm test” in this session"

Whichever option of a kind a client takes, it gets the same scope. The scope of the two "always" options is the
session's setting "Remember approvals in" (`RuleStore.remember`: this session, this project, everywhere; default this
session), and each label names the scope it really uses in plain text: a call tied to this agent process (input to a
background process) is remembered for this session only, "everywhere" applies only to a command with a portable key
and no reason for a closer look (others fall back to this project), and without a usable rules file everything is
remembered for this session; each fallback says so in its label. Labels are plain text: a Markdown code span in a
tool's summary becomes typographic quotes, since several clients print labels literally. A host that can show a form
follows "Reject, and let the agent try another way" with an optional "why" (`REASON_QUESTION`), which the model gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from permissions.gateway import PermissionOption
from permissions.policy import CallFacts
from permissions.rules import RuleAction, Scope, effective_scope

REJECT_AND_CONTINUE = "reject_continue"

# After "Reject, and let the agent try another way", a host that can show a form asks why (ACP has no field for it);
# the answer reaches the model with the rejection. Skipping it, or a host that cannot ask, changes nothing else.
REASON_QUESTION = "Tell the agent why (optional)"
REASON_FORM = {
    "type": "object",
    "properties": {
        "reason": {
            "type": "string",
            "title": "Why?",
            "maxLength": 1000,
            "description": "Sent to the agent with the rejection, so it can try another way.",
        }
    },
}
MAX_REASON = 1000

REMEMBER_CHOICES: tuple[tuple[Scope, str, str], ...] = (
    ("session", "This session", "“Always allow” and “Always reject” answers last until this session ends."),
    (
        "project",
        "This project",
        "“Always” answers are saved for this project (its workspace root) and apply to "
        "its later sessions too (gatewright permissions list shows them).",
    ),
    (
        "global",
        "Everywhere",
        "“Always” answers about a command are saved for every project; other answers are saved for this project.",
    ),
)


@dataclass(frozen=True, slots=True)
class Choice:
    """One offered option and its meaning. `remember` is the scope of the rule it adds, if any."""

    option: PermissionOption
    allow: bool
    remember: Scope | None = None
    label: str = ""  # what the remembered rule covers
    keep_going: bool = False  # a rejection that lets the model continue (it gets a TOOL_ERROR)

    @property
    def action(self) -> RuleAction:
        return "allow" if self.allow else "deny"


def plain(summary: str) -> str:
    """A tool's summary ("`npm test`", "this edit to `a.py`") as plain text: the code span's backticks become
    typographic quotes. Only the outermost pair is markup: backticks inside a command are part of the command."""
    first, last = summary.find("`"), summary.rfind("`")
    if first < 0 or first == last:
        return summary
    return f"{summary[:first]}“{summary[first + 1 : last]}”{summary[last + 1 :]}"


def remember_scope(facts: CallFacts, wanted: Scope, persistent: bool) -> tuple[Scope, str]:
    """Where an "always" answer about this call is remembered, and the plain words its label ends with."""
    if wanted == "session":
        return "session", "in this session"
    if facts.session_only:
        return "session", "in this session (it names a process of this session)"
    if not persistent:
        return "session", "in this session (remembered rules cannot be saved now)"
    scope = effective_scope(facts, wanted)
    if scope == "project" and wanted == "global":
        if facts.effect != "execute":
            return "project", "in this project (only commands are remembered everywhere)"
        return "project", "in this project (this command is not remembered everywhere)"
    return scope, "everywhere" if scope == "global" else "in this project"


def build_choices(facts: CallFacts, summary: str, persistent: bool, remember: Scope = "session") -> tuple[Choice, ...]:
    """The options for one question. `persistent`: project (and global) rules can be stored now; `remember`: the
    session's "Remember approvals in" setting."""
    what = plain(summary)
    scope, where = remember_scope(facts, remember, persistent)
    return (
        Choice(PermissionOption("allow_once", "Allow once", "allow_once"), True),
        Choice(PermissionOption("allow_always", f"Always allow {what} {where}", "allow_always"), True, scope, summary),
        Choice(PermissionOption("reject_once", "Reject once and stop", "reject_once"), False),
        Choice(
            PermissionOption(REJECT_AND_CONTINUE, "Reject, and let the agent try another way", "reject_once"),
            False,
            keep_going=True,
        ),
        Choice(
            PermissionOption("reject_always", f"Always reject {what} {where}", "reject_always"), False, scope, summary
        ),
    )
