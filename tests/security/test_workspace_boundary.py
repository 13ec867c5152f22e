"""One workspace boundary, attacked through every file tool: each attack must fail closed.

Attacks: `..` traversal, an absolute path outside, prefix confusion (`/ws` vs `/ws-evil`), a NUL byte, reading
through a symlink, writing a new file under a symlinked directory, a symlink two levels above an existing file, and a
directory swapped for a symlink between the resolution and the open. Outside access is never silent: the approval
layer sees the resolved outside path (so it asks, or denies in read-only), and only an exact grant lets a tool
through.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from permissions.policy import decide
from runtime.approval import make_describer
from runtime.tools.base import ToolCall, ToolFailure, ToolRegistry
from runtime.tools.builtin import builtin_tools
from runtime.workspace import PathError, Workspace
from tests.support.tools_helpers import TOOLS, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

SECRET = "top secret\n"


def layout(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "real/dir").mkdir(parents=True)
    (ws / "real/dir/file.txt").write_text("inside secret\n")
    out = tmp_path / "outside"
    (out / "dir/sub").mkdir(parents=True)
    (out / "secret.txt").write_text(SECRET)
    (out / "dir/file.txt").write_text(SECRET)
    (out / "dir/sub/existing.txt").write_text(SECRET)
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws-evil/secret.txt").write_text(SECRET)
    (ws / "link_file").symlink_to(out / "secret.txt")
    (ws / "link_dir").symlink_to(out)
    return ws


ATTACKS = {
    # name: (file path, directory path) as the model would send them; {T} is the temporary root
    "traversal": ("../outside/secret.txt", "../outside"),
    "absolute": ("{T}/outside/secret.txt", "{T}/outside"),
    "prefix_confusion": ("{T}/ws-evil/secret.txt", "{T}/ws-evil"),
    "nul_byte": ("real/dir/file.txt\x00", "real\x00"),
    "symlink_read": ("link_file", "link_dir"),
    "symlink_parent_new_file": ("link_dir/new.txt", "link_dir/dir"),
    "symlink_two_levels_up": ("link_dir/dir/sub/existing.txt", "link_dir/dir/sub"),
}


def patch_of(kind: str, p: str) -> str:
    body = {
        "add": f"*** Add File: {p}\n+pwned",
        "update": f"*** Update File: {p}\n-top secret\n+pwned",
        "delete": f"*** Delete File: {p}",
    }[kind]
    return f"*** Begin Patch\n{body}\n*** End Patch"


CALLS = {
    "read_file": lambda f, d: ("read_file", {"path": f}),
    "write_file": lambda f, d: ("write_file", {"path": f, "content": "pwned"}),
    "write_file_append": lambda f, d: ("write_file", {"path": f, "content": "pwned", "mode": "append"}),
    "edit": lambda f, d: ("edit", {"path": f, "old_string": "top secret", "new_string": "pwned"}),
    "apply_patch_add": lambda f, d: ("apply_patch", {"patch": patch_of("add", f)}),
    "apply_patch_update": lambda f, d: ("apply_patch", {"patch": patch_of("update", f)}),
    "apply_patch_delete": lambda f, d: ("apply_patch", {"patch": patch_of("delete", f)}),
    "apply_patch_move_out": lambda f, d: (
        "apply_patch",
        {
            "patch": "*** Begin Patch\n*** Update File: real/dir/"
            f"file.txt\n*** Move to: {f}\n-inside secret\n+moved\n"
            "*** End Patch"
        },
    ),
    "glob": lambda f, d: ("glob", {"pattern": "**/*", "path": d}),
    "grep_dir": lambda f, d: ("grep", {"pattern": "secret", "path": d}),
    "grep_file": lambda f, d: ("grep", {"pattern": "secret", "path": f}),
    "bash_cwd": lambda f, d: ("bash", {"command": "cat *.txt; echo pwned > pwned.txt", "cwd": d}),
}


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, encoding="utf-8", errors="replace") as f:
                out[p] = f.read()
    return out


def outside_state(tmp_path: Path) -> dict[str, str]:
    return {**snapshot(tmp_path / "outside"), **snapshot(tmp_path / "ws-evil")}


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("call", list(CALLS))
async def test_every_file_tool_fails_closed_on_every_attack(tmp_path, attack, call):
    ws = layout(tmp_path)
    before = outside_state(tmp_path)
    f, d = (s.replace("{T}", str(tmp_path)) for s in ATTACKS[attack])
    name, args = CALLS[call](f, d)
    with pytest.raises(ToolFailure) as err:
        await run(name, args, make_ctx(ws))
    assert err.value.error_type in {"PathOutsideWorkspace", "InvalidPath", "PathChanged", "InvalidArguments"}, (
        err.value.message
    )
    assert "top secret" not in err.value.message
    assert outside_state(tmp_path) == before
    assert not (tmp_path / "outside/new.txt").exists() and not (tmp_path / "outside/pwned.txt").exists()


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a != "nul_byte"])
@pytest.mark.parametrize("call", list(CALLS))
async def test_the_approval_layer_sees_the_resolved_outside_path(tmp_path, attack, call):
    ws = layout(tmp_path)
    f, d = (s.replace("{T}", str(tmp_path)) for s in ATTACKS[attack])
    name, args = CALLS[call](f, d)
    registry = ToolRegistry(builtin_tools())
    subject = await make_describer(registry)(ToolCall("c1", name, args, "{}"), make_ctx(ws))
    outside = [p for p in subject.facts.paths if p.klass == "outside"]
    assert outside, subject.facts.paths
    assert all(os.path.realpath(p.path) == p.path and not p.path.startswith(str(ws) + "/") for p in outside)
    assert decide(subject.facts, "read-only").action == "deny"
    assert decide(subject.facts, "auto").action == "ask"


async def test_update_agents_md_symlinked_out_of_the_workspace_fails_closed(tmp_path):
    ws = layout(tmp_path)
    (ws / "AGENTS.md").symlink_to(tmp_path / "outside/secret.txt")
    before = outside_state(tmp_path)
    for args in ({"action": "read"}, {"action": "write", "content": "pwned"}, {"action": "append", "content": "x"}):
        with pytest.raises(ToolFailure) as err:
            await run("update_agents_md", args, make_ctx(ws))
        assert err.value.error_type == "PathOutsideWorkspace"
    assert outside_state(tmp_path) == before
    subject = await make_describer(ToolRegistry(builtin_tools()))(
        ToolCall("c1", "update_agents_md", {"action": "write", "content": "x"}, "{}"), make_ctx(ws)
    )
    assert subject.facts.paths[0].klass == "outside"


async def test_an_exact_grant_of_the_resolved_path_lets_the_call_through(tmp_path):
    ws = layout(tmp_path)
    granted = frozenset({str((tmp_path / "outside/secret.txt").resolve())})
    res = await run("read_file", {"path": "../outside/secret.txt"}, make_ctx(ws, grants=granted))
    assert "top secret" in res.output
    with pytest.raises(ToolFailure):  # a grant for one file is not a grant for its neighbour
        await run("read_file", {"path": "../outside/dir/file.txt"}, make_ctx(ws, grants=granted))


async def test_writes_to_git_are_classified_protected_for_the_policy(tmp_path):
    ws = layout(tmp_path)
    (ws / ".git/hooks").mkdir(parents=True)
    subject = await make_describer(ToolRegistry(builtin_tools()))(
        ToolCall("c1", "write_file", {"path": ".git/hooks/pre-commit", "content": "x"}, "{}"), make_ctx(ws)
    )
    assert subject.facts.paths[0].klass == "protected"
    assert decide(subject.facts, "auto").action == "ask"


SWAP_CALLS = {
    "read_file": ("read_file", {"path": "real/dir/file.txt"}),
    "write_file": ("write_file", {"path": "real/dir/file.txt", "content": "pwned"}),
    "write_file_new": ("write_file", {"path": "real/dir/new.txt", "content": "pwned"}),
    "edit": ("edit", {"path": "real/dir/file.txt", "old_string": "secret", "new_string": "pwned"}),
    "apply_patch": (
        "apply_patch",
        {"patch": "*** Begin Patch\n*** Update File: real/dir/file.txt\n-top secret\n+pwned\n*** End Patch"},
    ),
    "apply_patch_add": (
        "apply_patch",
        {"patch": "*** Begin Patch\n*** Add File: real/dir/new.txt\n+pwned\n*** End Patch"},
    ),
    "glob": ("glob", {"pattern": "**/*", "path": "real/dir"}),
    "grep": ("grep", {"pattern": "secret", "path": "real/dir"}),
    "grep_file": ("grep", {"pattern": "secret", "path": "real/dir/file.txt"}),
    "bash_cwd": ("bash", {"command": "cat file.txt; echo pwned > pwned.txt", "cwd": "real/dir"}),
}


@pytest.mark.parametrize("call", list(SWAP_CALLS))
async def test_a_directory_swapped_for_a_symlink_after_resolution_is_not_followed(tmp_path, monkeypatch, call):
    ws = layout(tmp_path)
    before = outside_state(tmp_path)
    original = Workspace.resolve
    swapped = []

    def resolve_then_swap(self, path, base=None):
        resolved = original(self, path, base)
        if not swapped and "real" in str(path):
            # The attacker wins the race: right after the check, `real` becomes a link out of the workspace.
            os.rename(ws / "real", ws / "real_orig")
            os.symlink(tmp_path / "outside", ws / "real")
            swapped.append(True)
        return resolved

    monkeypatch.setattr(Workspace, "resolve", resolve_then_swap)
    name, args = SWAP_CALLS[call]
    with pytest.raises((ToolFailure, PathError)) as err:
        await run(name, args, make_ctx(ws))
    assert swapped
    assert getattr(err.value, "error_type", "") in {"PathChanged", "FileNotFound"}, err.value
    assert outside_state(tmp_path) == before
    assert not (tmp_path / "outside/dir/new.txt").exists() and not (tmp_path / "outside/dir/pwned.txt").exists()


@pytest.mark.parametrize("tool", sorted(t for t in TOOLS if t not in ("update_agents_md", "update_plan")))
async def test_every_path_taking_tool_declares_its_paths(tool):
    name, args = {
        "read_file": ("read_file", {"path": "x"}),
        "write_file": ("write_file", {"path": "x", "content": ""}),
        "edit": ("edit", {"path": "x", "old_string": "a", "new_string": "b"}),
        "apply_patch": ("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: x\n*** End Patch"}),
        "glob": ("glob", {"pattern": "*", "path": "x"}),
        "grep": ("grep", {"pattern": "a", "path": "x"}),
        "bash": ("bash", {"command": "ls", "cwd": "x"}),
    }[tool]
    assert [p for p, _ in TOOLS[name].paths(args)] == ["x"]


def _unreadable_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """`realpath` raises for a link the agent may not read (as `/proc/1/root` does for a process in another user
    namespace, even as root); paths through `unprovable` behave so here, wherever the machine's /proc stands."""
    real = os.path.realpath

    def realpath(path: str, *a: object, **k: object) -> str:
        if "unprovable" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os.path, "realpath", realpath)


