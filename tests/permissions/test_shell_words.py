"""permissions.shell_words against bash itself: every word it expands comes out as bash makes it (brace expansion,
quote removal, ANSI-C quoting), and a word whose value depends on more than its text is unknown, never guessed."""

from __future__ import annotations

import subprocess

import pytest

from permissions.shell_words import MAX_WORDS, expand

KNOWN = [
    ".{env,nothing}",
    "..{/other/.env,}",
    "a{b,c{d,e}}f",
    "{x,y}{1..2}",
    "{{a,b},c}",
    "{1..3}",
    "{5..1}",
    "{01..10..3}",
    "{-2..2}",
    "{a..e..2}",
    "x{,}y",
    "'{a,b}'",
    '"{a,b}"',
    "\\{a,b\\}",
    "{a}",
    "{a,b",
    "a}b",
    "{a,b}}",
    "{{a,b}",
    "a\\,b{c,d}",
    "{a,'b,c'}",
    ".e''nv",
    "$'\\x2eenv'",
    "$'\\056env'",
    "$'\\x41'{1,2}",
    "$'a\\'b'",
    "$'x'\\''y'",
    "$'\\e'x",
    "$'\\x4g'",
    "$'\\t'",
    '"a\\"b"{1,2}',
]
UNKNOWN = ["$HOME/.env", '"$x"', "`pwd`/.env", "$(pwd)/.env", "${x}{a,b}"]
UNKNOWN += ["$'\\u00e9'", "$'\\cA'", "$'\\x00a'", '$"x"']


def bash_words(word: str) -> list[str]:
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {word}"], capture_output=True, text=True, check=True)
    return out.stdout.split("\0")[:-1]


@pytest.mark.parametrize("word", KNOWN)
def test_a_word_expands_exactly_as_bash_expands_it(word):
    got = expand(word)
    assert got is not None
    assert [w for w in got if w] == [w for w in bash_words(word) if w]


@pytest.mark.parametrize("word", UNKNOWN)
def test_a_word_that_depends_on_more_than_its_text_is_unknown(word):
    assert expand(word) is None


def test_a_word_of_more_words_than_can_be_listed_is_unknown():
    assert expand(f"{{1..{MAX_WORDS + 1}}}") is None
    assert expand("{a,b}" * 9) is None
