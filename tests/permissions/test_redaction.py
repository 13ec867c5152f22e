"""The secret matcher (`permissions.redaction.SecretMatcher`) every sink redacts with: whole values, and every run of
`RUN` (12) or more consecutive characters of a value. The end-to-end proof, through the real binary, is
tests/security/test_security_secret_files.py."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from permissions import redaction
from permissions.redaction import REDACTED, RUN, SecretMatcher

KEY = "sk-proj-Zq8vW2mN4xR7tY1uI9oP3aS6dF0gH5jK"
R = REDACTED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key {KEY} end", f"key {R} end"),
        (f"OPENAI_API_KEY={KEY}"[15:37] + "\n" + f"OPENAI_API_KEY={KEY}"[37:], f"{R}\n{R}"),  # cut -c16-37; cut -c38-
        (KEY[3:15], R),  # exactly RUN characters
        (KEY[3:14], KEY[3:14]),  # one fewer: not a run any matching can call a secret
        (f"a{KEY[:20]}b{KEY[20:]}c", f"a{R}b{R}c"),
        (KEY[::-1], KEY[::-1]),  # a transform: that is why reading a file that holds a key asks
        (KEY + KEY, R),  # adjacent runs are one marker
        ("nothing to see here at all", "nothing to see here at all"),
        ("", ""),
    ],
)
def test_a_value_and_every_run_of_twelve_of_its_characters_are_redacted(text, expected):
    assert SecretMatcher([KEY]).redact(text) == expected


def test_a_value_shorter_than_a_run_is_redacted_only_whole():
    m = SecretMatcher(["pw-0123456", KEY])
    assert m.redact("pw-0123456 pw-01234") == f"{R} pw-01234"
    assert m.found("x pw-0123456") and not m.found("pw-01234")


def test_runs_of_two_values_that_overlap_in_the_text_are_one_marker():
    other = "ghp_" + "A1b2C3d4E5f6G7h8I9j0"
    assert SecretMatcher([KEY, other]).redact(f"<{KEY[-14:]}{other[:13]}>") == f"<{R}>"


def test_encoded_text_is_matched_as_utf8_and_non_ascii_values_work():
    value = "pässwörd-ünïcödé-1234"
    m = SecretMatcher([value])
    assert m.found(("x " + value[2:15] + " y").encode()) and not m.found(b"plain ascii text, long enough")
    assert m.redact("«" + value[4:18] + "»") == f"«{R}»"


def test_a_text_with_a_lone_surrogate_is_still_scanned():
    text = "name\udcff" + KEY[5:25]
    assert SecretMatcher([KEY]).redact(text) == f"name\udcff{R}"


def test_the_permissions_sinks_redact_runs_of_the_registered_values_too(monkeypatch):
    monkeypatch.setattr(redaction, "_SOURCES", [lambda: [KEY]])
    assert KEY[10:24] not in redaction.redact(f"audit row quoting {KEY[10:24]}")


ALPHABET = string.ascii_letters + string.digits + "-_=/+. \n"


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.text(ALPHABET, min_size=RUN, max_size=60), min_size=1, max_size=4),
    pieces=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 60)), max_size=6),
    filler=st.lists(st.text(ALPHABET, max_size=30), min_size=7, max_size=7),
)
def test_no_run_of_twelve_characters_of_any_value_survives_redaction(values, pieces, filler):
    """Whatever text is built from pieces of the values and other characters, what comes out holds no `RUN`-long run
    of any value (the marker's own characters are not in the values' alphabet)."""
    text = filler[0]
    for k, (which, a, b) in enumerate(pieces):
        v = values[which % len(values)]
        text += v[min(a, b) : max(a, b)] + filler[k + 1]
    out = SecretMatcher(values).redact(text)
    grams = {v[i : i + RUN] for v in values for i in range(len(v) - RUN + 1)}
    assert not any(out[i : i + RUN] in grams for i in range(len(out) - RUN + 1))
    assert SecretMatcher(values).found(text) == (out != text)
