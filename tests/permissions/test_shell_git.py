"""Git commands proven read-only run no program a hostile repository configures (the boundary corpus's hole 4).

A checkout can carry its own `.git/config` and `.gitattributes`: core.fsmonitor, diff.external, textconv and
filter drivers, pagers, gpg.program, hooks, an embedded bare repository, a partial clone whose lazy fetch runs
core.sshCommand. Every program such a repository names here creates a marker. A command the analysis proves
read-only, run as the runtime runs it (with `read_only_git_env`, stdout on a terminal so pagers start), must create
none; the subcommands it no longer proves are shown to run them even with the overrides, which is why.
"""

from __future__ import annotations

import os
import pty
import shlex
import shutil
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from permissions.shell import READ_ONLY_GIT_ENV, analyze_command, git_without_filters, read_only_git_env

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# Commands proven read-only, each run against the hostile repository below.
PROVEN = [
    "git log",
    "git log --oneline -5",
    "git log signed -1",
    "git log --stat",
    "git log --name-status --follow -- f.txt",
    "git --no-pager log --graph --all",
    "git show -s signed",
    "git rev-parse HEAD",
    "git rev-parse --show-toplevel",
    "git ls-files",
    "git ls-files -o --exclude-standard",
    "git ls-files -d -s",
    "git grep a",
    "git grep --cached a",
    "git grep -p -W a",
    "git branch -a",
    "git branch -vv",
    "git ls-tree -r HEAD",
    "git cat-file -p HEAD:f.txt",
    "git rev-list --count HEAD",
    "git show-ref",
    "git for-each-ref",
    "git describe --always",
    "git merge-base HEAD HEAD~1",
    "git -C nested log",
    "git -C nested ls-files",
    "git -C inner.git log",
    "git -C inner.git ls-files",
]

# Commands no longer proven: with the overrides applied they still run a configured program (name of its marker).
UNPROVEN = [
    ("git status", "clean"),
    ("git diff", "clean"),
    ("git log -p", "textconv"),
    ("git log -S a", "textconv"),
    ("git show", "textconv"),
    ("git blame f.txt", "textconv"),
    ("git grep --textconv a", "textconv"),
    ("git ls-files -m", "clean"),
    ("git describe --dirty --always", "clean"),
]


def _git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", *args], cwd=repo, env={**base, **(env or {})}, capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.strip()


def _evil(markers: Path, name: str, *, passthrough: bool = True) -> str:
    """A program that creates marker `name` and passes its input through (so git keeps working)."""
    script = markers.parent / "programs" / name
    script.parent.mkdir(exist_ok=True)
    copy = "cat 2>/dev/null\n" if passthrough else ""
    script.write_text(f"#!/bin/sh\n: > {shlex.quote(str(markers / name))}\n{copy}exit 0\n")
    script.chmod(0o755)
    return str(script)


def _arm(repo: Path, markers: Path) -> None:
    """Configure every program a repository can name for the commands under test."""
    hooks = repo / ".hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-index-change", "reference-transaction", "post-checkout"):
        shutil.copy(_evil(markers, f"hook-{hook}"), hooks / hook)
    for key, name in [
        ("core.fsmonitor", "fsmonitor"),
        ("diff.external", "external"),
        ("diff.evil.textconv", "textconv"),
        ("diff.evil.command", "diffcommand"),
        ("filter.evil.clean", "clean"),
        ("filter.evil.smudge", "smudge"),
        ("core.pager", "pager"),
        ("pager.log", "pager-log"),
        ("pager.branch", "pager-branch"),
        ("pager.grep", "pager-grep"),
        ("gpg.program", "gpg"),
        ("gpg.ssh.program", "gpg-ssh"),
    ]:
        _git(repo, "config", key, _evil(markers, name))
    _git(repo, "config", "core.sshCommand", _evil(markers, "ssh", passthrough=False))
    _git(repo, "config", "core.hooksPath", str(hooks))
    _git(repo, "config", "log.showSignature", "true")
    _git(repo, "config", "submodule.recurse", "true")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hostile")
    markers = root / "markers"
    markers.mkdir()
    repo = root / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", ".")
    _git(repo, "config", "user.email", "a@example.invalid")
    _git(repo, "config", "user.name", "a")
    (repo / "f.txt").write_text("a\nb\n")
    (repo / "same.txt").write_text("same\n")
    _git(repo, "add", "f.txt", "same.txt")
    _git(repo, "commit", "-qm", "one")
    (repo / "f.txt").write_text("a\nc\n")
    _git(repo, "commit", "-qam", "two")
    # A commit carrying a signature, so that showing it verifies the signature with gpg.program.
    tree, parent = _git(repo, "rev-parse", "HEAD^{tree}"), _git(repo, "rev-parse", "HEAD")
    body = (
        f"tree {tree}\nparent {parent}\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n -----END PGP SIGNATURE-----\n\nsigned\n"
    )
    signed = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=repo,
        input=body,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    _git(repo, "update-ref", "refs/heads/signed", signed)
    (repo / ".gitattributes").write_text("* diff=evil filter=evil\n")
    # A nested repository and an embedded bare one, each with hostile configuration of its own.
    nested, inner = repo / "nested", repo / "inner.git"
    _git(repo, "init", "-q", str(nested))
    _git(repo, "clone", "-q", "--bare", ".", str(inner))
    for r in (repo, nested, inner):
        _arm(r, markers)
    for r in (nested,):
        (r / "x").write_text("x\n")
        _git(r, "add", "x")
        _git(r, "-c", "user.email=a@b", "-c", "user.name=a", "-c", "core.hooksPath=/dev/null", "commit", "-qm", "x")
    # f.txt changed; same.txt did not, but its stat data is stale, so status must read (and clean) it again.
    (repo / "f.txt").write_text("a\nchanged\n")
    os.utime(repo / "same.txt", (1, 1))
    for m in markers.iterdir():
        m.unlink()
    return repo, markers


