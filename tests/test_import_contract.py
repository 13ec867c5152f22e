"""The import contract (ARCHITECTURE.md), read from the AST of every module of the three packages,
imports inside functions included:

- `permissions` imports neither `runtime` nor `acp_server`; `runtime` never imports `acp_server` (only tests, the
  benchmarks and `acp_server` itself do);
- no module imports a private (`_name`) module of another package;
- every import is at module level, where the import graph (and the types) can be seen: no function imports, except
  the sandbox helper's code and the documented exceptions below. What must load later (the start-up path of
  `gatewright acp`, heavy libraries) is an attribute of a *lazy place*, the one deferral mechanism
  (`permissions/lazy.py`): each package's `__init__` (`runtime.open_store`, `runtime.sandbox`, `acp_server.rpc`,
  `permissions.store`), `runtime/lazy.py` (`lazy.httpx2`, `lazy.mcp_types`, `lazy.anyio`…) and `permissions/lazy.py`
  (`lazy.sqlite3`, `lazy.tree_sitter`). A place imports nothing at run time, and types exactly what it loads.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("acp_server", "runtime", "permissions")
# What each package may import of the other two.
MAY_IMPORT = {"permissions": set(), "runtime": {"permissions"}, "acp_server": {"runtime", "permissions"}}

# The lazy places: module path -> what it may import at run time (the mechanism; nothing it defers).
LAZY_PLACES = {
    "permissions/lazy.py": {"__future__", "importlib"},
    "permissions/__init__.py": {"__future__", "permissions.lazy"},
    "runtime/__init__.py": {"__future__", "permissions.lazy"},
    "runtime/lazy.py": {"__future__", "permissions.lazy"},
    "acp_server/__init__.py": {"__future__", "permissions.lazy", "runtime.version"},
}

# The OS sandbox's modules are also the code of the sandbox helper, a small single-threaded process forked before
# any thread exists (runtime/sandbox/helper.py): each imports only what the side it runs on needs.
SANDBOX = "runtime/sandbox/"

# Imports kept inside a function on purpose, each with its reason: (module path, imported module) -> why.
EXCEPTIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Imported:
    path: str  # e.g. "runtime/loop.py"
    line: int
    module: str  # the absolute module name imported from
    names: tuple[str, ...]  # for `from m import a, b`: ("a", "b"); for `import m`: ()
    in_function: bool
    bound: tuple[str, ...] = ()  # the names the statement binds (`import a.b as c`: ("c",); `from m import a`: ("a",))
    typing_only: bool = False  # under `if TYPE_CHECKING:`


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(path: Path) -> list[Imported]:
    rel = path.relative_to(ROOT).as_posix()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found: list[Imported] = []

    def visit(node: ast.AST, in_function: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend(
                    Imported(
                        rel, child.lineno, a.name, (), in_function, (a.asname or a.name.split(".")[0],), typing_only
                    )
                    for a in child.names
                )
            elif isinstance(child, ast.ImportFrom):
                module = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join([*base, module] if module else base)
                found.append(
                    Imported(
                        rel,
                        child.lineno,
                        module,
                        tuple(a.name for a in child.names),
                        in_function,
                        tuple(a.asname or a.name for a in child.names),
                        typing_only,
                    )
                )
            if _is_type_checking(child):
                assert isinstance(child, ast.If)
                for stmt in child.body:
                    visit(ast.Module([stmt], []), inner, True)
                for stmt in child.orelse:
                    visit(ast.Module([stmt], []), inner, typing_only)
            else:
                visit(child, inner, typing_only)

    visit(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return found


def _all_imports() -> list[Imported]:
    return [imp for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py")) for imp in _imports(path)]


def _top(module: str) -> str:
    return module.split(".")[0]


def test_the_packages_import_one_another_only_downwards():
    wrong = [
        f"{i.path}:{i.line} imports {i.module}"
        for i in _all_imports()
        if _top(i.module) in PACKAGES
        and _top(i.module) != i.path.split("/")[0]
        and _top(i.module) not in MAY_IMPORT[i.path.split("/")[0]]
    ]
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


def test_no_import_is_inside_a_function_but_the_sandbox_helpers_and_the_exceptions():
    stray = [
        f"{i.path}:{i.line} imports {i.module}"
        for i in _all_imports()
        if i.in_function and not i.path.startswith(SANDBOX) and (i.path, i.module) not in EXCEPTIONS
    ]
    assert stray == [], "import these at module level, or defer them through a lazy place (permissions/lazy.py)"


def test_every_documented_exception_is_still_needed():
    lazy = {(i.path, i.module) for i in _all_imports() if i.in_function}
    assert set(EXCEPTIONS) <= lazy, set(EXCEPTIONS) - lazy


def _calls(tree: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Call)
        and (
            isinstance(n.func, ast.Attribute)
            and n.func.attr == name
            or isinstance(n.func, ast.Name)
            and n.func.id == name
        )
        for n in ast.walk(tree)
    )


def test_the_lazy_places_are_the_only_deferral_mechanism():
    """Only the places have a module `__getattr__`, and only the mechanism imports by name at run time."""
    getattrs, by_name = set(), set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                defined = isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                for stmt in [*node.body, *node.orelse] if isinstance(node, ast.If) else [node]:
                    defined = (
                        defined
                        or isinstance(stmt, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "__getattr__" for t in stmt.targets)
                    )
                if defined:
                    getattrs.add(rel)
            if _calls(tree, "import_module") or _calls(tree, "__import__"):
                by_name.add(rel)
    assert getattrs == set(LAZY_PLACES)
    assert by_name == {"permissions/lazy.py"}


def test_the_lazy_places_import_nothing_at_run_time_but_the_mechanism():
    wrong = [
        f"{i.path}:{i.line} imports {i.module}"
        for i in _all_imports()
        if i.path in LAZY_PLACES and not i.typing_only and i.module not in LAZY_PLACES[i.path]
    ]
    assert wrong == []


def _place(path: str) -> ModuleType:
    return importlib.import_module(_module_name(ROOT / path))


def test_each_lazy_place_types_exactly_what_it_loads():
    """What mypy reads under `if TYPE_CHECKING:` is what the place's `_LAZY` table imports on first use."""
    for path in LAZY_PLACES:
        typed: dict[str, str | tuple[str, str]] = {}
        for i in _imports(ROOT / path):
            if not i.typing_only or _top(i.module) in ("typing", "collections"):
                continue
            if not i.names:  # `import a.b as name`
                typed[i.bound[0]] = i.module
                continue
            for name, bound in zip(i.names, i.bound, strict=True):
                typed[bound] = (i.module, name)
        table = dict(_place(path)._LAZY)
        # `from runtime import sandbox as sandbox` names the submodule the table lists as "runtime.sandbox".
        for name, target in table.items():
            if isinstance(target, str) and typed.get(name) == tuple(target.rsplit(".", 1)):
                typed[name] = target
        assert typed == table, path


