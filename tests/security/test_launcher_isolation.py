"""The sandbox's own Python processes run the install's code, never a workspace's: the editor-terminal launcher
(`terminal/create` runs it with the workspace as cwd) and the sandbox helper (started with the agent's cwd) both run
unconfined until they apply a sandbox, so a planted module they imported would run outside it.

Every plant writes a marker file outside the workspace when it runs in one of those processes (it checks its own
command line, so the agent's interpreter, which rightly honours the user's site directory, does not count); the
proof is that no marker exists and that the confined command still ran.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from permissions.confinement import Confinement
from runtime import sandbox
from runtime.sandbox import build_spec, session_tmpdir
from runtime.sandbox.boot import INSTALL_ROOT
from runtime.sandbox.client import Spawner
from runtime.sandbox.launcher_env import launcher_command
from tests.security.world import EditorTerminals, answer_with, attack, bash, make_world

pytestmark = [pytest.mark.timeout(60)]

# Module shadows a launcher or helper started in this directory could import: its own package, standard modules it
# imports after start-up, `os` (frozen, imported before sys.path exists: never shadowable, planted to prove it), and
# the hooks `site` imports.
CWD_PLANTS = (
    "runtime/__init__.py",
    "runtime/sandbox/__init__.py",
    "runtime/sandbox/__main__.py",
    "json.py",
    "os.py",
    "socket.py",
    "select.py",
    "signal.py",
    "contextlib.py",
    "ctypes/__init__.py",
    "sitecustomize.py",
    "usercustomize.py",
)


def plant_code(markers: Path, name: str) -> str:
    tag = name.replace("/", "_")
    return (
        "import sys\n"
        "if b'runtime.sandbox' in open('/proc/self/cmdline', 'rb').read():\n"
        f"    open({str(markers / ('MARK_' + tag))!r}, 'w').close()\n"
    )


def plant(base: Path, markers: Path, names: tuple[str, ...] = CWD_PLANTS) -> None:
    for name in names:
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(plant_code(markers, name), encoding="utf-8")


def user_site(home: Path) -> Path:
    """Where `site` looks for the user's packages with HOME=home (honoured by an interpreter outside a venv)."""
    rel = os.path.relpath(sysconfig.get_path("purelib", "posix_user", {"userbase": "/"}), "/")
    return home / ".local" / rel


def plant_environment(tmp: Path, markers: Path) -> dict[str, str]:
    """PYTHON* variables that would make an interpreter run planted code."""
    pypath = tmp / "pythonpath"
    plant(pypath, markers)
    startup = tmp / "startup.py"
    startup.write_text(plant_code(markers, "PYTHONSTARTUP"), encoding="utf-8")
    userbase = tmp / "userbase"
    site_dir = Path(sysconfig.get_path("purelib", "posix_user", {"userbase": str(userbase)}))
    site_dir.mkdir(parents=True)
    (site_dir / "usercustomize.py").write_text(plant_code(markers, "userbase_usercustomize"), encoding="utf-8")
    (site_dir / "evil.pth").write_text("import sys; exec(" + repr(plant_code(markers, "userbase_pth")) + ")\n")
    return {
        "PYTHONPATH": str(pypath),
        "PYTHONSTARTUP": str(startup),
        "PYTHONUSERBASE": str(userbase),
    }


def broken_home(tmp: Path) -> dict[str, str]:
    """A PYTHONHOME an interpreter that honours it cannot start from (no standard library there)."""
    return {"PYTHONHOME": str(tmp / "no-such-python-home")}


def plant_home(home: Path, markers: Path) -> None:
    site_dir = user_site(home)
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "usercustomize.py").write_text(plant_code(markers, "home_usercustomize"), encoding="utf-8")
    (site_dir / "evil.pth").write_text("import sys; exec(" + repr(plant_code(markers, "home_pth")) + ")\n")


def markers_in(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir() if p.name.startswith("MARK_"))


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, Path]:
    ws, markers, home = tmp_path / "ws", tmp_path / "markers", tmp_path / "home"
    for d in (ws, markers, home):
        d.mkdir()
    return ws.resolve(), markers.resolve(), home.resolve()


