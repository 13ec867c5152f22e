"""What the model is told about where it works (runtime.context, runtime.instructions): project instructions
(the AGENTS.md chain, fallbacks, limits, nested files attached when touched), the environment block, the system
prompt; end to end through a real `gatewright acp` and the local fake OpenAI server, reading the request bodies the
provider receives."""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
from pathlib import Path

import pytest
from acp import text_block

from runtime import instructions as ins
from runtime.context import SessionContext, git_state
from runtime.loop import DEFAULT_SYSTEM_PROMPT
from tests.e2e.test_models_acp import OPENAI_KEY, RecordingClient, agent_env, spawn, start
from tests.support.fake_providers import OPENAI_PATH, Reply, openai_stream


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=30,
    )


def _context(root: Path, mode: str = "safe", **kw) -> SessionContext:
    return SessionContext(os.path.realpath(root), lambda: mode, **kw)


# ---- the chain -------------------------------------------------------------------------------------------------
def test_the_workspace_agents_md_is_in_the_system_prompt_after_the_base_prompt(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Run `make check` before you finish.\n")
    prompt = _context(tmp_path).system_prompt("BASE")
    assert prompt.startswith("BASE\n\n# Project instructions")
    assert "## AGENTS.md (applies to the whole workspace)\n\nRun `make check` before you finish." in prompt


def test_without_instruction_files_the_prompt_says_there_are_none(tmp_path):
    assert "There is no AGENTS.md" in _context(tmp_path).system_prompt("B")


def test_the_chain_runs_from_the_git_root_down_to_the_workspace_nearest_last(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "AGENTS.md").write_text("outer rule\n")
    ws = tmp_path / "pkg" / "app"
    ws.mkdir(parents=True)
    (tmp_path / "pkg" / "CLAUDE.md").write_text("middle rule\n")
    (ws / "AGENTS.md").write_text("inner rule\n")
    prompt = _context(ws).system_prompt("B")
    assert prompt.index("outer rule") < prompt.index("middle rule") < prompt.index("inner rule")
    assert f"applies to the whole project at {os.path.realpath(tmp_path)}, this workspace included" in prompt


def test_agents_md_wins_over_the_fallback_names_and_an_empty_one_does_not_count(tmp_path):
    (tmp_path / "CLAUDE.md").write_text("claude text\n")
    (tmp_path / "GEMINI.md").write_text("gemini text\n")
    ctx = _context(tmp_path)
    assert "claude text" in ctx.system_prompt("B") and "gemini text" not in ctx.system_prompt("B")
    (tmp_path / "AGENTS.md").write_text("")
    assert "claude text" in ctx.system_prompt("B")
    (tmp_path / "AGENTS.md").write_text("agents text\n")
    prompt = ctx.system_prompt("B")
    assert "agents text" in prompt and "claude text" not in prompt


def test_an_agents_md_linking_out_of_the_project_is_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-TOKEN-123\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").symlink_to(secret)
    prompt = _context(ws).system_prompt("B")
    assert "SECRET-TOKEN-123" not in prompt and "There is no AGENTS.md" in prompt


def test_a_fifo_named_agents_md_does_not_block_the_prompt(tmp_path):
    os.mkfifo(tmp_path / "AGENTS.md")
    assert "There is no AGENTS.md" in _context(tmp_path).system_prompt("B")


def test_a_long_agents_md_is_cut_at_the_limit_and_says_where_the_rest_is(tmp_path):
    (tmp_path / "AGENTS.md").write_text("start\n" + "x" * (ins.MAX_CHAIN_BYTES * 3) + "\nEND-MARKER\n")
    prompt = _context(tmp_path).system_prompt("B")
    assert "start" in prompt and "END-MARKER" not in prompt
    assert "longer than the 32 KiB shown here" in prompt
    assert len(prompt) < ins.MAX_CHAIN_BYTES + 3000


def test_an_edited_agents_md_is_read_again_and_an_unchanged_one_is_not(tmp_path, monkeypatch):
    f = tmp_path / "AGENTS.md"
    f.write_text("first\n")
    ctx = _context(tmp_path)
    assert "first" in ctx.system_prompt("B")
    reads = []
    real = ins.read_instruction
    monkeypatch.setattr(ins, "read_instruction", lambda *a, **k: reads.append(a) or real(*a, **k))
    ctx.system_prompt("B")
    assert reads == []  # unchanged: only stat
    f.write_text("second, longer\n")
    assert "second, longer" in ctx.system_prompt("B") and reads


# ---- nested files ----------------------------------------------------------------------------------------------
def test_nested_files_are_listed_and_attached_once_outer_first_when_a_path_under_them_is_touched(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "AGENTS.md").write_text("rules for a\n")
    (tmp_path / "a" / "b" / "AGENTS.md").write_text("rules for b\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "GEMINI.md").write_text("rules for c\n")
    root = os.path.realpath(tmp_path)
    ctx = _context(tmp_path)
    prompt = ctx.system_prompt("B")
    assert "`a/AGENTS.md`, `a/b/AGENTS.md`, `c/GEMINI.md`" in prompt
    assert "rules for a" not in prompt  # listed, not inlined
    seen: dict = {}
    note = ctx.attachments([f"{root}/a/b/x.py"], seen)
    assert note.index("rules for a") < note.index("rules for b") and "rules for c" not in note
    assert "Instructions for files under a/b/" in note
    assert ctx.attachments([f"{root}/a/b/y.py", f"{root}/a/z.py"], seen) == ""
    (tmp_path / "a" / "AGENTS.md").write_text("rules for a, changed\n")
    assert "rules for a, changed" in ctx.attachments([f"{root}/a/z.py"], seen)
    assert ctx.attachments([f"{root}/top.py"], seen) == ""  # the root's own file is in the system prompt


def test_the_nested_listing_honours_gitignore(tmp_path):
    (tmp_path / "vendor" / "lib").mkdir(parents=True)
    (tmp_path / "vendor" / "lib" / "AGENTS.md").write_text("vendored\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "AGENTS.md").write_text("ours\n")
    (tmp_path / ".gitignore").write_text("vendor/\n")
    assert ins.list_nested(str(tmp_path)) == ["src/AGENTS.md"]


# ---- environment ---------------------------------------------------------------------------------------------
def test_the_environment_block_names_workspace_os_shell_date_git_mode_and_sandbox(tmp_path):
    ctx = _context(tmp_path, "auto", sandbox=lambda: "Landlock active (test)", today=lambda: datetime.date(2026, 3, 4))
    env = ctx.system_prompt("B").split("# Environment", 1)[1]
    assert f"- Workspace root: {os.path.realpath(tmp_path)}" in env
    assert "- Operating system: Linux" in env
    assert "- Shell: commands run with `/bin/bash -c COMMAND`" in env
    assert "- Date: 2026-03-04 (Wednesday)" in env
    assert "- Git: not a git repository" in env
    assert "- Approval mode: `auto`: Runs without asking" in env
    assert "- Sandbox: Landlock active (test)" in env


def test_a_mode_change_shows_at_the_next_model_call(tmp_path):
    mode = ["safe"]
    ctx = SessionContext(str(tmp_path), lambda: mode[0])
    assert "`safe`" in ctx.system_prompt("B")
    mode[0] = "read-only"
    assert "`read-only`" in ctx.system_prompt("B")


def test_a_sandbox_probe_that_fails_does_not_break_the_prompt(tmp_path):
    def broken() -> str:
        raise RuntimeError("probe")

    assert "- Sandbox: unknown (RuntimeError)" in _context(tmp_path, sandbox=broken).system_prompt("B")


def test_git_state_is_branch_and_clean_or_dirty(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "trunk")
    (tmp_path / "f.txt").write_text("1\n")
    _git(tmp_path, "add", "f.txt")
    _git(tmp_path, "commit", "-qm", "one")
    assert git_state(str(tmp_path)).line == "branch `trunk`, clean"
    (tmp_path / "f.txt").write_text("2\n")
    assert git_state(str(tmp_path)).line == "branch `trunk`, uncommitted changes"


def test_looking_at_git_state_never_runs_the_repositorys_fsmonitor_hook(tmp_path):
    _git(tmp_path, "init", "-q")
    marker = tmp_path.parent / f"{tmp_path.name}-fsmonitor-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    _git(tmp_path, "config", "core.fsmonitor", str(hook))
    git_state(str(tmp_path))
    assert not marker.exists()


def test_git_state_of_a_workspace_inside_a_repository_reads_the_repository_above_it(tmp_path):
    """The workspace is a subdirectory of the project: the sandboxed git may read the project (its `.git` and the
    work tree above the workspace) to tell the branch and the changes there."""
    _git(tmp_path, "init", "-q", "-b", "trunk")
    (tmp_path / "top.txt").write_text("1\n")
    (tmp_path / "sub").mkdir()
    _git(tmp_path, "add", "top.txt")
    _git(tmp_path, "commit", "-qm", "one")
    assert git_state(str(tmp_path / "sub")).line == "branch `trunk`, clean"
    (tmp_path / "top.txt").write_text("2\n")
    assert git_state(str(tmp_path / "sub")).line == "branch `trunk`, uncommitted changes"


def test_git_state_follows_the_includes_of_the_users_own_git_configuration(tmp_path, monkeypatch):
    """`~/.gitconfig` including `~/.gitconfig.local` (outside what the sandbox grants every command): git fails on
    an include it cannot read, so the agent's own git is granted the user's includes."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    (home / ".gitconfig").write_text("[include]\n\tpath = ~/.gitconfig.local\n")
    (home / ".gitconfig.local").write_text("[init]\n\tdefaultBranch = fromlocal\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    _git(tmp_path, "init", "-q", str(ws))
    assert git_state(str(ws)).line == "branch `fromlocal` (no commits yet), clean"


@pytest.mark.anyio
async def test_git_and_the_nested_listing_are_looked_at_once_per_turn_not_per_model_call(tmp_path, monkeypatch):
    import runtime.context as context_mod

    calls = []
    monkeypatch.setattr(context_mod, "git_state", lambda root: calls.append(root) or context_mod.GitState("x"))
    ctx = _context(tmp_path)
    await ctx.enter_turn()
    for _ in range(5):
        ctx.system_prompt("B")
    await ctx.enter_turn()  # a subagent's turn inside the session's: nothing is looked at again
    ctx.exit_turn()
    ctx.exit_turn()
    assert len(calls) == 1
    await ctx.enter_turn()
    ctx.exit_turn()
    assert len(calls) == 2


@pytest.mark.anyio
async def test_a_look_started_before_the_session_existed_is_the_one_its_first_turn_uses(tmp_path, monkeypatch):
    """`look_early` (ACP's session/new, before it assembles the session) starts the look; the session's `prefetch`
    adopts it instead of looking again, and it starts the repository watch once git is done; a look for another
    workspace, or one too old, is not adopted."""
    import runtime.context as context_mod
    from runtime.repositories import RepositoryWatch

    calls = []
    monkeypatch.setattr(context_mod, "git_state", lambda root: calls.append(root) or context_mod.GitState("early"))
    other = tmp_path / "other"
    other.mkdir()
    context_mod.look_early(str(other))
    context_mod.look_early(str(tmp_path))
    watch = RepositoryWatch([str(tmp_path)])
    ctx = SessionContext(str(tmp_path), lambda: "safe", "sandbox: test", repositories=watch)
    ctx.prefetch()
    await ctx.enter_turn()
    ctx.exit_turn()
    assert sorted(calls) == sorted([str(other.resolve()), str(tmp_path.resolve())])  # one look each, no second
    assert ctx.git.line == "early"
    watch.ready()
    assert watch.is_ready
    clock = [0.0]
    monkeypatch.setattr(context_mod.time, "monotonic", lambda: clock[0])
    context_mod.look_early(str(tmp_path))
    clock[0] = context_mod.PREFETCH_FRESH_S + 0.5
    later = _context(tmp_path)
    later.prefetch()
    later._prefetched.join()  # type: ignore[union-attr]
    assert len(calls) == 4  # too old to adopt: the session looked again


@pytest.mark.anyio
async def test_a_turn_right_after_the_prefetch_uses_it_and_a_later_one_looks_again(tmp_path, monkeypatch):
    """`prefetch` (a new ACP session's follow-up) looks at git and the nested instructions on threads; the first turn
    uses that look if it started at most PREFETCH_FRESH_S before the turn, so what the model is told is still the
    state at the start of the turn; an older prefetch is dropped and the turn looks again."""
    import runtime.context as context_mod

    calls = []
    monkeypatch.setattr(context_mod, "git_state", lambda root: calls.append(root) or context_mod.GitState("x"))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "AGENTS.md").write_text("nested\n")
    ctx = _context(tmp_path)
    ctx.prefetch()
    await ctx.enter_turn()
    ctx.exit_turn()
    assert len(calls) == 1 and ctx.nested == ("pkg/AGENTS.md",) and ctx.git.line == "x"
    clock = [0.0]
    monkeypatch.setattr(context_mod.time, "monotonic", lambda: clock[0])
    ctx.prefetch()
    ctx._prefetched.join()  # type: ignore[union-attr]
    (tmp_path / "pkg" / "AGENTS.md").unlink()  # changed after the prefetch, before the turn
    clock[0] = context_mod.PREFETCH_FRESH_S + 0.5
    await ctx.enter_turn()
    ctx.exit_turn()
    assert len(calls) == 3 and ctx.nested == ()  # looked again: the turn sees the file is gone


def test_the_system_prompt_covers_tools_errors_approvals_and_the_sandbox():
    p = DEFAULT_SYSTEM_PROMPT
    for tool in (
        "read_file",
        "grep",
        "glob",
        "edit",
        "apply_patch",
        "write_file",
        "bash",
        "update_plan",
        "update_agents_md",
        "delegate_explore",
        "ask_user",
    ):
        assert f"`{tool}`" in p, tool
    for phrase in (
        "read a file before you edit it",
        "Never claim a success that a tool result did not show",
        "TOOL_ERROR:",
        "`UserDeclined`",
        "`PermissionDenied`",
        "`OutcomeUnknown`",
        "sandbox",
        "did not run",
        "small, verified steps",
    ):
        assert phrase in p, phrase


# ---- end to end: the request the provider receives --------------------------------------------------------------
def _system(body: dict) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return first["content"] if isinstance(first["content"], str) else "".join(p["text"] for p in first["content"])


@pytest.mark.anyio
async def test_the_provider_receives_instructions_and_environment_and_an_agents_md_edit_shows_next_prompt(tmp_path, fp):
    ws = tmp_path / "ws"
    (ws / "src" / "api").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("Project rule: tabs, never spaces.\n")
    (ws / "src" / "api" / "AGENTS.md").write_text("API rule: every handler is async.\n")
    (ws / "src" / "api" / "h.py").write_text("async def h(): ...\n")
    fp.openai(
        Reply(frames=openai_stream(tool_calls=[("call_1", "read_file", ['{"path": "src/api/h.py"}'])])),
        Reply(frames=openai_stream("Read it.")),
        Reply(frames=openai_stream("Second answer.")),
    )
    client = RecordingClient()
    env = agent_env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY=OPENAI_KEY)
    async with spawn(client, env, "--model", "openai:test-model", "--mode", "auto", cwd=tmp_path) as (conn, _p):
        _, sess = await start(conn, ws)
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("look")]), 30)
        assert resp.stop_reason == "end_turn"
        (ws / "AGENTS.md").write_text("Project rule: spaces now, four of them.\n")
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("again")]), 30)
        assert resp.stop_reason == "end_turn"
    first, after_tool, second_prompt = (r.body for r in fp.requests_to(OPENAI_PATH))
    system = _system(first)
    assert system.startswith(DEFAULT_SYSTEM_PROMPT)
    assert "Project rule: tabs, never spaces." in system
    assert "`src/api/AGENTS.md`" in system and "API rule" not in system
    assert f"- Workspace root: {ws.resolve()}" in system
    assert "- Approval mode: `auto`" in system and "- Git: not a git repository" in system
    assert f"- Date: {datetime.date.today():%Y-%m-%d}" in system
    tool_result = after_tool["messages"][-1]
    assert tool_result["role"] == "tool" and "async def h()" in tool_result["content"]
    assert "API rule: every handler is async." in tool_result["content"]
    system2 = _system(second_prompt)
    assert "Project rule: spaces now, four of them." in system2 and "tabs, never spaces" not in system2
    # The attached nested text stays in the history, and is not attached a second time.
    assert str(second_prompt["messages"]).count("API rule: every handler is async.") == 1


@pytest.mark.anyio
async def test_a_subagent_gets_the_project_instructions_too(tmp_path, fp):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Project rule for everyone: no new dependencies.\n")
    fp.openai(
        Reply(frames=openai_stream(tool_calls=[("call_1", "delegate_explore", ['{"task": "where is main?"}'])])),
        Reply(frames=openai_stream("main is nowhere.")),
        Reply(frames=openai_stream("The subagent says main is nowhere.")),
    )
    client = RecordingClient()
    env = agent_env(tmp_path, OPENAI_BASE_URL=fp.url + "/v1", OPENAI_API_KEY=OPENAI_KEY)
    async with spawn(client, env, "--model", "openai:test-model", cwd=tmp_path) as (conn, _p):
        _, sess = await start(conn, ws)
        resp = await asyncio.wait_for(conn.prompt(session_id=sess.session_id, prompt=[text_block("find")]), 30)
        assert resp.stop_reason == "end_turn"
    _, child, _ = (r.body for r in fp.requests_to(OPENAI_PATH))
    system = _system(child)
    assert system.startswith("You are gatewright's read-only exploration subagent.")
    assert "Project rule for everyone: no new dependencies." in system
    assert f"- Workspace root: {ws.resolve()}" in system
    assert [t["function"]["name"] for t in child["tools"]] == ["read_file", "glob", "grep"]


def test_the_terminal_host_builds_the_same_context(tmp_path):
    from runtime import build_runtime

    (tmp_path / "AGENTS.md").write_text("terminal rule\n")
    runtime = build_runtime(
        session_id="cli",
        cwd=str(tmp_path),
        model=None,
        gateway=None,  # type: ignore[arg-type]
        mode=lambda: "read-only",
    ).runtime
    prompt = runtime.current_system_prompt()
    assert prompt.startswith(DEFAULT_SYSTEM_PROMPT) and "terminal rule" in prompt and "`read-only`" in prompt


def test_a_registered_secret_in_an_agents_md_never_reaches_the_prompt(tmp_path):
    import secrets as pysecrets

    from runtime import secrets

    value = "sk-agents-md-" + pysecrets.token_hex(8)
    secrets.register_values([value])
    (tmp_path / "AGENTS.md").write_text(f"Use the key {value} for the staging API.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "AGENTS.md").write_text(f"Also {value}.\n")
    ctx = _context(tmp_path)
    prompt = ctx.system_prompt("B")
    assert value not in prompt and "Use the key <redacted> for the staging API." in prompt
    note = ctx.attachments([str((tmp_path / "sub" / "x.py").resolve())], {})
    assert "Also <redacted>." in note and value not in note
