"""Protected before it exists: a `.git` or `.gatewright` a call creates, at a root or nested anywhere in the
workspace, is found before the next call runs and the user is asked whether to keep it (not kept: removed); the
sandbox protects every one that exists when a command starts, nested repositories' `.git` included (in ignored
directories too).

Effects only: whether the path is still there after the turn, and whether a later command could write into it.
The commands create and write these paths without naming them (an analysis that saw the name would ask first in
every mode), as a script would.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.world import GIT, answer_with, attack, bash, init_repository, make_world

pytestmark = [pytest.mark.timeout(120)]

needs_sandbox = pytest.mark.skipif("not sandbox_active()", reason="no Landlock sandbox on this machine")


def sandbox_active() -> bool:
    from runtime.sandbox import support

    return support().active


def keeping(keep: bool) -> Any:
    """A user who approves every call and answers the question about a new repository with `keep`."""
    approve = answer_with("allow_once")

    def respond(msg: dict[str, Any]) -> Any:
        ids = [o["optionId"] for o in msg["params"]["options"]]
        if "keep" in ids:
            return {"outcome": {"outcome": "selected", "optionId": "keep" if keep else "remove"}}
        return approve(msg)

    return respond


GIT_INIT = " ".join(GIT) + " init -q"
# Creating the protected names without writing them in the command: the name is put together at run time.
MAKE_NESTED = f"{GIT_INIT} vendor/lib"
MAKE_ROOT = 'python3 -c \'import subprocess; subprocess.run(["git", "init", "-q", "."])\''
MAKE_SETTINGS = 'python3 -c \'import os; os.makedirs("." + "gatewright/commands")\''
MAKE_IN_IGNORED = f"mkdir -p node_modules/pkg && {GIT_INIT} node_modules/pkg"


@pytest.mark.parametrize("mode", ["auto", "safe"])
@pytest.mark.parametrize(
    ("command", "made"),
    [
        (MAKE_NESTED, "vendor/lib/.git"),
        (MAKE_ROOT, ".git"),
        (MAKE_SETTINGS, ".gatewright"),
        (MAKE_IN_IGNORED, "node_modules/pkg/.git"),
    ],
    ids=["nested", "root", "settings", "ignored"],
)
def test_a_repository_a_command_creates_is_removed_unless_the_user_keeps_it(spawn, tmp_path, mode, command, made):
    world = make_world(tmp_path, git=False)
    (world.ws / ".gitignore").write_text("node_modules/\n")
    run = attack(spawn, world, [bash(command), bash("echo next")], mode=mode, responder=keeping(False))
    assert "next" in run.output(1), "the next call did not run"
    assert not (world.ws / made).exists() and not (world.ws / made).is_symlink()


def test_a_call_approved_for_writing_the_protected_path_needs_no_second_question(spawn, tmp_path):
    """`git init .` names `.git` as written (a protected path): it asks in every mode, and its approval covers the
    repository it makes."""
    world = make_world(tmp_path, git=False)
    run = attack(spawn, world, [bash(f"{GIT_INIT} .")], mode="auto", responder=keeping(False))
    assert (world.ws / ".git").is_dir()
    assert not any("keep" in [o["optionId"] for o in q["params"]["options"]] for q in run.questions)


def test_a_repository_the_user_keeps_stays_and_is_protected_from_then_on(spawn, tmp_path):
    world = make_world(tmp_path, git=False)
    write_config = 'python3 -c \'open("vendor/lib/." + "git/config", "a").write("[x]\\n")\''
    run = attack(spawn, world, [bash(MAKE_NESTED), bash(write_config)], mode="auto", responder=keeping(True))
    config = world.ws / "vendor" / "lib" / ".git" / "config"
    assert config.exists(), run.output(0)
    if sandbox_active():
        assert "[x]" not in config.read_text()


@needs_sandbox
@pytest.mark.parametrize("where", ["vendor/lib", "node_modules/pkg"], ids=["nested", "ignored"])
def test_the_sandbox_protects_a_nested_repository_that_exists_when_a_command_starts(spawn, tmp_path, where):
    """The user's project holds a nested repository (in an ignored directory too): a command that writes into its
    `.git` without naming it is refused by the sandbox, in `auto`."""
    world = make_world(tmp_path)
    (world.ws / ".gitignore").write_text("node_modules/\n")
    nested = world.ws / where
    nested.mkdir(parents=True)
    (nested / "f.txt").write_text("f\n")
    init_repository(nested, "f.txt")
    config = nested / ".git" / "config"
    before = config.read_text()
    hooks = nested / ".git" / "hooks"
    script = (
        f"import os; os.chdir({where!r}); d = '.' + 'git'; open(d + '/config', 'a').write('[x]');"
        " open(d + '/hooks/post-checkout', 'w').write('#!/bin/sh')"
    )
    run = attack(spawn, world, [bash(f"python3 -c {script!r}")], mode="auto", responder=keeping(True))
    assert run.results(), "the command did not run"
    assert config.read_text() == before
    assert not (hooks / "post-checkout").exists()


def test_in_read_only_mode_no_command_can_create_one(spawn, tmp_path):
    world = make_world(tmp_path, git=False)
    attack(spawn, world, [bash(MAKE_NESTED), bash(MAKE_SETTINGS)], mode="read-only")
    assert not (world.ws / "vendor").exists() and not (world.ws / ".gatewright").exists()


def test_a_repository_made_outside_and_moved_in_is_found_too(spawn, tmp_path):
    """Made in the session's temp dir (writable) and renamed into the workspace: the directory that appears is new,
    so everything under it is looked at."""
    world = make_world(tmp_path, git=False)
    command = f'd="$TMPDIR/x/deep" && mkdir -p "$d" && {" ".join(GIT)} init -q "$d" && mv "$TMPDIR/x" moved'
    run = attack(spawn, world, [bash(command), bash("echo next")], mode="auto", responder=keeping(False))
    assert "next" in run.output(1)
    assert (world.ws / "moved" / "deep").is_dir(), run.output(0)
    assert not (world.ws / "moved" / "deep" / ".git").exists()


def test_a_repository_a_background_process_makes_between_calls_is_found_too(spawn, tmp_path):
    world = make_world(tmp_path, git=False)
    calls = [
        # (made aside and moved in whole: a check between two steps of `git init` would see half a repository)
        bash(f'{GIT_INIT} "$TMPDIR/r" && mv "$TMPDIR/r" bg && touch made && sleep 60', action="start"),
        bash("for i in $(seq 200); do [ -e made ] && break; sleep 0.05; done; echo waited"),
        bash("echo last"),
    ]
    run = attack(spawn, world, calls, mode="auto", responder=keeping(False))
    assert "last" in run.output(2)
    assert (world.ws / "made").exists() and not (world.ws / "bg" / ".git").exists()
