"""The requirements manifest is enforced in both directions (as the MCP Python SDK's
requirements coverage test does: https://github.com/modelcontextprotocol/python-sdk/tree/main/tests/interaction).

- every requirement has at least one test that exists: a test marked `@pytest.mark.req("<id>")`, or a
  `folder/file.py::test_name` listed in the manifest that is really defined there;
- every id a test names (`pytest.mark.req`) exists in the manifest, as a requirement (not a gap);
- ids are unique and well formed; gaps are data: a gap tied to a capability fails this test as soon as that
  capability is advertised (move it to the requirements, with tests).

Tests are found statically (AST), so this runs in milliseconds and sees every test file, selected or not.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.requirements_manifest import GAPS, REQUIREMENTS, RETIRED

TESTS_DIR = Path(__file__).resolve().parent
ID_SHAPE = re.compile(r"^(jsonrpc|acp|gw):[a-z0-9-]+(:[a-z0-9-]+)*$")


def _req_ids(decorator: ast.expr) -> list[str]:
    """The string args of a `pytest.mark.req(...)` decorator (empty for any other decorator)."""
    if not isinstance(decorator, ast.Call):
        return []
    f = decorator.func
    if (
        isinstance(f, ast.Attribute)
        and f.attr == "req"
        and isinstance(f.value, ast.Attribute)
        and f.value.attr == "mark"
    ):
        return [a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return []


def collect() -> tuple[set[str], dict[str, set[str]]]:
    """(every `folder/file.py::test_name` defined at module level, its path under tests/; requirement id → marked
    tests)."""
    defined: set[str] = set()
    marked: dict[str, set[str]] = defaultdict(set)
    for path in sorted(TESTS_DIR.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                node_id = f"{path.relative_to(TESTS_DIR).as_posix()}::{node.name}"
                defined.add(node_id)
                for dec in node.decorator_list:
                    for rid in _req_ids(dec):
                        marked[rid].add(node_id)
    return defined, marked


def test_requirement_and_gap_ids_are_unique_and_well_formed():
    """Our rule: ids are stable strings in one namespace each; no id is both met and a known gap."""
    ids = [r.id for r in REQUIREMENTS] + [g.id for g in GAPS] + list(RETIRED)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert [i for i in ids if not ID_SHAPE.match(i)] == []
    assert all(r.source and r.text for r in REQUIREMENTS)
    assert all(g.source and g.text and g.reason for g in GAPS)


def test_every_requirement_has_at_least_one_existing_test():
    """Manifest → tests: no requirement without a test, and every listed test node exists."""
    defined, marked = collect()
    listed_missing = sorted(t for r in REQUIREMENTS for t in r.tests if t.split("[")[0] not in defined)
    assert listed_missing == [], f"the manifest lists tests that do not exist: {listed_missing}"
    untested = sorted(r.id for r in REQUIREMENTS if not r.tests and not marked.get(r.id))
    assert untested == [], f"requirements without a test: {untested}"


def test_every_requirement_id_a_test_names_exists_in_the_manifest():
    """Tests → manifest: no orphan ids (a typo in a marker would otherwise prove nothing)."""
    _, marked = collect()
    known = {r.id for r in REQUIREMENTS}
    orphans = {rid: sorted(tests) for rid, tests in marked.items() if rid not in known}
    assert orphans == {}, f"tests name ids the manifest does not have (gaps cannot be proven): {orphans}"


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


@pytest.mark.parametrize("gap", [g for g in GAPS if g.capability], ids=lambda g: g.id)
def test_a_gap_tied_to_a_capability_is_not_advertised(gap):
    """ACP initialization: capabilities advertise what works. While a gap stands, its capability stays off; once
    someone advertises it, this fails until the gap becomes a requirement with tests."""
    from acp_server.agent import AgentConfig, GatewrightAgent

    result = GatewrightAgent(AgentConfig()).answer_initialize({"protocolVersion": 1, "clientCapabilities": {}})
    value = _at(result, gap.capability or ())
    assert value in (None, False), f"{gap.id}: {'.'.join(gap.capability or ())} is advertised as {value!r}"
