"""The watch over `.git` and `.gatewright` in a workspace (runtime.repositories): what exists at a session's start is
known, what appears later is found by a check, whatever way it came (made in place, in an ignored directory, moved
in, put back over a known one), and only when it really appeared."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from runtime import repositories
from runtime.context import SessionContext
from runtime.repositories import RepositoryWatch, Tree


def make(ws: Path, *dirs: str) -> None:
    for d in dirs:
        (ws / d).mkdir(parents=True, exist_ok=True)


def paths(found: list[repositories.Found], ws: Path) -> list[str]:
    return sorted(os.path.relpath(f.path, ws) for f in found)


def test_what_exists_at_the_start_is_known_nested_and_ignored_ones_included(tmp_path):
    ws = tmp_path.resolve()
    make(ws, ".git", "vendor/lib/.git", "node_modules/pkg/.git", ".gatewright", "src/a/b")
    (ws / ".gitignore").write_text("node_modules/\n")
    w = RepositoryWatch([str(ws)])
    w.ready()
    assert sorted(os.path.relpath(p, ws) for p in w.protected()) == [
        ".gatewright",
        ".git",
        "node_modules/pkg/.git",
        "vendor/lib/.git",
    ]
    assert w.check() == []


def test_a_new_one_is_found_once_and_until_it_is_decided_it_is_not_found_again(tmp_path):
    ws = tmp_path.resolve()
    make(ws, "src/deep/er")
    w = RepositoryWatch([str(ws)])
    w.ready()
    make(ws, "src/deep/er/.git", "node_modules/x/.gatewright")
    found = w.check()
    assert paths(found, ws) == ["node_modules/x/.gatewright", "src/deep/er/.git"]
    assert w.check() == []  # being asked about
    assert w.unsettled(str(ws / "src/deep/er/.git"))
    w.keep(found[1])
    assert not w.unsettled(str(ws / "src/deep/er/.git"))
    assert w.remove(found[0]) and not (ws / "node_modules/x/.gatewright").exists()
    assert w.check() == []


def test_an_answer_that_never_came_leaves_it_protected_and_asked_about_again(tmp_path):
    ws = tmp_path.resolve()
    w = RepositoryWatch([str(ws)])
    w.ready()
    make(ws, "a/.git")
    (found,) = w.check()
    w.later(found)
    assert str(ws / "a/.git") in w.protected()
    assert paths(w.check(), ws) == ["a/.git"]


def test_a_known_one_replaced_by_another_is_new(tmp_path):
    """A directory put in place of a known one, a `.git` file rewritten in place to point elsewhere: new."""
    ws = tmp_path.resolve()
    make(ws, "lib/.git", "other")
    (ws / "sub").mkdir()
    (ws / "sub/.git").write_text("gitdir: ../other\n")
    w = RepositoryWatch([str(ws)])
    w.ready()
    os.rename(ws / "lib/.git", ws / "old-git")
    make(ws, "lib/.git")
    with open(ws / "sub/.git", "w") as f:
        f.write("gitdir: /elsewhere\n")
    assert paths(w.check(), ws) == ["lib/.git", "sub/.git"]


def test_a_directory_moved_in_or_replaced_is_looked_at_whole(tmp_path):
    ws, outside = (tmp_path / "ws").resolve(), (tmp_path / "out").resolve()
    make(ws, "keep/x")
    make(outside, "tree/a/b/.git")
    w = RepositoryWatch([str(ws)])
    w.ready()
    os.rename(outside / "tree", ws / "moved")
    shutil.rmtree(ws / "keep")
    make(ws, "keep/x/.gatewright")
    assert paths(w.check(), ws) == ["keep/x/.gatewright", "moved/a/b/.git"]


def test_a_link_named_git_counts_and_linked_directories_are_not_followed(tmp_path):
    ws, outside = (tmp_path / "ws").resolve(), (tmp_path / "out").resolve()
    make(ws, "src", "hidden")
    make(outside, "repo/.git")
    w = RepositoryWatch([str(ws)])
    w.ready()
    (ws / "src" / ".git").symlink_to(ws / "hidden")
    (ws / "elsewhere").symlink_to(outside / "repo")
    assert paths(w.check(), ws) == ["src/.git"]
    # The sandbox protects where the link leads, so that the directory it makes a repository stays read-only.
    assert str(ws / "hidden") in w.protected()


def test_a_change_too_close_to_the_listing_for_the_clock_is_looked_at_again(tmp_path):
    """A directory changed in the same clock tick as it was listed keeps its ctime: only the racy rule sees what the
    second change added. Listed long after its last change, a directory is trusted (the rule is what matters)."""
    ws = tmp_path.resolve()
    make(ws, "d")
    tree = Tree([str(ws)])
    tree.update()
    make(ws, "d/.git")
    d = tree.dirs[str(ws / "d")]
    now_ctime = os.lstat(ws / "d").st_ctime_ns
    # As if it had been listed just before `.git` was made, within the same tick: same ctime, racy.
    tree.dirs[str(ws / "d")] = repositories._Dir(d.identity, now_ctime, now_ctime, d.subdirs, d.protected)
    assert str(ws / "d/.git") in tree.update()
    settled = Tree([str(ws)])
    settled.update()
    shutil.rmtree(ws / "d/.git")
    d = settled.dirs[str(ws / "d")]
    settled.dirs[str(ws / "d")] = repositories._Dir(
        d.identity, os.lstat(ws / "d").st_ctime_ns, os.lstat(ws / "d").st_ctime_ns + 2 * repositories.RACY_NS, (), ()
    )
    make(ws, "d/.git")
    os.utime(ws / "d", ns=(0, 0))  # (mtime set back: ctime moves on regardless)
    assert str(ws / "d/.git") in settled.update()


def test_the_agents_own_git_does_not_look_at_a_workspace_git_that_appeared_and_was_not_kept(tmp_path):
    ws = tmp_path.resolve()
    w = RepositoryWatch([str(ws)])
    w.ready()
    make(ws, ".git")
    (found,) = w.check()
    ctx = SessionContext(str(ws), lambda: "auto", "sandbox: test", repositories=w)
    ctx.refresh()
    assert ctx.git.line.startswith("not looked at")
    w.keep(found)
    ctx.refresh()
    assert not ctx.git.line.startswith("not looked at")
