"""The user's `[sandbox]` table (what every command may also read and write) and the toolchains' per-project caches,
checked by their effects: what a real sandboxed process could read and write, what exists on disk afterwards, and
what the config file's reader refuses (runtime.config, runtime.sandbox.grants, runtime.sandbox.build_spec)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from permissions.confinement import READ_ONLY, Confinement
from runtime import processes, sandbox
from runtime.config import parse_sandbox
from runtime.models.config import ConfigError
from runtime.sandbox import build_spec, grants, session_tmpdir

pytestmark = [pytest.mark.timeout(30)]
needs_landlock = pytest.mark.skipif(not sandbox.support().active, reason="no Landlock on this system")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh home directory (nothing cached yet) with its own cache dir, and no grants configured."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("XDG_CACHE_HOME", str(h / ".cache"))
    for var in ("PIP_CACHE_DIR", "npm_config_cache", "NPM_CONFIG_CACHE", "CARGO_HOME", "GOCACHE", "GOMODCACHE"):
        monkeypatch.delenv(var, raising=False)
    grants.configure(grants.NONE)
    yield h.resolve()
    grants.configure(grants.NONE)


def _ws(tmp_path: Path, name: str = "ws") -> Path:
    ws = tmp_path / name
    ws.mkdir()
    return ws.resolve()


async def _run(ws: Path, command: str, confinement: Confinement = Confinement()) -> processes.ExecResult:
    spec = build_spec(confinement, [str(ws)], tmpdir=session_tmpdir("sess_grants"), grace=processes.EXEC_GRACE)
    env = sandbox.child_env(dict(os.environ), spec)
    return await processes.run_exec(["/bin/bash", "-c", command], cwd=str(ws), env=env, timeout=20, spec=spec)


# ---- the config file's table ---------------------------------------------------------------------------------
def test_the_sandbox_table_takes_absolute_and_home_paths_and_expands_the_home(home):
    got = parse_sandbox({"read": ["~/.m2", "/opt/sdk/"], "write": ["~/.cache/pip", "~"]}, "config file c.toml")
    assert got.read == (str(home / ".m2"), "/opt/sdk")
    assert got.write == (str(home / ".cache" / "pip"), str(home))


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"write": [".cache"]}, "sandbox.write[0] = '.cache': expected an absolute path or one that starts with ~/"),
        ({"read": ["~other/x"]}, "sandbox.read[0] = '~other/x': expected an absolute path or one that starts with ~/"),
        ({"write": "~/.npm"}, "sandbox.write = '~/.npm': expected a list"),
        ({"read": [3]}, "sandbox.read[0] = 3: expected a string"),
        ({"writes": []}, "sandbox.writes: unknown key (expected one of: network, read, write)"),
        ("~/.npm", "sandbox = '~/.npm': expected a table"),
    ],
)
def test_a_sandbox_table_it_cannot_read_exactly_stops_the_start(table, message):
    with pytest.raises(ConfigError) as info:
        parse_sandbox(table, "config file c.toml")
    assert message in str(info.value) and str(info.value).startswith("config file c.toml: ")


# ---- write grants ------------------------------------------------------------------------------------------------
def test_a_write_grant_that_does_not_exist_is_created_0700_and_exactly_it_is_granted(tmp_path, home):
    ws = _ws(tmp_path)
    wanted = home / ".gradle" / "caches"
    spec = build_spec(Confinement(), [str(ws)], tmpdir=None, user=grants.UserGrants(write=(str(wanted),)))
    assert wanted.is_dir()
    for made in (home / ".gradle", wanted):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert str(wanted) in spec.write
    assert str(home / ".gradle") not in spec.write and str(home) not in spec.write


def test_write_grants_do_not_reach_a_call_that_writes_nothing_and_read_grants_reach_every_call(tmp_path, home):
    ws = _ws(tmp_path)
    (home / ".m2").mkdir()
    user = grants.UserGrants(read=(str(home / ".m2"),), write=(str(home / ".npm"),))
    spec = build_spec(READ_ONLY, [str(ws)], tmpdir=None, user=user)
    assert not any(p.startswith(str(home)) for p in spec.write)
    assert str(home / ".m2") in spec.read


@needs_landlock
@pytest.mark.anyio
async def test_a_command_writes_a_granted_dir_and_nothing_beside_or_above_it(tmp_path, home):
    ws = _ws(tmp_path)
    grants.configure(grants.UserGrants(write=(str(home / ".gradle"),)))
    res = await _run(ws, f"touch {home}/.gradle/ok && echo granted; touch {home}/.gradle-x {home}/above")
    assert "granted" in res.stdout
    assert (home / ".gradle" / "ok").exists()
    assert not (home / ".gradle-x").exists() and not (home / "above").exists()


@needs_landlock
@pytest.mark.anyio
async def test_a_write_grant_holding_the_agents_config_dir_leaves_that_dir_read_only(tmp_path, home, monkeypatch):
    ws = _ws(tmp_path)
    config = home / ".config" / "gatewright"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("", encoding="utf-8")
    monkeypatch.setenv("GATEWRIGHT_CONFIG", str(config / "config.toml"))
    grants.configure(grants.UserGrants(write=(str(home / ".config"),)))
    res = await _run(ws, f"touch {home}/.config/other && echo ok; echo '[sandbox]' >> {config}/config.toml")
    assert "ok" in res.stdout and (home / ".config" / "other").exists()
    assert (config / "config.toml").read_text(encoding="utf-8") == ""


def test_a_config_file_named_by_the_environment_inside_the_workspace_grants_nothing_there(tmp_path, home):
    ws = _ws(tmp_path)
    inside = grants.UserGrants(write=(str(home / ".npm"),), source=str(ws / "gw.toml"), default_file=False)
    grants.configure(inside)
    spec = build_spec(Confinement(), [str(ws)], tmpdir=None)
    assert str(home / ".npm") not in spec.write
    assert "lies inside the workspace" in (grants.describe([str(ws)]) or "")
    # ... and it still applies to a session whose workspace does not hold it.
    other = _ws(tmp_path, "other")
    assert str(home / ".npm") in build_spec(Confinement(), [str(other)], tmpdir=None).write


# ---- the toolchains' caches ------------------------------------------------------------------------------------
@needs_landlock
@pytest.mark.anyio
async def test_tool_caches_go_to_a_per_project_dir_the_command_can_write_and_the_users_own_stay_untouched(
    tmp_path, home
):
    ws = _ws(tmp_path)
    res = await _run(
        ws,
        "for v in PIP_CACHE_DIR npm_config_cache CARGO_HOME GOCACHE GOMODCACHE UV_CACHE_DIR PRE_COMMIT_HOME "
        'XDG_CACHE_HOME; do d=$(printenv $v); mkdir -p "$d" && touch "$d/written" && echo "$v=$d"; done',
    )
    cache = grants.project_cache([str(ws)])
    assert cache is not None and cache.startswith(str(home / ".cache" / "gatewright" / "projects" / "ws-"))
    lines = dict(line.split("=", 1) for line in res.stdout.split())
    assert len(lines) == 8, res.stderr
    assert all(value.startswith(cache + "/") and Path(value, "written").exists() for value in lines.values())
    assert not (home / ".npm").exists() and not (home / ".cargo").exists()
    assert sorted(os.listdir(home / ".cache")) == ["gatewright"]


@needs_landlock
@pytest.mark.anyio
async def test_one_projects_commands_cannot_read_or_write_another_projects_cache(tmp_path, home):
    first, second = _ws(tmp_path, "first"), _ws(tmp_path, "second")
    await _run(first, 'mkdir -p "$PIP_CACHE_DIR" && echo planted > "$PIP_CACHE_DIR/wheel"')
    planted = Path(grants.project_cache([str(first)]) or "", "pip", "wheel")
    assert planted.read_text(encoding="utf-8") == "planted\n"
    res = await _run(second, f"cat {planted}; echo poisoned > {planted}; echo $PIP_CACHE_DIR")
    assert "planted" not in res.stdout and planted.read_text(encoding="utf-8") == "planted\n"
    assert res.stdout.strip().endswith("/pip") and str(planted.parent) not in res.stdout


def test_a_cache_variable_already_pointing_at_a_granted_place_is_kept(tmp_path, home, monkeypatch):
    ws = _ws(tmp_path)
    monkeypatch.setenv("PIP_CACHE_DIR", str(home / "pipcache"))
    spec = build_spec(Confinement(), [str(ws)], tmpdir=None, user=grants.UserGrants(write=(str(home / "pipcache"),)))
    env = dict(spec.env)
    assert env["PIP_CACHE_DIR"] == str(home / "pipcache")
    # The user granted npm's own default place: npm keeps using it.
    spec = build_spec(Confinement(), [str(ws)], tmpdir=None, user=grants.UserGrants(write=(str(home / ".npm"),)))
    assert dict(spec.env)["npm_config_cache"] == str(home / ".npm")
