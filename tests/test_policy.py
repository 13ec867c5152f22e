"""The policy as a table: every mode × effect × path class (deny beats ask beats allow; fails closed)."""

from __future__ import annotations

import itertools

import pytest

from permissions.modes import parse_mode
from permissions.policy import CallFacts, PathFact, decide
from permissions.rules import RuleStore

MODES = ["manual", "safe", "auto", "read-only"]
EFFECTS = ["read", "write", "execute", "other"]
PATHS = ["none", "inside", "outside", "protected"]

EXPECTED = {
    # (mode, effect, path class) -> action
    **{("manual", e, p): "ask" for e in EFFECTS for p in PATHS},
    **{("safe", "read", p): "allow" for p in ("none", "inside", "protected")},
    ("safe", "read", "outside"): "ask",
    **{("safe", e, p): "ask" for e in ("write", "execute", "other") for p in PATHS},
    **{("auto", e, p): "allow" for e in EFFECTS for p in ("none", "inside")},
    **{("auto", e, "outside"): "ask" for e in EFFECTS},
    ("auto", "read", "protected"): "allow",
    **{("auto", e, "protected"): "ask" for e in ("write", "execute", "other")},
    **{("read-only", "read", p): "allow" for p in ("none", "inside", "protected")},
    ("read-only", "read", "outside"): "deny",
    **{("read-only", e, p): "deny" for e in ("write", "execute", "other") for p in PATHS},
}


def facts(effect: str, path: str, **kw) -> CallFacts:
    paths = () if path == "none" else (PathFact(f"/x/{path}", path, effect != "read"),)  # type: ignore[arg-type]
    return CallFacts("tool", effect, "tool:{}", paths, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("mode", "effect", "path"), list(itertools.product(MODES, EFFECTS, PATHS)))
def test_every_mode_effect_and_path_class_has_the_documented_decision(mode, effect, path):
    assert decide(facts(effect, path), mode).action == EXPECTED[(mode, effect, path)]  # type: ignore[arg-type]


def test_an_unknown_or_missing_mode_never_fails_open():
    assert decide(facts("write", "inside"), None).action == "ask"
    assert decide(facts("write", "inside"), "yolo").action == "ask"  # type: ignore[arg-type]


def test_parse_mode_rejects_unknown_names_and_defaults_to_safe():
    assert parse_mode(None) == "safe"
    assert parse_mode("READ_ONLY") == "read-only"
    with pytest.raises(ValueError):
        parse_mode("yolo")


def test_proven_read_only_commands_run_in_read_only_and_safe_modes():
    f = facts("execute", "none", proven_read_only=True)
    assert decide(f, "read-only").action == "allow"
    assert decide(f, "safe").action == "allow"
    assert decide(f, "manual").action == "ask"


def test_dangerous_reasons_ask_even_in_auto():
    assert decide(facts("execute", "none", dangerous=("pipes a download into a shell",)), "auto").action == "ask"


def test_read_only_hints_are_honoured_in_safe_only():
    f = facts("other", "none", read_only_hint=True)
    assert decide(f, "safe").action == "allow"
    assert decide(f, "manual").action == "ask"
    assert decide(f, "read-only").action == "allow"


def test_deny_rules_beat_allow_rules_and_modes():
    rules = RuleStore()
    f = facts("write", "inside")
    rules.add("allow", f, "x")
    assert decide(f, "safe", rules).action == "allow"
    rules.add("deny", f, "x")
    assert decide(f, "auto", rules).action == "deny"


def test_rules_match_identical_calls_only():
    rules = RuleStore()
    rules.add("allow", CallFacts("bash", "execute", "bash:npm test"), "npm test")
    assert decide(CallFacts("bash", "execute", "bash:npm test; rm -rf x"), "safe", rules).action == "ask"
    assert decide(CallFacts("bash", "execute", "bash:npm test"), "safe", rules).action == "allow"


def test_read_only_mode_is_not_overridden_by_an_allow_rule():
    rules = RuleStore()
    f = facts("write", "inside")
    rules.add("allow", f, "x")
    assert decide(f, "read-only", rules).action == "deny"
