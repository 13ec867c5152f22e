"""The agent's own git (the environment block's `git status`, at every turn's start and prefetched at session/new)
runs no program a repository configures, sandboxed or not.

The attack: a confined command (approved in `safe`, allowed in `auto`) makes a repository whose configuration names
programs (a clean filter and a long-running `process` filter on a tracked file git must read again, fsmonitor,
hooks, an external diff and a textconv driver, pagers, a credential helper, `core.sshCommand`), or plants them in a
nested repository the outer index records as a gitlink (which `git status` enters with a `git status` of its own).
The command cannot write outside the workspace; every program it names would. The next turn's look at the
workspace must leave no marker outside, with the sandbox and with `GATEWRIGHT_SANDBOX=off` (where disarming the
programs is all there is).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.world import GIT, World, answer_with, attack, bash, init_repository, make_world

pytestmark = [pytest.mark.timeout(120)]

# Every repository-configured program git could run, each leaving its own marker when it runs.
PROGRAMS = (
    ("filter.x.clean", "clean"),
    ("filter.x.smudge", "smudge"),
    ("filter.y.process", "process"),
    ("core.fsmonitor", "fsmonitor"),
    ("diff.external", "external_diff"),
    ("diff.z.textconv", "textconv"),
    ("diff.z.command", "diff_command"),
    ("core.pager", "pager"),
    ("pager.status", "pager_status"),
    ("credential.helper", "credential"),
    ("core.sshCommand", "ssh"),
    ("core.editor", "editor"),
    ("gpg.program", "gpg"),
)
HOOKS = ("post-index-change", "reference-transaction", "post-checkout", "pre-auto-gc", "post-rewrite")


def arm(repo: str, out: Path) -> str:
    """Shell lines that arm the repository at `repo` (relative to the command's cwd): every program of PROGRAMS and
    every hook leaves `out/MARK_<name>`; a tracked file keeps its size but not its mtime, so `git status` must read
    it again, through its filter."""
    lines = [
        f"cd {repo}",
        "touch -d 2001-01-01 f.txt g.txt",
        "printf 'f.txt filter=x diff=z\\ng.txt filter=y diff=z\\n' > .gitattributes",
        "mkdir -p .git/armed-hooks",
    ]
    for key, name in PROGRAMS:
        lines.append(f"git config {key} 'touch {out}/MARK_{name}; cat'")
    for hook in HOOKS:
        lines.append(f"printf '#!/bin/sh\\ntouch {out}/MARK_hook_{hook}\\n' > .git/armed-hooks/{hook}")
        lines.append(f"chmod +x .git/armed-hooks/{hook}")
    lines += [
        "git config core.hooksPath .git/armed-hooks",
        "git config status.submoduleSummary true",
        "cd - >/dev/null",
    ]
    return "\n".join(lines)


def make_repo(repo: str) -> str:
    """Shell lines that make a repository at `repo` with two committed files (before any program is armed)."""
    git = " ".join(GIT)
    return "\n".join(
        [
            f"mkdir -p {repo} && cd {repo} && {git} init -q .",
            "echo data > f.txt && echo more > g.txt",
            f"{git} add f.txt g.txt && {git} commit -qm one",
            "cd - >/dev/null",
        ]
    )


def markers(world: World) -> list[str]:
    return sorted(p.name for p in world.outside.iterdir() if p.name.startswith("MARK_"))


SANDBOXES = [pytest.param({}, id="sandboxed"), pytest.param({"GATEWRIGHT_SANDBOX": "off"}, id="GATEWRIGHT_SANDBOX=off")]


@pytest.mark.parametrize("mode", ["safe", "auto"])
@pytest.mark.parametrize("env", SANDBOXES)
def test_a_repository_a_command_made_runs_none_of_its_programs_in_the_agents_own_git(spawn, tmp_path, mode, env):
    world = make_world(tmp_path, git=False)
    script = f"set -e\n{make_repo('.')}\n{arm('.', world.outside)}\necho armed"
    run = attack(spawn, world, [bash(script)], mode=mode, responder=answer_with("allow_once"), env=env, followups=2)
    assert "armed" in run.output(0), run.output(0)
    assert markers(world) == []


@pytest.mark.parametrize("env", SANDBOXES)
def test_a_nested_repository_recorded_as_a_gitlink_runs_none_of_its_programs_either(spawn, tmp_path, env):
    """The command makes `vendor/lib` a repository, the workspace a repository recording it as a gitlink, and arms
    the nested one: the outer `git status` would enter it with a `git status` of its own."""
    world = make_world(tmp_path, git=False)
    git = " ".join(GIT)
    script = "\n".join(
        [
            "set -e",
            make_repo("vendor/lib"),
            f"{git} init -q . && {git} add README.md vendor/lib 2>/dev/null && {git} commit -qm outer",
            arm("vendor/lib", world.outside),
            "echo armed",
        ]
    )
    run = attack(spawn, world, [bash(script)], mode="auto", responder=answer_with("allow_once"), env=env, followups=2)
    assert "armed" in run.output(0), run.output(0)
    assert markers(world) == []


@pytest.mark.parametrize("env", SANDBOXES)
def test_an_existing_nested_repository_a_command_arms_runs_none_of_its_programs(spawn, tmp_path, env):
    """The user's project records an embedded repository as a gitlink; a command arms that nested repository (where
    the sandbox lets it: its `.git` is protected as the workspace's own is, so the arming may fail)."""
    world = make_world(tmp_path, git=False)
    lib = world.ws / "vendor" / "lib"
    lib.mkdir(parents=True)
    (lib / "f.txt").write_text("data\n")
    (lib / "g.txt").write_text("more\n")
    init_repository(lib, "f.txt", "g.txt")
    init_repository(world.ws, "README.md", "vendor/lib")
    armed = arm("vendor/lib", world.outside)
    run = attack(spawn, world, [bash(armed)], mode="auto", responder=answer_with("allow_once"), env=env, followups=2)
    assert "exit code" in run.output(0), run.output(0)
    assert markers(world) == []
