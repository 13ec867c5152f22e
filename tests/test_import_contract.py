"""The import contract (DESIGN.md "Layout", issue 17 item 3), read from the AST of every module of the three packages,
imports inside functions included:

- `permissions` imports neither `runtime` nor `acp_server`; `runtime` never imports `acp_server` (only tests, the
  benchmarks and `acp_server` itself do);
- no module imports a private (`_name`) module of another package;
- an import inside a function is one of the documented kinds below; every other import is at module level, where the
  import graph (and the types) can be seen. The runtime's own lazy place is `runtime/__init__.py` (PEP 562): a host
  that must stay light does `import runtime` at module level and uses `runtime.name` when it needs it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("acp_server", "runtime", "permissions")
# What each package may import of the other two.
MAY_IMPORT = {"permissions": set(), "runtime": {"permissions"}, "acp_server": {"runtime", "permissions"}}

# Third-party and standard modules that cost real time to import, imported only by the function that needs them:
# the MCP SDK (over a second), tree-sitter (shell analysis), jsonschema (argument checks), the HTTP client and the
# terminal UI libraries (only `run` and `chat` use them), pydantic (the MCP SDK's models; the wire models are not), and
# sqlite3 (a session object, `permissions.store` and the start-up path must not load it:
# tests/permissions/test_permissions_rules).
HEAVY = {"mcp", "mcp_types", "tree_sitter", "tree_sitter_bash", "jsonschema", "httpx2", "rich", "prompt_toolkit",
         "pydantic", "sqlite3"}

# The OS sandbox's modules are also the code of the sandbox helper, a small single-threaded process forked before
# any thread exists (runtime/sandbox/helper.py): each imports only what the side it runs on needs.
SANDBOX = "runtime/sandbox/"

# Imports kept inside a function on purpose, each with its reason: (module path, imported module) -> why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("runtime/recording.py", "permissions.store"): "informational meta field, guarded: a recording never fails for it",
    ("runtime/recording.py", "runtime.config"): "informational meta field, guarded: a recording never fails for it",
}
# Modules whose imports are about to move with them (the last test below says when an entry can go).
PENDING: dict[str, str] = {}


@dataclass(frozen=True)
class Imported:
    path: str  # e.g. "runtime/loop.py"
    line: int
    module: str  # the absolute module name imported from
    names: tuple[str, ...]  # for `from m import a, b`: ("a", "b"); for `import m`: ()
    in_function: bool


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> list[Imported]:
    rel = path.relative_to(ROOT).as_posix()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found: list[Imported] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend(Imported(rel, child.lineno, a.name, (), in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                module = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join([*base, module] if module else base)
                found.append(Imported(rel, child.lineno, module, tuple(a.name for a in child.names), in_function))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _all_imports() -> list[Imported]:
    return [imp for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py")) for imp in _imports(path)]


def _top(module: str) -> str:
    return module.split(".")[0]


def test_the_packages_import_one_another_only_downwards():
    wrong = [f"{i.path}:{i.line} imports {i.module}" for i in _all_imports()
             if _top(i.module) in PACKAGES and _top(i.module) != i.path.split("/")[0]
             and _top(i.module) not in MAY_IMPORT[i.path.split("/")[0]]]
    assert wrong == []


def test_no_module_imports_another_packages_private_modules():
    wrong = []
    for i in _all_imports():
        own = i.path.split("/")[0]
        if _top(i.module) not in PACKAGES or _top(i.module) == own:
            continue
        # `from runtime.sandbox import _libc` names a private module as well as `import runtime.sandbox._libc`.
        modules = [i.module, *(f"{i.module}.{n}" for n in i.names)]
        if any(part.startswith("_") and not part.startswith("__") for m in modules for part in m.split(".")[1:]):
            wrong.append(f"{i.path}:{i.line} imports {i.module} {list(i.names)}")
    assert wrong == []


def _start_up_modules() -> set[str]:
    """The packages' modules loaded when `gatewright acp` answers `initialize`
    (tests/acp_server/test_startup_path.py)."""
    code = """
import sys, tempfile, os
d = tempfile.mkdtemp()
open(os.path.join(d, "m.json"), "w").write('{"responses": [{"text": "hi"}]}')
from acp_server.cli import _check_options, build_parser
import acp_server.server
from acp_server.agent import AgentConfig, GatewrightAgent
checked = _check_options(build_parser().parse_args(["acp", "--model", "scripted:" + os.path.join(d, "m.json")]))
agent = GatewrightAgent(AgentConfig(mode=checked.mode, model_factory=checked.factory))
agent.answer_initialize({"protocolVersion": 1, "clientCapabilities": {}})
print(" ".join(m for m in sys.modules if m.split(".")[0] in ("acp_server", "runtime", "permissions")))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=ROOT, capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT)})
    return set(out.stdout.split())


def _why_lazy(i: Imported, start_up: set[str]) -> str | None:
    module = _module_name(ROOT / i.path)
    if module in start_up:
        return "on the start-up path: `initialize` must not pay for it"
    if _top(i.module) in HEAVY:
        return "a heavy dependency, imported by the code that needs it"
    if i.path.startswith(SANDBOX):
        return "the sandbox helper's code: it imports only what its side runs"
    return EXCEPTIONS.get((i.path, i.module)) or PENDING.get(i.path)


def test_imports_inside_functions_are_only_the_documented_kinds():
    start_up = _start_up_modules()
    assert "acp_server.agent" in start_up and "runtime.loop" not in start_up, start_up
    stray = [f"{i.path}:{i.line} imports {i.module}" for i in _all_imports()
             if i.in_function and _why_lazy(i, start_up) is None]
    assert stray == [], "import these at module level (or document why not in this test)"


def test_every_documented_exception_is_still_needed():
    imports = _all_imports()
    lazy = {(i.path, i.module) for i in imports if i.in_function}
    assert set(EXCEPTIONS) <= lazy, set(EXCEPTIONS) - lazy
    assert set(PENDING) <= {path for path, _ in lazy}, set(PENDING) - {path for path, _ in lazy}
