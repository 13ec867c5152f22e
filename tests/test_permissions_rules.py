"""Remembered rules: what each kind covers, scopes, persistence shared between processes, revocation."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from permissions.policy import CallFacts, PathFact, decide
from permissions.rules import RuleStore, covered_by_directory, is_within
from permissions.store import RuleDatabase, state_dir
from tests.permissions_helpers import REPO


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {REPO!r})\n" + code, *args]

WS = "/ws"


def bash_facts(cmd: str, root: str = WS) -> CallFacts:
    return CallFacts("bash", "execute", f"bash:run:{root}:{cmd}", portable_key=f"bash:run:<workspace>:{cmd}",
                     root=root)


def edit_facts(*paths: str, klass: str = "inside", tool: str = "edit") -> CallFacts:
    return CallFacts(tool, "write", f"{tool}:{paths}", tuple(PathFact(p, klass, True) for p in paths),  # type: ignore[arg-type]
                     root=WS)


@pytest.mark.parametrize(("path", "directory", "inside"), [
    ("/ws/src", "/ws/src", True),
    ("/ws/src/a.py", "/ws/src", True),
    ("/ws/src/deep/a.py", "/ws/src/", True),
    ("/ws/src-evil/a.py", "/ws/src", False),
    ("/ws/srcx", "/ws/src", False),
    ("/ws", "/ws/src", False),
])
def test_directory_containment_is_by_path_components(path, directory, inside):
    assert is_within(path, directory) is inside


def test_an_edits_under_rule_covers_only_ordinary_writes_all_below_the_directory():
    assert covered_by_directory(edit_facts("/ws/src/a.py", "/ws/src/b/c.py"), "/ws/src")
    assert not covered_by_directory(edit_facts("/ws/src/a.py", "/ws/lib/c.py"), "/ws/src")
    assert not covered_by_directory(edit_facts("/ws/src-evil/a.py"), "/ws/src")
    assert not covered_by_directory(edit_facts("/ws/src/.git/hooks/x", klass="protected"), "/ws/src")
    assert not covered_by_directory(CallFacts("bash", "execute", "k", (PathFact("/ws/src", "inside", True),)),
                                    "/ws/src")
    assert not covered_by_directory(CallFacts("mcp_x", "write", "k"), "/ws/src"), "no paths: nothing proven"
    dangerous = CallFacts("edit", "write", "k", (PathFact("/ws/src/a", "inside", True),), dangerous=("x",))
    assert not covered_by_directory(dangerous, "/ws/src")


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
    u = rules.add("allow", edit_facts("/ws/src/x"), "edits under `src/`", "session", "under", "/ws/src")
    listed = rules.list()
    assert [(r.id, r.scope, r.action, r.label) for r in listed] == [
        (s.id, "session", "allow", "`a`"), (u.id, "session", "allow", "edits under `src/`"),
        (p.id, "project", "deny", "`b`")]
    assert p.describe() == "always reject `b` in this project"
    assert rules.revoke(p.id) and rules.revoke(s.id) and not rules.revoke("nope")
    assert [r.id for r in rules.list()] == [u.id]


def test_an_unreadable_database_means_no_rule_and_the_call_asks(tmp_path):
    (tmp_path / "permissions.db").write_bytes(b"this is not a database" * 100)
    rules = RuleStore(RuleDatabase(str(tmp_path)), "/ws")
    assert decide(bash_facts("make"), "safe", rules).action == "ask"
    rule = rules.add("allow", bash_facts("make"), "`make`", "project")
    assert rule.scope == "session", "a rule that cannot be persisted still holds for this session"


def test_the_state_dir_follows_the_option_then_the_environment_then_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("GATEWRIGHT_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == str(tmp_path / "xdg" / "gatewright")
    monkeypatch.setenv("GATEWRIGHT_STATE_DIR", str(tmp_path / "env"))
    assert state_dir() == str(tmp_path / "env")
    assert state_dir(str(tmp_path / "opt")) == str(tmp_path / "opt")


def test_the_rules_file_is_private_to_its_owner(tmp_path):
    import os
    import stat

    RuleStore(RuleDatabase(str(tmp_path / "st")), "/ws").add("allow", bash_facts("a"), "`a`", "project")
    assert stat.S_IMODE(os.stat(tmp_path / "st" / "permissions.db").st_mode) == 0o600


def test_sqlite_is_not_imported_on_the_start_up_path_nor_by_creating_a_session_object():
    code = ("import acp_server.cli, acp_server.server, acp_server.agent, acp_server.session, permissions.store, "
            "permissions.audit\nassert 'sqlite3' not in sys.modules, 'sqlite3 imported at start-up'")
    subprocess.run(_python(code), check=True, timeout=60)