def _run_on_a_terminal(command: str, cwd: Path, env: Mapping[str, str]) -> None:
    """Run like an editor terminal would: stdout and stderr on a pty, so git starts its pager."""
    master, slave = pty.openpty()

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        subprocess.run(
            shlex.split(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            timeout=60,
        )
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)


def _environment(repo: Path, *, overrides: bool) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repo.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "TERM": "dumb",
    }
    return read_only_git_env(env) if overrides else env


_STAMPS = iter(range(1000, 10**6, 1000))


def _stale(path: Path) -> None:
    """Give `path` stat data the index has never recorded, so git must read its contents to compare them."""
    stamp = next(_STAMPS)
    os.utime(path, (stamp, stamp))


def _fired(markers: Path) -> list[str]:
    names = sorted(m.name for m in markers.iterdir())
    for m in markers.iterdir():
        m.unlink()
    return names


@pytest.mark.parametrize("command", PROVEN)
def test_a_proven_git_command_runs_no_program_the_repository_configures(
    hostile: tuple[Path, Path], command: str
) -> None:
    repo, markers = hostile
    assert analyze_command(command).read_only, analyze_command(command).reasons
    _fired(markers)
    _stale(repo / "same.txt")
    _run_on_a_terminal(command, repo, _environment(repo, overrides=True))
    assert _fired(markers) == []


@pytest.mark.parametrize(("command", "marker"), UNPROVEN)
def test_git_commands_that_run_repository_drivers_even_with_the_overrides_are_not_proven(
    hostile: tuple[Path, Path], command: str, marker: str
) -> None:
    repo, markers = hostile
    assert not analyze_command(command).read_only
    _fired(markers)
    _stale(repo / "same.txt")
    _run_on_a_terminal(command, repo, _environment(repo, overrides=True))
    assert marker in _fired(markers)


@pytest.mark.parametrize(
    ("command", "marker"),
    [
        ("git ls-files", "fsmonitor"),
        ("git log --oneline", "pager-log"),
        ("git log signed -1", "gpg"),
        ("git -C nested ls-files", "fsmonitor"),
    ],
)
def test_without_the_overrides_the_same_commands_do_run_configured_programs(
    hostile: tuple[Path, Path], command: str, marker: str
) -> None:
    """The control: the overrides, not luck, keep the proven commands harmless."""
    repo, markers = hostile
    _fired(markers)
    _run_on_a_terminal(command, repo, _environment(repo, overrides=False))
    assert marker in _fired(markers)


