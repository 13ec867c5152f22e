"""The ACP Registry manifest (`docs/acp-registry/gatewright/`, the registry's `<id>/agent.json` layout) validates
against the registry's published schema (vendored: `schemas/acp-registry/`, provenance in its SOURCE.md) and passes
what the registry's CI checks beyond it: the directory is the id, the version is this release and the uvx package
pins it, the command is `acp`, and the icon is a square 16×16 SVG drawn only with `currentColor`."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema

from runtime.version import __version__

REPO = Path(__file__).resolve().parents[1]
ENTRY = REPO / "docs" / "acp-registry" / "gatewright"
SCHEMA = REPO / "schemas" / "acp-registry" / "agent.schema.json"


def manifest() -> dict:
    return json.loads((ENTRY / "agent.json").read_text(encoding="utf-8"))


def test_the_manifest_validates_against_the_registrys_agent_schema():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(manifest())]
    assert errors == []


def test_the_manifest_is_this_release_installed_with_uvx_and_started_as_acp():
    entry = manifest()
    assert entry["id"] == ENTRY.name == "gatewright"
    assert entry["version"] == __version__
    assert entry["distribution"] == {"uvx": {"package": f"gatewright=={__version__}", "args": ["acp"]}}
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert entry["license"] == project["license"]["text"]
    assert project["scripts"]["gatewright"] == "acp_server.cli:main"


def test_the_description_says_where_it_is_sandboxed_and_where_not():
    text = manifest()["description"]
    assert "Linux" in text and "macOS" in text and "Windows" in text and "without a sandbox" in text


def test_the_icon_is_a_square_16_pixel_svg_in_current_color_only():
    svg = (ENTRY / "icon.svg").read_text(encoding="utf-8")
    assert manifest()["icon"] == "./icon.svg"
    assert re.search(r'<svg[^>]*\swidth="16"', svg) and re.search(r'<svg[^>]*\sheight="16"', svg)
    colours = re.findall(r'\b(?:fill|stroke)\s*[=:]\s*["\']?([^"\';\s>]+)', svg)
    assert colours and all(c.lower() in ("currentcolor", "none") for c in colours)