@pytest.mark.parametrize("path", ["/proc/1/root/unprovable/etc/shadow", "unprovable/secret.txt"])
def test_a_path_whose_links_cannot_be_read_is_outside_even_when_its_text_is_inside(tmp_path, monkeypatch, path):
    ws = layout(tmp_path)
    _unreadable_links(monkeypatch)
    resolved = Workspace(str(ws)).resolve(path)
    assert resolved.klass == "outside" and resolved.root is None
    with pytest.raises(PathError) as err:
        Workspace(str(ws)).check(resolved, frozenset())
    assert err.value.error_type == "PathOutsideWorkspace"


@pytest.mark.parametrize("call", ["read_file", "grep_file", "bash"])
async def test_an_unresolvable_path_is_a_question_not_a_crash(tmp_path, monkeypatch, call):
    """Before, `cat /proc/1/root/…` crashed the describer ("the tool crashed") instead of asking."""
    ws = layout(tmp_path)
    _unreadable_links(monkeypatch)
    target = "/proc/1/root/unprovable/etc/shadow"
    name, args = {
        "read_file": ("read_file", {"path": target}),
        "grep_file": ("grep", {"pattern": "x", "path": target}),
        "bash": ("bash", {"command": f"cat {target}"}),
    }[call]
    subject = await make_describer(ToolRegistry(builtin_tools()))(ToolCall("c1", name, args, "{}"), make_ctx(ws))
    assert any(p.klass == "outside" for p in subject.facts.paths), subject.facts.paths
    assert decide(subject.facts, "safe").action == "ask"
    assert decide(subject.facts, "read-only").action == "deny"
    if call == "bash":  # the command runs what the approval let through; the file tools hold the boundary themselves
        return
    with pytest.raises(ToolFailure) as err:
        await run(name, args, make_ctx(ws))
    assert err.value.error_type in {"PathOutsideWorkspace", "InvalidArguments"}, err.value.message