def test_an_embedded_bare_repository_is_not_used_implicitly(hostile: tuple[Path, Path]) -> None:
    repo, markers = hostile
    _fired(markers)
    _run_on_a_terminal("git -C inner.git log", repo, _environment(repo, overrides=False))
    assert "pager-log" in _fired(markers)
    env = _environment(repo, overrides=True)
    result = subprocess.run(
        ["git", "-C", "inner.git", "log"], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "safe.bareRepository" in result.stderr


def test_a_partial_clone_does_not_fetch_lazily_over_a_configured_ssh_command(tmp_path: Path) -> None:
    """`git log --stat` in a partial clone fetches missing blobs; the repository's own protocol.ssh.allow=always
    beats protocol.allow=never, so only GIT_ALLOW_PROTOCOL (and GIT_NO_LAZY_FETCH) stop core.sshCommand."""
    source, clone, markers = tmp_path / "source", tmp_path / "clone", tmp_path / "markers"
    markers.mkdir()
    source.mkdir()
    _git(source, "init", "-q", ".")
    _git(source, "config", "uploadpack.allowFilter", "true")
    for text in ("one\n", "two\n"):
        (source / "a").write_text(text)
        _git(source, "add", "a")
        _git(source, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", text.strip())
    _git(tmp_path, "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{source}", str(clone))
    _git(clone, "config", "remote.origin.url", "ssh://example.invalid/x")
    _git(clone, "config", "core.sshCommand", _evil(markers, "ssh", passthrough=False))
    _git(clone, "config", "protocol.ssh.allow", "always")
    command = ["git", "log", "--stat"]
    assert analyze_command(shlex.join(command)).read_only
    for overrides, fired in ((False, ["ssh"]), (True, [])):
        subprocess.run(
            command,
            cwd=clone,
            env=_environment(clone, overrides=overrides),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert _fired(markers) == fired


# Filter driver names as a hostile repository may spell them in `.gitattributes` (no whitespace there).
DRIVERS = ("evil", "x.y", "d$z", "e=q", "Upper", "req")


def test_the_agents_git_status_runs_no_filter_driver_whatever_its_name(tmp_path: Path) -> None:
    """`git status` reads a tracked file whose stat data changed through its filter driver, and the driver's name
    comes from the work tree: `git_without_filters` lists the drivers the configuration defines and switches each
    off (a required one too), so none runs, and the status is still right."""
    markers, repo = tmp_path / "markers", tmp_path / "repo"
    markers.mkdir()
    repo.mkdir()
    _git(repo, "init", "-q", ".")
    files = [f"f{i}.txt" for i in range(len(DRIVERS))]
    for f in files:
        (repo / f).write_text(f"{f}\n")
    _git(repo, "add", *files)
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "one")
    lines = []
    for i, (f, name) in enumerate(zip(files, DRIVERS, strict=True)):
        lines.append(f"{f} filter={name}")
        _git(repo, "config", f"filter.{name}.clean", _evil(markers, f"clean-{i}"))
        _git(repo, "config", f"filter.{name}.process", _evil(markers, f"process-{i}", passthrough=False))
        _stale(repo / f)
    _git(repo, "config", "filter.req.required", "true")
    (repo / ".gitattributes").write_text("\n".join(lines) + "\n")
    argv = git_without_filters("status", "--porcelain=v2", "--branch")
    env = _environment(repo, overrides=True)
    subprocess.run(["git", "status"], cwd=repo, env=env, capture_output=True, timeout=60)
    assert _fired(markers), "the control: plain `git status` runs the drivers"
    out = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert _fired(markers) == []
    assert out.returncode == 0, out.stderr
    assert "? .gitattributes" in out.stdout.splitlines()
    assert not any(line.startswith("1 ") for line in out.stdout.splitlines())  # every tracked file: unchanged


def test_the_overrides_follow_configuration_the_environment_already_passes() -> None:
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "me", "HOME": "/h"}
    out = read_only_git_env(env)
    count = int(out["GIT_CONFIG_COUNT"])
    pairs = [(out[f"GIT_CONFIG_KEY_{i}"], out[f"GIT_CONFIG_VALUE_{i}"]) for i in range(count)]
    assert pairs[0] == ("user.name", "me") and out["HOME"] == "/h"
    assert ("core.fsmonitor", "false") in pairs[1:] and out["GIT_PAGER"] == "cat"
    assert read_only_git_env({})["GIT_CONFIG_COUNT"] == READ_ONLY_GIT_ENV["GIT_CONFIG_COUNT"]
    assert env == {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "me", "HOME": "/h"}


@pytest.mark.parametrize(
    "command",
    [
        "git -c core.pager=evil log",
        "git --git-dir=inner.git log",
        "git --exec-path=. log",
        "git -C $X log",
        "git log --format=%G?",
        "git log --ext-diff",
        "git log --textconv",
        "git grep -O a",
        "git grep --recurse-submodules a",
        "git ls-files --recurse-submodules",
        "git log -L1,2:f.txt",
    ],
)
def test_git_options_that_bring_back_configured_programs_are_not_proven(command: str) -> None:
    assert not analyze_command(command).read_only
