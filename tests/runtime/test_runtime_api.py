"""The runtime's public API and its one composition root: hosts import names from `runtime`, and only
`runtime.assembly.build_runtime` assembles a session's agent (the delegation module builds its subagents' loops)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import runtime

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("acp_server", "runtime", "permissions")
# Constructors that make up a session's agent: calling one outside the composition root is a second assembly.
ASSEMBLY_PARTS = {"AgentRuntime", "ToolApprovalDecorator", "RoutingToolExecutor", "RetryingExecutor"}
ALLOWED = {"runtime/assembly.py": ASSEMBLY_PARTS, "runtime/delegation.py": {"AgentRuntime"}}


def test_every_public_name_is_listed_once_and_resolves():
    assert runtime.__all__ == sorted(runtime._EXPORTS)
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None, name


def test_importing_the_package_loads_none_of_its_modules():
    code = (
        "import sys, runtime; loaded = sorted(m for m in sys.modules if m.startswith('runtime.')); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})


# The runtime's public face for hosts: the package's names, and the modules that are themselves an API (the secret
# registry, the slash commands, the config file, the OS sandbox, asking the user, the transcript format, the version).
PUBLIC_MODULES = {
    "runtime",
    "runtime.secrets",
    "runtime.commands",
    "runtime.config",
    "runtime.sandbox",
    "runtime.elicitation",
    "runtime.recording",
    "runtime.version",
}


def test_the_acp_host_imports_only_the_runtime_public_api():
    reached = {}
    for path in sorted((ROOT / "acp_server").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            inner = [m for m in modules if m.split(".")[0] == "runtime" and m not in PUBLIC_MODULES]
            if inner:
                reached.setdefault(path.name, []).extend(inner)
    assert reached == {}


def _constructed(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in ASSEMBLY_PARTS:
                names.add(name)
    return names


def test_only_the_composition_root_assembles_a_session_agent():
    strays = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            extra = _constructed(path) - ALLOWED.get(rel, set())
            if extra:
                strays[rel] = sorted(extra)
    assert strays == {}
