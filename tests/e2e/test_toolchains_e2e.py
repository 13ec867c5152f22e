"""Everyday toolchains through the real binary, sandboxed, in `auto` mode, on a fresh home directory (nothing cached,
nothing configured): `pip install` into a workspace venv from a PEP 503 index on loopback, `npm install && npm test`
against an npm registry on loopback, `uv sync` against the same index, `cargo build` with a git dependency and
`go test ./...`. Each must succeed, fill the project's own cache (runtime.sandbox.grants) and leave the user's own
caches untouched. A tool this machine does not have is skipped, unless GATEWRIGHT_REQUIRE_TOOLCHAINS=1 (CI)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import sandbox
from tests.support.harness import write_script
from tests.support.registries import NPM_NAME, NPM_VALUE, PY_NAME, PY_VALUE, Registries

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sandbox.support().active, reason="no Landlock on this system"),
]
# The interpreter running the tests, first on the agent's PATH as `python3` (a command naming a path outside the
# workspace would ask, even in auto mode).
PYTHON_BIN = os.path.dirname(sys.executable)


def _need(tool: str) -> str:
    found = shutil.which(tool) or shutil.which(tool, path=os.path.dirname(sys.executable))
    if found is None:
        if os.environ.get("GATEWRIGHT_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"{tool} is required here (GATEWRIGHT_REQUIRE_TOOLCHAINS=1) but not installed")
        pytest.skip(f"{tool} is not installed")
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h.resolve()


def _env(home: Path, path_first: str | None = None) -> dict[str, str]:
    """A fresh home for the agent and everything it starts; no pip configuration of this machine."""
    path = os.environ.get("PATH", os.defpath)
    return {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PIP_CONFIG_FILE": os.devnull,
        "PATH": f"{path_first}{os.pathsep}{path}" if path_first else path,
    }


def _run_in_auto(spawn: Any, tmp_path: Path, ws: Path, env: dict[str, str], command: str) -> dict[str, Any]:
    """One `bash` call in auto mode; its final raw output."""
    call = {"id": "call_tool", "name": "bash", "arguments": {"command": command, "timeoutMs": 150_000}}
    script = write_script(tmp_path / "m.json", [{"tool_calls": [call]}, {"text": "done"}])
    agent = spawn("--model", f"scripted:{script}", "--mode", "auto", env=env)
    agent.initialize()
    sid = agent.new_session(ws)
    assert agent.prompt(sid, "build it", timeout=170)["result"]["stopReason"] == "end_turn"
    assert not agent.agent_requests, "nothing is asked in auto mode"
    done = [u for u in agent.updates(sid) if u.get("toolCallId") == "call_tool" and u.get("rawOutput")]
    agent.close()
    raw: dict[str, Any] = done[-1]["rawOutput"]
    return raw


def _project_cache(home: Path) -> Path:
    found = glob.glob(str(home / ".cache" / "gatewright" / "projects" / "ws-*"))
    assert len(found) == 1, found
    return Path(found[0])


def test_pip_installs_into_a_workspace_venv_from_a_local_index_on_a_fresh_home(spawn, tmp_path, workspace, home):
    with Registries() as reg:
        command = (
            "python3 -m venv .venv && .venv/bin/pip install --disable-pip-version-check "
            f"--index-url {reg.pypi} {PY_NAME} && .venv/bin/python -c 'import demo_pkg; print(demo_pkg.VALUE)' && "
            ".venv/bin/pip cache dir"
        )
        raw = _run_in_auto(spawn, tmp_path, workspace, _env(home, PYTHON_BIN), command)
    assert raw["exitCode"] == 0, raw["stderr"]
    assert PY_VALUE in raw["stdout"]
    assert "not writable" not in raw["stderr"] and "cache has been disabled" not in raw["stderr"]
    assert any(f"/simple/{PY_NAME}/" in hit for hit in reg.hits)
    # pip's cache is the project's (it would have said "The cache has been disabled" if it could not write it), and
    # the user's own pip cache was never made.
    assert raw["stdout"].strip().splitlines()[-1] == str(_project_cache(home) / "pip")
    assert not (home / ".cache" / "pip").exists()


def test_npm_install_and_npm_test_work_against_a_local_registry_on_a_fresh_home(spawn, tmp_path, workspace, home):
    _need("npm")
    with Registries() as reg:
        (workspace / ".npmrc").write_text(f"registry={reg.npm}\naudit=false\nfund=false\nupdate-notifier=false\n")
        (workspace / "package.json").write_text(
            json.dumps(
                {
                    "name": "app",
                    "version": "0.0.1",
                    "private": True,
                    "dependencies": {NPM_NAME: "^1.0.0"},
                    "scripts": {"test": f"node -e \"console.log(require('{NPM_NAME}'))\""},
                }
            )
        )
        raw = _run_in_auto(spawn, tmp_path, workspace, _env(home), "npm install && npm test")
    assert raw["exitCode"] == 0, raw["stderr"]
    assert NPM_VALUE in raw["stdout"]
    assert (workspace / "node_modules" / NPM_NAME / "index.js").exists()
    assert (_project_cache(home) / "npm" / "_cacache").is_dir()
    assert not (home / ".npm").exists()


def test_uv_sync_works_against_a_local_index_on_a_fresh_home(spawn, tmp_path, workspace, home):
    uv = _need("uv")
    with Registries() as reg:
        (workspace / "pyproject.toml").write_text(
            f'[project]\nname = "app"\nversion = "0.1.0"\nrequires-python = ">=3.8"\ndependencies = ["{PY_NAME}"]\n'
            f'\n[[tool.uv.index]]\nurl = "{reg.pypi}"\ndefault = true\n'
        )
        env = {**_env(home, os.path.dirname(uv) + os.pathsep + PYTHON_BIN), "UV_PYTHON_DOWNLOADS": "never"}
        command = (
            f"uv sync --python python3 --default-index {reg.pypi} && "
            ".venv/bin/python -c 'import demo_pkg; print(demo_pkg.VALUE)'"
        )
        raw = _run_in_auto(spawn, tmp_path, workspace, env, command)
    assert raw["exitCode"] == 0, raw["stderr"]
    assert PY_VALUE in raw["stdout"] and any(f"/simple/{PY_NAME}/" in hit for hit in reg.hits)
    assert (_project_cache(home) / "uv").is_dir() and not (home / ".cache" / "uv").exists()


def _cargo_toolchain() -> str:
    """The directory of a real `cargo` and `rustc` (not rustup's proxies, which need the user's ~/.rustup)."""
    _need("cargo")
    found = subprocess.run(["rustup", "which", "cargo"], capture_output=True, text=True, check=False)
    if found.returncode == 0:
        return os.path.dirname(found.stdout.strip())
    return os.path.dirname(os.path.realpath(_need("cargo")))


def test_cargo_build_fetches_a_git_dependency_into_the_projects_cargo_home_on_a_fresh_home(
    spawn, tmp_path, workspace, home
):
    bin_dir = _cargo_toolchain()
    env = _env(home, bin_dir)
    dep = workspace / "vendor" / "depx"
    subprocess.run(
        ["cargo", "new", "-q", "--lib", "--vcs", "none", str(dep)], check=True, env={**os.environ, **env}, timeout=60
    )
    git = ["git", "-C", str(dep), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "dep"]):
        subprocess.run([*git, *args], check=True, timeout=30)
    app = workspace / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "main.rs").write_text('fn main() { println!("{}", depx::add(2, 3)); }\n')
    (app / "Cargo.toml").write_text(
        '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n'
        f'[dependencies]\ndepx = {{ git = "file://{dep}" }}\n'
    )
    raw = _run_in_auto(spawn, tmp_path, workspace, env, "cd app && cargo build && ./target/debug/app")
    assert raw["exitCode"] == 0, raw["stderr"]
    assert raw["stdout"].strip().endswith("5")
    assert (_project_cache(home) / "cargo" / "git").is_dir()
    assert not (home / ".cargo").exists()


def test_go_test_fills_the_projects_build_cache_on_a_fresh_home(spawn, tmp_path, workspace, home):
    _need("go")
    (workspace / "go.mod").write_text("module example.com/app\n\ngo 1.19\n")
    (workspace / "add.go").write_text("package app\n\nfunc Add(a, b int) int { return a + b }\n")
    (workspace / "add_test.go").write_text(
        'package app\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n'
        '\tif Add(2, 3) != 5 {\n\t\tt.Fatal("no")\n\t}\n}\n'
    )
    env = {**_env(home), "GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    raw = _run_in_auto(spawn, tmp_path, workspace, env, "go test ./...")
    assert raw["exitCode"] == 0, raw["stderr"] + raw["stdout"]
    assert "ok" in raw["stdout"] and "example.com/app" in raw["stdout"]
    assert any(files for _, _, files in os.walk(_project_cache(home) / "go-build"))
    assert not (home / ".cache" / "go-build").exists() and not (home / "go").exists()


def _said(agent: Any, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates(sid) if u.get("sessionUpdate") == "agent_message_chunk")


def _grant_turn(spawn: Any, tmp_path: Path, ws: Path, env: dict[str, str], home: Path) -> tuple[str, str]:
    """A command writing a granted dir and its parent (without naming them: a path a command names is approved with
    it), in auto mode; (its stdout, what `/status` said)."""
    command = 'touch "$HOME/.gradle/caches/ok" && echo wrote; touch "$HOME/.gradle/beside"; echo done'
    assert env["HOME"] == str(home)
    call = {"id": "call_tool", "name": "bash", "arguments": {"command": command}}
    script = write_script(tmp_path / "m.json", [{"tool_calls": [call]}, {"text": "done"}])
    agent = spawn("--model", f"scripted:{script}", "--mode", "auto", env=env)
    agent.initialize()
    sid = agent.new_session(ws)
    agent.prompt(sid, "go")
    out = [u for u in agent.updates(sid) if u.get("toolCallId") == "call_tool" and u.get("rawOutput")][-1]
    assert agent.prompt(sid, "/status")["result"]["stopReason"] == "end_turn"
    status = _said(agent, sid)
    agent.close()
    return str(out["rawOutput"]["stdout"]), status


def test_a_write_path_of_the_users_config_file_is_created_0700_and_exactly_it_is_writable(
    spawn, tmp_path, workspace, home
):
    config = home / ".config" / "gatewright" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[sandbox]\nwrite = ["~/.gradle/caches"]\n')
    stdout, status = _grant_turn(spawn, tmp_path, workspace, _env(home), home)
    assert "wrote" in stdout and (home / ".gradle" / "caches" / "ok").exists()
    assert not (home / ".gradle" / "beside").exists()
    assert oct((home / ".gradle").stat().st_mode & 0o777) == "0o700"
    assert "Every command may also write ~/.gradle/caches ([sandbox] in the config file)" in status


def test_a_config_file_inside_the_workspace_widens_nothing_and_status_says_so(spawn, tmp_path, workspace, home):
    inside = workspace / "gw.toml"
    inside.write_text('[sandbox]\nwrite = ["~/.gradle/caches"]\n')
    stdout, status = _grant_turn(spawn, tmp_path, workspace, {**_env(home), "GATEWRIGHT_CONFIG": str(inside)}, home)
    assert "wrote" not in stdout and not (home / ".gradle").exists()
    assert f"The [sandbox] read and write grants of {inside} are ignored: that config file lies inside" in status
