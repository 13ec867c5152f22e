"""The distribution a user installs: the wheel carries every file the product reads at run time, and an install of
it (not the checkout) runs a real tool-using session. `.ci/run` also installs the wheel into a fresh venv and with
pipx; here it is built offline (`--no-build-isolation`) from a copy of the sources and unpacked with `pip --target`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("acp_server", "runtime", "permissions")


def _source_copy(dest: Path) -> Path:
    """The files a build sees, without the checkout's build leftovers (and without writing into the checkout)."""
    src = dest / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


def _runtime_data_files() -> set[str]:
    """Every file of the packages that is not Python source: what the product may read at run time."""
    out = set()
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*"):
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts:
                out.add(p.relative_to(ROOT).as_posix())
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = _source_copy(tmp)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(tmp / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (built,) = (tmp / "dist").glob("gatewright-*.whl")
    return built


def test_the_wheel_carries_every_file_the_product_reads_at_run_time(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    data = _runtime_data_files()
    assert {"runtime/tools/schemas/read_file.json", "runtime/prompts/system.md"} <= data
    assert data - names == set()
    from acp_server import __version__

    assert wheel.name.startswith(f"gatewright-{__version__}-")
    entry_points = zipfile.ZipFile(wheel).read(f"gatewright-{__version__}.dist-info/entry_points.txt").decode()
    assert "gatewright = acp_server.cli:main" in entry_points


def test_an_installed_wheel_runs_a_tool_using_session_from_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "input.txt").write_text("some input\n", encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "input.txt"}}]},
                    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "written\n"}}]},
                    {"text": "Done."},
                ]
            }
        ),
        encoding="utf-8",
    )
    (tmp_path / "config.toml").write_text("", encoding="utf-8")
    # Only the installed copy is importable as the product (the dependencies still come from this venv).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWRIGHT_")}
    env.update(
        PYTHONPATH=str(target),
        GATEWRIGHT_STATE_DIR=str(tmp_path / "state"),
        GATEWRIGHT_CONFIG=str(tmp_path / "config.toml"),
    )
    code = (
        "import sys, runtime, runtime.prompts; from acp_server.cli import main\n"
        f"assert runtime.__file__.startswith({str(target)!r}), runtime.__file__\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "run",
            "--model",
            f"scripted:{script}",
            "--mode",
            "auto",
            "--cwd",
            str(ws),
            "copy the input",
        ],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (ws / "out.txt").read_text(encoding="utf-8") == "written\n"
    assert "Done." in run.stdout
    version = subprocess.run(
        [sys.executable, "-c", code, "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    from acp_server import __version__

    assert (version.returncode, version.stdout) == (0, f"gatewright {__version__}\n")
