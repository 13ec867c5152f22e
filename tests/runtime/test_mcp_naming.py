"""Names the model sees for MCP tools."""

from __future__ import annotations

import re

import pytest

from runtime.mcp.naming import MAX_LEN, exposed_name, hashed_name, is_clean, unique_server_names

VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("github", "create_issue", "mcp__github__create_issue"),
        ("my-server", "get-x", "mcp__my-server__get-x"),
        ("a_b", "c__d", "mcp__a_b__c__d"),
    ],
)
def test_clean_short_names_are_kept_readable(server, tool, expected):
    assert exposed_name(server, tool) == expected


@pytest.mark.parametrize(
    ("server", "tool"),
    [
        ("my server", "echo"),  # space
        ("a__b", "c"),  # would split ambiguously
        ("_a", "b"),  # leading underscore
        ("a_", "b"),  # trailing underscore
        ("srv", "weird name!"),
        ("srv", "ünïcode"),
        ("s" * 40, "t" * 40),  # too long
        ("", ""),
    ],
)
def test_anything_changed_gets_a_stable_hash_and_stays_valid(server, tool):
    name = exposed_name(server, tool)
    assert VALID.fullmatch(name), name
    assert name.startswith("mcp__")
    assert name == exposed_name(server, tool)  # deterministic
    assert not is_clean(server, tool)


def test_pairs_that_normalise_alike_get_different_names():
    a = exposed_name("my server", "echo")
    b = exposed_name("my_server", "echo")
    c = exposed_name("my.server", "echo")
    assert len({a, b, c}) == 3
    assert b == "mcp__my_server__echo"


def test_ambiguous_splits_never_collide():
    assert exposed_name("a__b", "c") != exposed_name("a", "b__c")


def test_long_names_are_cut_to_64_keeping_the_tool_part_informative():
    name = exposed_name("a-rather-long-server-name-for-tests", "search_all_the_tickets_in_the_whole_world")
    assert len(name) == MAX_LEN
    assert "search_all_the" in name


def test_a_taken_name_falls_back_to_the_hashed_form_then_a_longer_hash():
    plain = exposed_name("srv", "echo")
    hashed = exposed_name("srv", "echo", taken={plain})
    assert hashed == hashed_name("srv", "echo") and hashed != plain
    longer = exposed_name("srv", "echo", taken={plain, hashed})
    assert longer not in (plain, hashed) and VALID.fullmatch(longer)


def test_repeated_server_names_are_made_unique_by_position():
    assert unique_server_names(["fs", "git", "fs", "fs"]) == ["fs", "git", "fs-2", "fs-3"]
