"""Which files a call may read secrets from (`runtime.secret_files`): the content check (bounded, never blocking) and
what a command reads without naming it (globs, recursive searches). The end-to-end proof, through the real binary,
is tests/security/test_security_secret_files.py."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from runtime import secret_files, secrets


@pytest.fixture
def key() -> str:
    value = f"sk-unit-{uuid.uuid4().hex}"
    secrets.register_labelled([(value, "UNIT_TEST_KEY")])
    return value


def test_a_file_holding_a_value_under_any_name_says_where_the_value_comes_from(tmp_path, key):
    f = tmp_path / "config.txt"
    f.write_text(f"x = 1\nkey = {key}\n", encoding="utf-8")
    assert (
        secret_files.secret_reason("config.txt", str(f), "config.txt")
        == "`config.txt` holds the value of UNIT_TEST_KEY"
    )
    (tmp_path / "plain.txt").write_text("nothing here\n", encoding="utf-8")
    assert secret_files.secret_reason("plain.txt", str(tmp_path / "plain.txt"), "plain.txt") is None


def test_a_value_across_two_read_chunks_is_found(tmp_path, key, monkeypatch):
    monkeypatch.setattr(secret_files, "_CHUNK", 64)
    f = tmp_path / "big.log"
    f.write_bytes(b"." * 50 + key.encode() + b"." * 200)
    assert secret_files.value_in_file(str(f)) == "UNIT_TEST_KEY"


def test_only_the_first_scan_limit_bytes_are_read(tmp_path, key, monkeypatch):
    monkeypatch.setattr(secret_files, "SCAN_LIMIT", 100)
    f = tmp_path / "big.log"
    f.write_bytes(b"." * 200 + key.encode())
    assert secret_files.value_in_file(str(f)) is None


def test_a_fifo_or_a_directory_is_never_read_and_the_check_does_not_block(tmp_path, key):
    os.mkfifo(tmp_path / "pipe")
    assert secret_files.value_in_file(str(tmp_path / "pipe")) is None
    assert secret_files.secret_reason(".env", str(tmp_path), ".env") is None  # a directory named like one


def test_a_link_to_a_secret_file_says_where_it_leads(tmp_path):
    (tmp_path / ".env").write_text("A=1\n", encoding="utf-8")
    os.symlink(".env", tmp_path / "notes.txt")
    real = os.path.realpath(tmp_path / "notes.txt")
    assert secret_files.secret_reason("notes.txt", real, ".env") == "`notes.txt` may hold secrets (it leads to `.env`)"


def tree(root: Path) -> str:
    (root / "src" / "keys").mkdir(parents=True)
    (root / ".env").write_text("A=1\n", encoding="utf-8")
    (root / "src" / "keys" / "id_rsa").write_text("k\n", encoding="utf-8")
    (root / "notes.txt").write_text("n\n", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "id_rsa").write_text("not walked\n", encoding="utf-8")
    return str(root)


@pytest.mark.parametrize(
    ("argv", "opaque", "expected"),
    [
        (["cat", ".e*"], True, ["`.env` may hold secrets (`.e*` may expand to it)"]),
        (["cat", "*"], True, []),  # bash's `*` skips dot files
        (["cat", "n*"], True, []),
        (["cat", ".e*"], False, []),  # a quoted pattern is a literal word: the analysis saw no glob
        (
            ["grep", "-rh", "KEY", "."],
            False,
            ["`grep` reads every file under `.`, which holds `.env`, `src/keys/id_rsa`"],
        ),
        (["grep", "-r", "KEY"], False, ["`grep` reads every file under `.`, which holds `.env`, `src/keys/id_rsa`"]),
        (["grep", "-r", "KEY", "notes.txt"], False, []),
        (["grep", "KEY", "src"], False, []),  # not recursive
        (["rg", "KEY"], False, ["`rg` reads every file under `.`, which holds `src/keys/id_rsa`"]),  # hidden skipped
        (["rg", "--hidden", "KEY"], False, ["`rg` reads every file under `.`, which holds `.env`, `src/keys/id_rsa`"]),
        (["rg", "-e", "KEY", "src"], False, ["`rg` reads every file under `src`, which holds `src/keys/id_rsa`"]),
        (["rg", "KEY", "notes.txt"], False, []),
        (["diff", "-r", "src", "src"], False, ["`diff` reads every file under `src`, which holds `src/keys/id_rsa`"]),
        (["ls", "-R"], False, []),
        (["git", "show", "HEAD:.env"], False, ["`.env` may hold secrets (`git show` reads it from the repository)"]),
        (
            ["git", "-C", "x", "log", "-p", "--", "sub/.env"],
            False,
            ["`sub/.env` may hold secrets (`git log` reads it from the repository)"],
        ),
        (
            ["git", "cat-file", "-p", "v1:keys/id_rsa"],
            False,
            ["`keys/id_rsa` may hold secrets (`git cat-file` reads it from the repository)"],
        ),
        (["git", "add", ".env"], False, []),  # writes the index, shows nothing
        (["git", "show", "HEAD:README.md"], False, []),
    ],
)
def test_what_a_command_reads_without_naming_it(tmp_path, argv, opaque, expected):
    got = secret_files.unnamed_reads([argv], tree(tmp_path), opaque)
    assert [g.removesuffix(": they may hold secrets") for g in got] == expected


def test_a_tree_too_large_to_walk_is_taken_to_hold_one(tmp_path, monkeypatch):
    monkeypatch.setattr(secret_files, "WALK_LIMIT", 2)
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("x", encoding="utf-8")
    got = secret_files.unnamed_reads([["grep", "-r", "x", "."]], str(tmp_path), False)
    assert got == ["`grep` reads more files under `.` than can be checked for secrets"]