def test_the_lazy_places_list_their_names_for_tools():
    """`__all__` is a literal list (what ruff and mypy read), the same names as the table's public part."""
    import permissions
    import runtime.lazy

    assert runtime.lazy.__all__ == sorted(runtime.lazy._LAZY)
    assert permissions.__all__ == sorted(permissions._EXPORTS)


def test_a_lazy_name_loads_on_first_use_and_then_is_a_plain_attribute():
    code = """
import sys
from runtime import lazy
assert "jsonschema" not in sys.modules and "jsonschema" not in vars(lazy)
validators = lazy.jsonschema.validators
assert "jsonschema" in sys.modules and vars(lazy)["jsonschema"] is sys.modules["jsonschema"]
try:
    lazy.no_such_module
except AttributeError as exc:
    assert "runtime.lazy" in str(exc) and "no_such_module" in str(exc), exc
else:
    raise AssertionError("an unknown name must be an AttributeError")
"""
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
    )


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
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
    )
    return set(out.stdout.split())


def test_the_start_up_path_loads_the_lazy_places_and_none_of_what_they_defer_for_later():
    start_up = _start_up_modules()
    assert {"acp_server.agent", "runtime.lazy", "permissions.lazy"} <= start_up, start_up
    # Of the modules the places defer, only the server (it answers) and the scripted model (its script is read
    # with the options) are loaded by then.
    deferred = {t for path in LAZY_PLACES for t in _place(path)._LAZY.values() if isinstance(t, str)}
    assert sorted(deferred & start_up) == ["acp_server.server", "runtime.models.scripted"], deferred & start_up
    assert "runtime.loop" not in start_up
