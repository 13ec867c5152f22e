"""Every `GATEWRIGHT_*` variable and every config key is declared once (`runtime.settings.VARIABLES`, the pydantic
models of `runtime.settings_models`), checked before anything runs (a bad value: one line naming it, what it got and
what it accepts, exit 2; for `acp` before any frame), documented exactly as declared, and remembered once checked so
that an unchanged configuration starts without pydantic."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson
import pytest

from runtime import settings, settings_models
from runtime.models.config import ConfigError
from tests.support.harness import REPO

pytestmark = pytest.mark.timeout(60)

CLI = "from acp_server.cli import main; raise SystemExit(main())"
DOCS = Path(REPO) / "docs" / "configuration.md"

# The values the issue found ignored, and what each line must say.
BAD = [
    ("GATEWRIGHT_LOG", "bogus", "one of DEBUG, INFO, WARNING, ERROR (any case)"),
    ("GATEWRIGHT_CONTEXT_WINDOW", "abc", "an integer of at least 1000"),
    ("GATEWRIGHT_MCP_TURN_WAIT", "abc", "a number of seconds of at least 0"),
    ("GATEWRIGHT_MCP_START_TIMEOUT", "abc", "a number of seconds greater than 0"),
    ("GATEWRIGHT_SANDBOX", "bogus", "one of off, landlock (any case)"),
    ("GATEWRIGHT_LIST_PAGE_SIZE", "abc", "an integer of at least 1"),
    ("GATEWRIGHT_MAX_FRAME_BYTES", "10", "an integer of at least 1024"),
    ("GATEWRIGHT_PERMISSION_TIMEOUT", "abc", "a number of seconds of at least 0"),
    ("GATEWRIGHT_MODE", "yolo", "one of safe, manual, auto, read-only"),
]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWRIGHT_")}
    env.update(
        PYTHONPATH=REPO,
        GATEWRIGHT_STATE_DIR=str(tmp / "state"),
        XDG_CONFIG_HOME=str(tmp / "xdg"),
        GATEWRIGHT_MODEL=f"scripted:{_script(tmp)}",
    )
    env.update(extra)
    return env


def _script(tmp: Path) -> Path:
    path = tmp / "model.json"
    if not path.exists():
        path.write_text('{"responses": [{"text": "hello"}]}')
    return path


def _gw(tmp: Path, *args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    (tmp / "ws").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        cwd=tmp / "ws",
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("command", ["acp", "run"])
@pytest.mark.parametrize(("name", "value", "accepts"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_variable_is_one_line_naming_it_what_it_got_and_what_it_accepts_and_exit_2(
    tmp_path, command, name, value, accepts
):
    env = _env(tmp_path, **{name: value})
    initialize = '{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}\n'
    proc = _gw(tmp_path, command, *(["hi"] if command == "run" else []), env=env, stdin=initialize)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""  # for acp: before the first frame
    assert proc.stderr == f"gatewright: {name}={value}: expected {accepts}\n"


def test_a_bad_config_value_names_the_file_the_key_what_it_got_and_what_it_accepts(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[providers.local]\nkind = "openai"\nfirst_token_timeout = "slow"\n')
    proc = _gw(tmp_path, "acp", env=_env(tmp_path, GATEWRIGHT_CONFIG=str(config)))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"gatewright: config file {config}: providers.local.first_token_timeout = 'slow': expected a number\n"
    )


def test_good_values_are_accepted_in_any_case_the_declaration_allows(tmp_path):
    env = _env(tmp_path, GATEWRIGHT_LOG="debug", GATEWRIGHT_SANDBOX="OFF", GATEWRIGHT_LIST_PAGE_SIZE="7")
    checked = settings.check(env)
    assert checked.get("GATEWRIGHT_LOG") == "DEBUG" and checked.get("GATEWRIGHT_SANDBOX") == "off"
    assert checked.get("GATEWRIGHT_LIST_PAGE_SIZE") == 7


def test_the_permission_timeout_comes_from_the_checked_settings(monkeypatch):
    monkeypatch.setenv("GATEWRIGHT_PERMISSION_TIMEOUT", "2.5")
    assert settings.permission_timeout() == 2.5
    monkeypatch.setenv("GATEWRIGHT_PERMISSION_TIMEOUT", "0")
    assert settings.permission_timeout() is None
    monkeypatch.setenv("GATEWRIGHT_PERMISSION_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="GATEWRIGHT_PERMISSION_TIMEOUT=soon: expected a number of seconds"):
        settings.permission_timeout()
    monkeypatch.delenv("GATEWRIGHT_PERMISSION_TIMEOUT")
    assert settings.permission_timeout() is None


# ---- remembered checks -------------------------------------------------------------------------------------------
_IMPORTS = """
import sys
from runtime import settings
checked = settings.check()
providers = sorted((checked.config or {}).get("providers", {}))
print("pydantic" in sys.modules, checked.get("GATEWRIGHT_MCP_TURN_WAIT"), providers)
"""


def _start(env: dict[str, str]) -> tuple[bool, str]:
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS], env=env, capture_output=True, text=True, timeout=30, check=True
    ).stdout.split(" ", 1)
    return out[0] == "True", out[1].strip()


def test_an_unchanged_configuration_is_checked_once_and_then_starts_without_pydantic(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[providers.local]\nkind = "openai"\nheaders = { "X-Team" = "secret-team-value" }\n')
    env = _env(tmp_path, GATEWRIGHT_CONFIG=str(config), GATEWRIGHT_MCP_TURN_WAIT="5")
    assert _start(env) == (True, "5.0 ['local']")  # checked: pydantic loaded
    assert _start(env) == (False, "5.0 ['local']")  # remembered
    cache = tmp_path / "state" / settings.CACHE_NAME
    assert oct(cache.stat().st_mode & 0o777) == "0o600"
    assert b"secret-team-value" not in cache.read_bytes()  # header values may be credentials: never stored
    assert settings.check(env).config["providers"]["local"]["headers"] == {"X-Team": "secret-team-value"}
    config.write_text('[providers.other]\nkind = "openai"\n')
    assert _start(env) == (True, "5.0 ['other']")  # a changed file is checked again
    env["GATEWRIGHT_MCP_TURN_WAIT"] = "6"
    assert _start(env) == (True, "6.0 ['other']")  # and so is a changed variable


def test_a_remembered_check_is_never_a_bad_value_accepted(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[providers.local]\nkind = "openai"\n')
    env = _env(tmp_path, GATEWRIGHT_CONFIG=str(config))
    settings.check(env)
    config.write_text('[providers.local]\nkind = "openia"\n')
    with pytest.raises(ConfigError, match="providers.local.kind = 'openia'"):
        settings.check(env)


def test_nothing_to_check_loads_no_pydantic_and_writes_nothing(tmp_path):
    env = _env(tmp_path)
    assert _start(env) == (False, "None []")
    assert not (tmp_path / "state").exists()


# ---- the docs ----------------------------------------------------------------------------------------------------
def test_the_docs_list_exactly_the_declared_variables_as_declared():
    rows = [line for line in DOCS.read_text(encoding="utf-8").splitlines() if line.startswith("| `GATEWRIGHT_")]
    assert rows == settings.docs_rows()


def _documented_keys() -> dict[str, set[str]]:
    """Every key of the config file's example in the docs, by table (`providers.NAME`, `models.NAME`...)."""
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    keys: dict[str, set[str]] = {name: set() for name in settings_models.TABLES}
    for block in blocks:
        doc = tomllib.loads(block)
        keys[""] |= set(doc)
        for name in ("permissions", "sandbox"):
            keys[name] |= set(doc.get(name, {}))
        for table in doc.get("providers", {}).values():
            keys["providers.NAME"] |= set(table)
        for table in doc.get("models", {}).values():
            keys["models.NAME"] |= set(table)
            keys["models.NAME.prices"] |= set(table.get("prices", {}))
    return keys


def test_the_docs_show_every_config_key_of_every_table_and_no_other():
    documented = _documented_keys()
    declared = {name: set(model.model_fields) for name, model in settings_models.TABLES.items()}
    assert documented == declared


def test_the_checked_values_stored_are_plain_json(tmp_path):
    """What is remembered is what pydantic answered, as JSON (no objects a later start could not read)."""
    env = _env(tmp_path, GATEWRIGHT_CONTEXT_WINDOW="4000")
    settings.check(env)
    stored = orjson.loads((tmp_path / "state" / settings.CACHE_NAME).read_bytes())
    assert stored["entries"][0]["values"] == {"GATEWRIGHT_CONTEXT_WINDOW": 4000}