# ---- the launcher, run as an editor terminal runs it ---------------------------------------------------------------
@pytest.mark.parametrize("where", ["cwd", "PYTHONPATH and friends", "PYTHONHOME"])
def test_no_workspace_file_or_python_variable_runs_in_the_editor_terminal_launcher(places, where, tmp_path):
    ws, markers, home = places
    env = dict(os.environ, HOME=str(home))
    if where == "cwd":
        plant(ws, markers)
        plant_home(home, markers)
    elif where == "PYTHONHOME":
        env.update(broken_home(tmp_path))
    else:
        env.update(plant_environment(tmp_path, markers))
    spec = build_spec(Confinement(), [str(ws)], tmpdir=session_tmpdir("sess_launcher"), grace=0.3)
    exe, args = launcher_command(spec, ["/bin/bash", "-c", "echo ran > ran.txt"])
    p = subprocess.run([exe, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=30)
    assert markers_in(markers) == []
    assert p.returncode == 0, p.stderr
    assert (ws / "ran.txt").read_text() == "ran\n"


def test_a_shadow_beside_the_installed_package_is_not_imported_either(places, tmp_path):
    """The install's directory is on the launcher's sys.path, *after* the standard library: in an editable install
    that directory is a checkout (maybe the workspace), and a `json.py` at its top must not replace the standard
    module. (An install root of its own: the real package linked into it, shadows beside it.)"""
    ws, markers, _ = places
    install = tmp_path / "install"
    install.mkdir()
    for package in ("runtime", "permissions"):
        (install / package).symlink_to(Path(INSTALL_ROOT) / package)
    plant(install, markers, ("json.py", "socket.py", "select.py", "signal.py", "contextlib.py", "ctypes/__init__.py"))
    spec = build_spec(Confinement(), [str(ws)], tmpdir=session_tmpdir("sess_launcher"), grace=0.3)
    exe, args = launcher_command(spec, ["/bin/bash", "-c", f"echo ran > {ws}/ran.txt"])
    assert args[4] == INSTALL_ROOT
    args[4] = str(install)
    p = subprocess.run([exe, *args], cwd=install, capture_output=True, text=True, timeout=30)
    assert markers_in(markers) == []
    assert p.returncode == 0, p.stderr
    assert (ws / "ran.txt").read_text() == "ran\n"


# ---- the sandbox helper, started in the agent's working directory ---------------------------------------------------
def test_no_file_in_the_agents_working_directory_runs_in_the_sandbox_helper(places, monkeypatch):
    ws, markers, home = places
    plant(ws, markers)
    plant_home(home, markers)
    monkeypatch.chdir(ws)
    monkeypatch.setenv("HOME", str(home))
    helper = Spawner(None)  # a helper of its own, started here (the agent's shared one already runs)
    try:
        assert markers_in(markers) == []
        assert helper.proc.poll() is None
    finally:
        helper.sock.close()
        helper.proc.wait(5)
    assert markers_in(markers) == []


# ---- through the real binary and an editor's terminal ---------------------------------------------------------------
@pytest.mark.skipif(not sandbox.support().active, reason="no Landlock sandbox on this machine")
def test_a_workspace_full_of_shadows_runs_nothing_outside_the_sandbox_in_the_editors_terminal(spawn, tmp_path):
    """`gatewright acp` (its console script, as editors start it) in a workspace planted with every shadow, an
    editor whose terminal environment carries PYTHON* variables pointing at more: the command runs in the editor's
    terminal, confined, and no planted code ran in the launcher or the helper."""
    world = make_world(tmp_path)
    markers = world.outside
    plant(world.ws, markers)
    plant_home(world.home, markers)
    editor = EditorTerminals(answer_with("allow_once"), override=plant_environment(tmp_path, markers))
    # (PYTHONHOME is left out here: an interpreter honouring it fails to start, and no marker would show that.)
    run = attack(
        spawn,
        world,
        # (into a file that exists: without namespaces a root holding `.git` takes no new entries, docs/sandbox.md)
        [bash("echo ran >> notes.txt && echo terminal-ok")],
        mode="auto",
        responder=editor,
        caps={"terminal": True},
        console_script=True,
    )
    assert editor.commands, "the editor terminal was not used"
    assert markers_in(markers) == []
    assert "terminal-ok" in run.output(0)
    assert (world.ws / "notes.txt").read_text().endswith("ran\n")
