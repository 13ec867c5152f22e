"""A proven read-only command that reaches a secret file through a word the analysis cannot see through asks too, as
one naming the file does: braces (`.{env,x}`), `$'...'` quoting, `~+` (the working directory), a glob that leads to
a link to one, and a git pathspec pattern (`'*env'`, `':(icase).ENV'`, an exclusion). Before, each ran unasked in
`safe`, and a transform put the key into the frames past redaction.

Through the real binary, judged by effects: the user rejects every question, and no transformed form of the key, nor
a run of it, is in any frame, transcript, state file or log line. Ordinary words of the same shapes still run
unasked.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.test_security_secret_files import make_key, no_form_anywhere, outputs, run_calls, secret_workspace
from tests.security.world import answer_with

pytestmark = [pytest.mark.timeout(120)]


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


THROUGH_WORDS = [
    "cat .{env,nothing} | tr 0-9a-f a-p",
    "cat ..{/ws/.env,} | tr 0-9a-f a-p",
    "tr 0-9a-f a-p < ~+/.env",
    "tr 0-9a-f a-p < $'\\x2eenv'",
    "cat $'\\x2eenv' | tr 0-9a-f a-p",
    "cat .e\\nv$'' | tr 0-9a-f a-p",
    "cat lin* | tr 0-9a-f a-p",
    "git show HEAD -- '.e*' | tr 0-9a-f a-p",
    "git log -p -- '*env' | tr 0-9a-f a-p",
    "git show HEAD -- ':(icase).ENV' | tr 0-9a-f a-p",
    "git log -p -- ':!notes.txt' | tr 0-9a-f a-p",
]


@pytest.mark.parametrize("mode", ["safe", "auto"])
def test_a_secret_file_reached_through_braces_quoting_tilde_links_or_pathspecs_asks_and_reaches_no_sink(
    spawn, workspace, tmp_path, mode
):
    key = make_key()
    forms = secret_workspace(workspace, key)
    calls = [bash(c) for c in THROUGH_WORDS]
    agent, _, found = run_calls(
        spawn, workspace, tmp_path, key, calls, mode=mode, responder=answer_with("reject_continue")
    )
    asked = [m["params"]["toolCall"]["rawInput"]["command"] for m in agent.agent_requests]
    assert [c for c in THROUGH_WORDS if c not in asked] == []
    no_form_anywhere(found, key, forms)


def test_ordinary_words_of_the_same_shapes_still_run_unasked(spawn, workspace, tmp_path):
    key = make_key()
    secret_workspace(workspace, key)
    calls = [bash("cat {notes,README}.{txt,md}"), bash("cat ~+/notes.txt"), bash("git log -p -- '*.txt'")]
    agent, sid, _ = run_calls(spawn, workspace, tmp_path, key, calls, mode="safe")
    assert not [m for m in agent.agent_requests if m["method"] == "session/request_permission"]
    assert all("line one" in out for out in outputs(agent, sid)), outputs(agent, sid)
