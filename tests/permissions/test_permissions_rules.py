"""Remembered rules: what each covers, scopes, persistence shared between processes, revocation, and failing closed
when the rules file cannot be read."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from permissions.policy import SESSION_ONLY_KEY, CallFacts, RulesUnknown, decide
from permissions.rules import RuleStore
from permissions.store import RuleDatabase, RulesUnreadable, state_dir
from tests.support.permissions_helpers import REPO


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {REPO!r})\n" + code, *args]


WS = "/ws"


def bash_facts(cmd: str, root: str = WS) -> CallFacts:
    return CallFacts("bash", "execute", f"bash:run:{root}:{cmd}", portable_key=f"bash:run:<workspace>:{cmd}", root=root)


def write_facts(path: str = "/ws/a.py") -> CallFacts:
    return CallFacts("write_file", "write", f"write_file:{path}:sha256:1", root=WS, portable_key=f"write_file:{path}")


def process_facts(pid: str = "proc_1", data: str = "hello") -> CallFacts:
    key = f"{SESSION_ONLY_KEY}bash:write:{pid}:{data}"
    return CallFacts("bash", "execute", key, portable_key=key, root=WS)


def test_session_rules_are_exact_and_deny_beats_allow():
    rules = RuleStore()
    f = bash_facts("npm test")
    rules.add("allow", f, "`npm test`")
    assert decide(f, "safe", rules).action == "allow"
    assert decide(bash_facts("npm test; rm -rf x"), "safe", rules).action == "ask"
    rules.add("deny", f, "`npm test`")
    assert decide(f, "auto", rules).action == "deny"


def test_without_a_database_persisted_scopes_fall_back_to_the_session():
    rules = RuleStore()
    rule = rules.add("allow", bash_facts("make"), "`make`", "project")
    assert rule.scope == "session" and rules.list() == [rule] and not rules.persistent


def test_project_rules_persist_per_workspace_root_and_global_rules_everywhere(tmp_path):
    db = RuleDatabase(str(tmp_path))
    a = RuleStore(db, "/ws")
    p = a.add("allow", bash_facts("make"), "`make`", "project")
    g = a.add("allow", bash_facts("npm test"), "`npm test`", "global")
    assert p.id.startswith("p-") and p.project == "/ws" and g.project is None
    fresh = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert decide(bash_facts("make"), "safe", fresh).rule_id == p.id
    elsewhere = RuleStore(RuleDatabase(str(tmp_path)), "/other")
    assert decide(bash_facts("make", "/other"), "safe", elsewhere).action == "ask"
    assert decide(bash_facts("npm test", "/other"), "safe", elsewhere).rule_id == g.id
    assert [r.id for r in elsewhere.list()] == [g.id]


def test_remembering_the_same_thing_twice_keeps_one_rule(tmp_path):
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    rules.add("allow", bash_facts("make"), "`make`", "project")
    second = rules.add("allow", bash_facts("make"), "`make`", "project")
    assert [r.id for r in rules.list()] == [second.id]


def test_a_revocation_in_one_process_applies_to_another_at_its_next_decision(tmp_path):
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    rule = rules.add("allow", bash_facts("make"), "`make`", "project")
    assert decide(bash_facts("make"), "safe", rules).action == "allow"
    code = textwrap.dedent(f"""
        from permissions.store import RuleDatabase
        assert RuleDatabase({str(tmp_path)!r}).revoke({rule.id!r})
    """)
    subprocess.run(_python(code), check=True, timeout=30)
    assert decide(bash_facts("make"), "safe", rules).action == "ask"


def test_two_processes_adding_rules_at_once_lose_none(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from permissions.policy import CallFacts
        from permissions.rules import RuleStore
        from permissions.store import RuleDatabase
        rules = RuleStore(RuleDatabase({str(tmp_path)!r}), "/ws")
        for i in range(40):
            rules.add("allow", CallFacts("bash", "execute", f"k{{sys.argv[1]}}-{{i}}"), "x", "project")
    """)
    procs = [subprocess.Popen(_python(code, str(n))) for n in range(3)]
    assert all(p.wait(60) == 0 for p in procs)
    assert len(RuleDatabase(str(tmp_path)).all()) == 120


def test_the_session_api_lists_and_revokes_rules_of_every_scope(tmp_path):
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    s = rules.add("allow", bash_facts("a"), "`a`")
    p = rules.add("deny", bash_facts("b"), "`b`", "project")
    g = rules.add("allow", bash_facts("c"), "`c`", "global")
    listed = rules.list()
    assert [(r.id, r.scope, r.action, r.label) for r in listed] == [
        (s.id, "session", "allow", "`a`"),
        (p.id, "project", "deny", "`b`"),
        (g.id, "global", "allow", "`c`"),
    ]
    assert p.describe() == "always reject `b` in this project"
    assert rules.revoke(p.id) and rules.revoke(s.id) and not rules.revoke("nope")
    assert [r.id for r in rules.list()] == [g.id]


