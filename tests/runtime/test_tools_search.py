"""glob and grep: root matches, .gitignore, .git skipped, caps, clipping, binaries, and the pure-Python fallback."""

from __future__ import annotations

import os

import pytest

from runtime.tools.base import ToolFailure
from runtime.tools.builtin import search
from tests.support.tools_helpers import TOOLS, make_ctx, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]


@pytest.fixture(params=["rg", "python"])
def engine(request, monkeypatch):
    if request.param == "rg":
        if search.rg_binary() is None:
            pytest.skip("ripgrep is not installed")
    else:
        monkeypatch.setattr(search, "rg_binary", lambda: None)
    return request.param


def tree(root):
    files = {
        "a.py": "import os\nTODO = 1\n",
        "src/b.py": "def b():\n    return 'todo later'\n",
        "src/deep/c.py": "x = 'TODO'\n",
        "src/notes.md": "TODO: write docs\n",
        "build/out.py": "TODO generated\n",
        ".github/ci.yml": "TODO: ci\n",
        ".git/HEAD": "TODO ref\n",
        ".gitignore": "build/\n*.log\n",
        "debug.log": "TODO log\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "blob.bin").write_bytes(b"TODO\x00\x01\x02")


async def test_glob_double_star_matches_root_files_too_and_honours_gitignore(tmp_path, engine):
    tree(tmp_path)
    res = await run("glob", {"pattern": "**/*.py"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == ["a.py", "src/b.py", "src/deep/c.py"]
    assert res.raw_output["truncated"] is False


async def test_glob_single_star_stays_in_the_base_directory(tmp_path, engine):
    tree(tmp_path)
    res = await run("glob", {"pattern": "*.py"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == ["a.py"]


async def test_glob_sees_hidden_files_but_never_git(tmp_path, engine):
    tree(tmp_path)
    res = await run("glob", {"pattern": "**/*"}, make_ctx(tmp_path))
    assert ".github/ci.yml" in res.raw_output["matches"]
    assert not any(m.startswith(".git/") for m in res.raw_output["matches"])
    assert "debug.log" not in res.raw_output["matches"] and "build/out.py" not in res.raw_output["matches"]


@pytest.mark.parametrize("pattern", ["**/*", "**/HEAD", "**/config", "**/.git", "**/*.py"])
async def test_glob_never_lists_git_directories_at_any_depth_nor_submodule_git_files(tmp_path, engine, pattern):
    tree(tmp_path)
    for rel, text in {
        "vendor/lib/.git/HEAD": "ref\n",
        "vendor/lib/.git/config": "[core]\n",
        "vendor/lib/.git/hooks/x.py": "x\n",
        "sub/.git": "gitdir: ../.git/modules/sub\n",
        "sub/config": "kept\n",
        "sub/HEAD": "kept\n",
        "lib.git/HEAD": "kept\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    res = await run("glob", {"pattern": pattern}, make_ctx(tmp_path))
    matches = res.raw_output["matches"]
    assert not [m for m in matches if ".git" in m.split("/")], matches
    expected = {
        "**/HEAD": ["lib.git/HEAD", "sub/HEAD"],
        "**/config": ["sub/config"],
        "**/.git": [],
        "**/*.py": ["a.py", "src/b.py", "src/deep/c.py"],
    }
    if pattern in expected:
        assert matches == expected[pattern]
    else:
        assert {"sub/config", "sub/HEAD", "lib.git/HEAD", ".github/ci.yml"} <= set(matches)


@pytest.mark.parametrize("include", [None, "*.py", "**/*.py", "HEAD"])
async def test_grep_never_reads_git_directories_with_or_without_include(tmp_path, engine, include):
    tree(tmp_path)
    for rel in ("vendor/lib/.git/hooks/x.py", "vendor/lib/.git/HEAD", ".git/y.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("TODO inside git\n")
    (tmp_path / "vendor/lib/z.py").write_text("TODO outside\n")
    args = {"pattern": "TODO", **({"include": include} if include else {})}
    res = await run("grep", args, make_ctx(tmp_path))
    paths = {m["path"] for m in res.raw_output["matches"]}
    assert not [p for p in paths if ".git" in p.split(os.sep)], paths
    if include != "HEAD":
        assert str(tmp_path / "vendor/lib/z.py") in paths


async def test_glob_paths_are_relative_to_the_search_base(tmp_path, engine):
    tree(tmp_path)
    res = await run("glob", {"pattern": "**/*.py", "path": "src"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == ["b.py", "deep/c.py"]
    assert "paths relative to src/" in res.output


async def test_glob_caps_results_and_says_so(tmp_path, engine):
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("x")
    res = await run("glob", {"pattern": "*.txt", "maxResults": 2}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == ["f0.txt", "f1.txt"]
    assert res.raw_output["truncated"] is True and res.raw_output["count"] == 5
    assert "showing the first 2" in res.output


async def test_glob_braces_and_classes(tmp_path, engine):
    for name in ("a.ts", "b.tsx", "c.js", "d1.txt", "dx.txt"):
        (tmp_path / name).write_text("x")
    res = await run("glob", {"pattern": "*.{ts,tsx}"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == ["a.ts", "b.tsx"]
    res = await run("glob", {"pattern": "d[0-9].txt"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == ["d1.txt"]


async def test_grep_finds_lines_as_path_line_text_sorted_by_path(tmp_path, engine):
    tree(tmp_path)
    res = await run("grep", {"pattern": "TODO"}, make_ctx(tmp_path))
    lines = res.output.splitlines()[1:]
    assert lines == [
        ".github/ci.yml:1: TODO: ci",
        "a.py:2: TODO = 1",
        "src/deep/c.py:1: x = 'TODO'",
        "src/notes.md:1: TODO: write docs",
    ]
    assert res.raw_output["filesMatched"] == 4 and res.raw_output["truncated"] is False
    assert res.output.startswith("4 matching lines in 4 files:")


async def test_grep_include_and_case_insensitive(tmp_path, engine):
    tree(tmp_path)
    res = await run("grep", {"pattern": "todo", "include": "*.py", "caseInsensitive": True}, make_ctx(tmp_path))
    paths = [m["path"] for m in res.raw_output["matches"]]
    assert paths == sorted(paths)
    assert len(paths) == 3 and res.raw_output["filesMatched"] == 3
    assert all(m["path"].endswith(".py") for m in res.raw_output["matches"])


async def test_grep_skips_binary_files_and_git(tmp_path, engine):
    tree(tmp_path)
    res = await run("grep", {"pattern": "TODO"}, make_ctx(tmp_path))
    assert "blob.bin" not in res.output and ".git/HEAD" not in res.output


async def test_grep_caps_results_and_reports_the_total(tmp_path, engine):
    (tmp_path / "many.txt").write_text("hit\n" * 50)
    (tmp_path / "more.txt").write_text("hit\n" * 50)
    res = await run("grep", {"pattern": "hit", "maxResults": 10}, make_ctx(tmp_path))
    assert len(res.raw_output["matches"]) == 10 and res.raw_output["truncated"] is True
    assert res.raw_output["filesMatched"] == 2
    assert [m["line"] for m in res.raw_output["matches"]] == list(range(1, 11))
    assert res.raw_output["matches"][0]["path"].endswith("many.txt")
    assert res.output.startswith("showing the first 10 matching lines; 2 files match")


async def test_grep_reports_truncation_when_one_file_has_more_lines_than_the_cap(tmp_path, engine):
    (tmp_path / "one.txt").write_text("hit\n" * 11)
    res = await run("grep", {"pattern": "hit", "maxResults": 10}, make_ctx(tmp_path))
    assert len(res.raw_output["matches"]) == 10 and res.raw_output["truncated"] is True
    res = await run("grep", {"pattern": "hit", "maxResults": 11}, make_ctx(tmp_path))
    assert len(res.raw_output["matches"]) == 11 and res.raw_output["truncated"] is False


async def test_grep_clips_long_lines(tmp_path, engine):
    (tmp_path / "min.js").write_text("var a='needle';" + "x" * 5000 + "\n")
    res = await run("grep", {"pattern": "needle"}, make_ctx(tmp_path))
    line = res.output.splitlines()[1]
    assert len(line) < 400 and "more characters" in line


async def test_grep_in_a_single_file(tmp_path, engine):
    tree(tmp_path)
    res = await run("grep", {"pattern": "return", "path": "src/b.py"}, make_ctx(tmp_path))
    assert res.output.splitlines()[1] == "src/b.py:2:     return 'todo later'"


async def test_grep_with_an_invalid_regex_says_so(tmp_path, engine):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(ToolFailure) as err:
        await run("grep", {"pattern": "(unclosed"}, make_ctx(tmp_path))
    assert err.value.error_type == "InvalidPattern"


async def test_grep_without_matches_says_so(tmp_path, engine):
    (tmp_path / "a.txt").write_text("x\n")
    res = await run("grep", {"pattern": "nothing-here"}, make_ctx(tmp_path))
    assert res.output == "no matches for `nothing-here`"


async def test_search_tools_declare_their_base_path_as_a_read(tmp_path):
    assert TOOLS["grep"].paths({"pattern": "x"}) == [(".", False)]
    assert TOOLS["glob"].paths({"pattern": "x", "path": "/etc"}) == [("/etc", False)]
    assert TOOLS["grep"].kind == TOOLS["glob"].kind == "search"
    assert TOOLS["grep"].effect({}) == "read"


async def test_glob_regex_semantics():
    rx = search.glob_regex
    assert rx("**/*.py").match("a.py") and rx("**/*.py").match("x/y/a.py")
    assert not rx("*.py").match("x/a.py")
    assert rx("src/**").match("src/a/b") and not rx("src/**").match("srcx/a")
    assert rx("a/**/b").match("a/b") and rx("a/**/b").match("a/x/y/b")


async def test_name_filters_never_pull_in_gitignored_files(tmp_path, engine):
    tree(tmp_path)
    res = await run("glob", {"pattern": "*.log"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == []
    res = await run("grep", {"pattern": "TODO", "include": "*.log"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == []
    res = await run("grep", {"pattern": "TODO", "include": "*"}, make_ctx(tmp_path))
    assert not [m for m in res.raw_output["matches"] if "/build/" in m["path"] or "/.git/" in m["path"]]


async def test_grep_include_with_a_directory_part_matches_the_relative_path(tmp_path, engine):
    tree(tmp_path)
    res = await run("grep", {"pattern": "TODO", "include": "src/**/*.py"}, make_ctx(tmp_path))
    assert [m["path"].rsplit("/", 2)[-2:] for m in res.raw_output["matches"]] == [["deep", "c.py"]]


async def test_glob_with_a_literal_directory_prefix_searches_only_there(tmp_path, engine):
    tree(tmp_path)
    res = await run("glob", {"pattern": "src/**/*.py"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == ["src/b.py", "src/deep/c.py"]
    res = await run("glob", {"pattern": "nope/**/*.py"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == []
    res = await run("glob", {"pattern": "build/*.py"}, make_ctx(tmp_path))
    assert res.raw_output["matches"] == []  # an ignored directory stays ignored when named