# ---- what may be remembered where ------------------------------------------------------------------------------------
def test_a_call_tied_to_a_process_of_this_agent_is_remembered_for_the_session_only(tmp_path):
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert process_facts().session_only and not process_facts().everywhere_key
    for scope in ("project", "global"):
        rule = rules.add("allow", process_facts(), "bash write on proc_1", scope)  # type: ignore[arg-type]
        assert rule.scope == "session"
    assert RuleDatabase(str(tmp_path)).all() == [], "nothing tied to proc_1 reaches the rules file"
    fresh = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert decide(process_facts(), "manual", fresh).action == "ask"


def test_input_to_a_process_is_part_of_what_a_rule_covers():
    rules = RuleStore()
    rules.add("allow", process_facts(data="hello"), "x")
    assert decide(process_facts(data="hello"), "manual", rules).action == "allow"
    assert decide(process_facts(data="rm -rf ~"), "manual", rules).action == "ask"


def test_everywhere_is_for_commands_with_nothing_to_look_at_again_and_falls_back_to_the_project(tmp_path):
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert rules.add("allow", bash_facts("make"), "`make`", "global").scope == "global"
    assert rules.add("allow", write_facts(), "x", "global").scope == "project", "not a command"
    risky = CallFacts(
        "bash",
        "execute",
        "bash:run:/ws:k",
        portable_key="bash:run:<workspace>:k",
        root=WS,
        dangerous=("pipes a download into a shell",),
    )
    assert rules.add("allow", risky, "x", "global").scope == "project", "a command that needs a closer look"


def test_an_everywhere_approval_never_covers_a_call_that_needs_a_closer_look(tmp_path):
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    rules.add("allow", bash_facts("make"), "`make`", "global")
    elsewhere = RuleStore(RuleDatabase(str(tmp_path)), "/other")
    same_key_but_risky = CallFacts(
        "bash",
        "execute",
        "bash:run:/other:make",
        root="/other",
        dangerous=("x",),
        portable_key="bash:run:<workspace>:make",
    )
    assert decide(same_key_but_risky, "auto", elsewhere).action == "ask"


# ---- failing closed ------------------------------------------------------------------------------------------------
def _corrupt(path) -> None:
    path.write_bytes(b"this is not a database" * 100)


def test_an_unreadable_database_is_unknown_and_every_call_asks_in_every_mode(tmp_path):
    _corrupt(tmp_path / "permissions.db")
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert isinstance(rules.match(bash_facts("make")), RulesUnknown)
    for mode in ("manual", "safe", "auto"):
        decision = decide(bash_facts("make"), mode, rules)  # type: ignore[arg-type]
        assert decision.action == "ask", mode
        assert any("remembered rules cannot be read" in r for r in decision.asked_because)
    read = CallFacts("read_file", "read", "read_file:/ws/a:sha256:1", root=WS)
    assert decide(read, "safe", rules).action == "ask", "a remembered rejection might cover a read too"
    assert decide(bash_facts("make"), "read-only", rules).action == "deny", "read-only still refuses"
    assert rules.unknown and "permissions.db" in (rules.problem or "") and not rules.persistent


def test_a_remembered_rejection_in_a_file_that_became_corrupt_is_never_run_over_in_auto(tmp_path):
    db = RuleDatabase(str(tmp_path))
    RuleStore(db, "/ws").add("deny", bash_facts("make deploy"), "`make deploy`", "project")
    db.close()
    _corrupt(tmp_path / "permissions.db")
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert decide(bash_facts("make deploy"), "auto", rules).action == "ask"


def test_a_directory_where_the_rules_file_should_be_is_unreadable_too(tmp_path):
    (tmp_path / "permissions.db").mkdir()
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert decide(bash_facts("ls"), "auto", rules).action == "ask"
    with pytest.raises(RulesUnreadable):
        RuleDatabase(str(tmp_path)).all()


def test_a_stored_rule_that_makes_no_sense_makes_the_file_unreadable(tmp_path):
    db = RuleDatabase(str(tmp_path))
    RuleStore(db, "/ws").add("allow", bash_facts("make"), "`make`", "project")
    with db._db() as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute("UPDATE rules SET action = 'maybe'")
    assert isinstance(RuleStore(db, "/ws").match(bash_facts("make")), RulesUnknown)


def test_while_the_file_is_unreadable_this_sessions_own_answers_still_decide(tmp_path):
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    before = rules.add("allow", bash_facts("npm test"), "`npm test`")
    rules.add("deny", bash_facts("make deploy"), "`make deploy`")
    assert decide(bash_facts("npm test"), "auto", rules).action == "allow"
    rules.database.close()  # type: ignore[union-attr]  # the next read opens the corrupted file
    _corrupt(tmp_path / "permissions.db")
    assert decide(bash_facts("make deploy"), "auto", rules).action == "deny", "a session rejection holds"
    assert decide(bash_facts("npm test"), "auto", rules).action == "ask", (
        f"{before.id} was given before the file broke: a remembered rejection might now cover it"
    )
    rules.add("allow", bash_facts("npm test"), "`npm test`", "project")  # answered with the reason in view
    assert decide(bash_facts("npm test"), "auto", rules).action == "allow"


def test_a_state_dir_that_cannot_exist_holds_no_rules_and_saves_none(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rules = RuleStore(RuleDatabase(str(blocker / "state")), "/ws")
    assert rules.match(bash_facts("make")) is None, "no rules file can exist there: no rule, known"
    assert decide(bash_facts("make"), "auto", rules).action == "allow"
    assert not rules.persistent and not rules.unknown and "Not a directory" in (rules.problem or "")
    assert rules.add("allow", bash_facts("make"), "`make`", "project").scope == "session"


def test_a_rule_that_cannot_be_persisted_still_holds_for_this_session(tmp_path):
    _corrupt(tmp_path / "permissions.db")
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert decide(bash_facts("make"), "safe", rules).action == "ask"
    rule = rules.add("allow", bash_facts("make"), "`make`", "project")
    assert rule.scope == "session"
    assert decide(bash_facts("make"), "safe", rules).action == "allow"


def test_a_broken_database_is_said_once_in_one_line_without_a_traceback(tmp_path, caplog):
    import logging

    _corrupt(tmp_path / "permissions.db")
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    with caplog.at_level(logging.DEBUG):
        for _ in range(5):
            decide(bash_facts("make"), "auto", rules)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info is None
    assert "cannot be read" in warnings[0].getMessage() and "permissions.db" in warnings[0].getMessage()


def test_the_state_dir_follows_the_option_then_the_environment_then_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("GATEWRIGHT_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == str(tmp_path / "xdg" / "gatewright")
    monkeypatch.setenv("GATEWRIGHT_STATE_DIR", str(tmp_path / "env"))
    assert state_dir() == str(tmp_path / "env")
    assert state_dir(str(tmp_path / "opt")) == str(tmp_path / "opt")


def test_no_secret_in_a_remembered_command_reaches_the_rules_file(tmp_path):
    command = "curl -H 'Authorization: Bearer sk-live-abcdefghijklmnop' https://x.invalid"
    from runtime.tools.builtin.bash import BashTool
    from runtime.workspace import Workspace

    tool, ws = BashTool(), Workspace(str(tmp_path))
    key = tool.rule_key({"command": command}, ws)
    facts = CallFacts("bash", "execute", key, portable_key=key, root=str(tmp_path))
    RuleStore(RuleDatabase(str(tmp_path / "st")), str(tmp_path)).add(
        "allow", facts, tool.summary({"command": command}, ws), "project"
    )
    stored = (tmp_path / "st" / "permissions.db").read_bytes() + b"".join(
        f.read_bytes() for f in (tmp_path / "st").glob("permissions.db-*")
    )
    assert b"abcdefghijklmnop" not in stored and b"curl" in stored


def test_the_rules_file_is_private_to_its_owner(tmp_path):
    import os
    import stat

    RuleStore(RuleDatabase(str(tmp_path / "st")), "/ws").add("allow", bash_facts("a"), "`a`", "project")
    assert stat.S_IMODE(os.stat(tmp_path / "st" / "permissions.db").st_mode) == 0o600


def test_sqlite_is_not_imported_on_the_start_up_path_nor_by_creating_a_session_object():
    code = (
        "import acp_server.cli, acp_server.server, acp_server.agent, acp_server.session, permissions.store, "
        "permissions.audit\nassert 'sqlite3' not in sys.modules, 'sqlite3 imported at start-up'"
    )
    subprocess.run(_python(code), check=True, timeout=60)


def test_in_a_multi_root_workspace_each_root_is_this_project(tmp_path):
    """A call in the second root is remembered for that root, and a session whose roots include it (first or not)
    finds it; a session without that root does not."""
    db = RuleDatabase(str(tmp_path))
    both = RuleStore(db, "/ws", other_roots=("/lib",))
    rule = both.add("allow", bash_facts("make", "/lib"), "`make`", "project")
    assert rule.project == "/lib"
    assert decide(bash_facts("make", "/lib"), "safe", RuleStore(db, "/lib")).rule_id == rule.id
    assert decide(bash_facts("make", "/lib"), "safe", RuleStore(db, "/other", other_roots=("/lib",))).rule_id == rule.id
    assert decide(bash_facts("make", "/lib"), "safe", RuleStore(db, "/other")).action == "ask"
