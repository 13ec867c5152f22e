"""Every process the agent starts goes through the sandbox's entry points (`runtime.processes.spawn`, `run_exec`,
`run_captured`, `ProcessTable.start`; the editor-terminal launcher). This reads the source of `acp_server`, `runtime`
and `permissions` and fails on any other place that starts a process: `subprocess`, the `os` spawn, fork and exec
families, `pty`, asyncio's and anyio's process APIs, `multiprocessing` and process pools, `webbrowser`, and libc's
`fork`/`clone`/`exec*` reached through ctypes, however they are imported or renamed.

The few places allowed to start a process outside `runtime.processes` are listed in `ALLOWED`, each with why
(ARCHITECTURE.md "Processes" lists every spawn site); an entry no longer needed fails too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("acp_server", "runtime", "permissions")

# Whole modules that exist to start processes, and the process-starting names of modules that also do other things.
SPAWNING_MODULES = frozenset({"subprocess", "multiprocessing", "pty", "webbrowser", "_posixsubprocess"})
SPAWNING_NAMES = frozenset(
    {
        *(f"os.{n}" for n in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "startfile")),
        *(f"os.{p}{s}" for p in ("exec", "spawn") for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
        "anyio.open_process",
        "anyio.run_process",
        "concurrent.futures.ProcessPoolExecutor",
        "platform.architecture",  # runs `file` on the interpreter
        "platform.popen",
    }
)
# Attribute calls that start a process whatever the object: an event loop's, anyio's, a Popen class anywhere.
SPAWNING_METHODS = frozenset(
    {"subprocess_exec", "subprocess_shell", "create_subprocess_exec", "create_subprocess_shell", "open_process"}
    | {"run_process", "Popen"}
)
# libc's through ctypes: counted in a module that can reach libc (it imports ctypes, or the sandbox's libc wrapper),
# where `x.fork()` is no session's fork.
LIBC_CALLS = frozenset(
    {"fork", "vfork", "clone", "clone3", "forkpty", "execve", "execv", "execvp", "execvpe", "fexecve", "system"}
    | {"popen", "posix_spawn", "posix_spawnp"}
)
LIBC_MODULES = ("ctypes", "runtime.sandbox._libc")


# (module path, enclosing function, what starts the process) → why it may.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("runtime/sandbox/client.py", "Spawner.__init__", "subprocess.Popen"): (
        "the sandbox helper itself, which every sandboxed spawn goes through: an isolated interpreter of the "
        "install (runtime/sandbox/boot.py) that applies the sandbox in each child before its command runs"
    ),
    ("runtime/sandbox/child.py", "Plan.start", "os.fork"): (
        "the sandbox: the helper (or the launcher) forks a spawn without namespaces, which applies Landlock first"
    ),
    ("runtime/sandbox/child.py", "Plan.start", "clone"): (
        "the sandbox: the helper (or the launcher) clones a spawn into its namespaces"
    ),
    ("runtime/sandbox/helper.py", "Helper._proxy", "os.fork"): (
        "the sandbox's network proxy for commands limited to named hosts, forked by the helper; it confines "
        "itself (Landlock: no files but its own directory) before it serves"
    ),
    ("runtime/sandbox/child.py", "Plan.exec_here", "os.execvpe"): "the sandbox: the command, after Landlock holds",
    ("runtime/sandbox/client.py", "DirectSpawner.spawn", "subprocess.Popen"): (
        "the last fallback when no sandbox helper can start at all (not even GATEWRIGHT_SANDBOX=off's): the command "
        "runs unconfined in its own process group, and the support, /status and the session's notice say so"
    ),
    ("runtime/sandbox/probe.py", "probe_network_filter", "os.fork"): (
        "the sandbox's own probe in the helper: a child that installs the no-network seccomp filter and tries a "
        "UDP socket, then exits; it runs no command"
    ),
    ("runtime/sandbox/child.py", "Plan._init", "os.posix_spawnp"): (
        "the sandbox: the namespace's init starts the command, after Landlock holds"
    ),
    ("acp_server/demo.py", "_Client.__init__", "subprocess.Popen"): (
        "`gatewright demo`, the user's own command, starts the gatewright binary an editor would start; "
        "everything that agent starts is sandboxed by it"
    ),
    ("acp_server/replay.py", "_Agent.__init__", "subprocess.Popen"): (
        "`gatewright replay --check`, the user's own command, starts the gatewright binary to re-drive a "
        "transcript (refusing, without --trust, one that would run commands); everything that agent starts is "
        "sandboxed by it"
    ),
}


@dataclass(frozen=True)
class Site:
    path: str
    function: str
    name: str
    line: int


class _Scanner(ast.NodeVisitor):
    """The process-starting calls and imports of one module, with import aliases resolved."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.aliases: dict[str, str] = {}  # local name → dotted name it stands for
        self.reaches_libc = False
        self.scope: list[str] = []
        self.sites: list[Site] = []

    def _add(self, name: str, node: ast.AST) -> None:
        self.sites.append(Site(self.path, ".".join(self.scope) or "<module>", name, getattr(node, "lineno", 0)))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.reaches_libc |= a.name in LIBC_MODULES
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                self.aliases.setdefault(a.name.split(".")[0], a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is None or node.level:
            return
        self.reaches_libc |= node.module in LIBC_MODULES or any(
            f"{node.module}.{a.name}" in LIBC_MODULES for a in node.names
        )
        for a in node.names:
            dotted = f"{node.module}.{a.name}"
            self.aliases[a.asname or a.name] = dotted
            if node.module.split(".")[0] in SPAWNING_MODULES or dotted in SPAWNING_NAMES:
                self._add(dotted, node)  # a name taken out of its module can be called under any name

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Call(self, node: ast.Call) -> None:
        name = self._dotted(node.func)
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name is not None and (name.split(".")[0] in SPAWNING_MODULES or name in SPAWNING_NAMES):
            self._add(name, node)
        elif attr in SPAWNING_METHODS or (attr in LIBC_CALLS and self.reaches_libc):
            self._add(name if name and name.split(".")[0] in ("os", "asyncio", "anyio") else attr, node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # `subprocess.PIPE` names a constant and starts nothing: only calls (above) and imported names count.
        self.generic_visit(node)


def scan_source(path: str, source: str) -> list[Site]:
    scanner = _Scanner(path)
    scanner.visit(ast.parse(source))
    # `from subprocess import PIPE` (a constant) is an import of a spawning module, but it starts nothing by itself.
    return [s for s in scanner.sites if not (s.name.startswith("subprocess.") and s.name.split(".")[1].isupper())]


def sites() -> Iterator[Site]:
    for package in PACKAGES:
        for file in sorted((REPO / package).rglob("*.py")):
            rel = file.relative_to(REPO).as_posix()
            yield from scan_source(rel, file.read_text(encoding="utf-8"))


def test_no_process_is_started_outside_the_sandboxs_entry_points():
    unexpected = [s for s in sites() if (s.path, s.function, s.name) not in ALLOWED]
    assert unexpected == [], "a process started outside runtime.processes and the sandbox: " + ", ".join(
        f"{s.path}:{s.line} {s.function} {s.name}" for s in unexpected
    )


def test_every_allowed_spawn_site_still_exists():
    found = {(s.path, s.function, s.name) for s in sites()}
    assert [k for k in ALLOWED if k not in found] == []


def test_architecture_lists_every_allowed_spawn_site():
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert [path for path, _, _ in ALLOWED if f"`{path}`" not in text] == []


# ---- the scanner finds what it must (so the tests above can fail) ----------------------------------------------------
SPAWNS = {
    "subprocess.run": "import subprocess\nsubprocess.run(['git'])\n",
    "subprocess.check_output": "from subprocess import check_output as co\nco(['git'])\n",
    "os.posix_spawnp": "import os\nos.posix_spawnp('rg', ['rg'], {})\n",
    "os.execvpe": "import os as o\ndef f():\n    o.execvpe('x', ['x'], {})\n",
    "os.system": "from os import system\nsystem('x')\n",
    "asyncio.create_subprocess_exec": "import asyncio\nasync def f():\n    await asyncio.create_subprocess_exec('x')\n",
    "subprocess_exec": "async def f(loop):\n    await loop.subprocess_exec(lambda: None, 'x')\n",
    "anyio.open_process": "import anyio\nasync def f():\n    await anyio.open_process(['x'])\n",
    "anyio.run_process": "from anyio import run_process\nasync def f():\n    await run_process(['x'])\n",
    "clone": "from runtime.sandbox._libc import libc\ndef f():\n    libc().clone(0)\n",
    "fork": "import ctypes\nctypes.CDLL(None).fork()\n",
    "multiprocessing.Process": "import multiprocessing\nmultiprocessing.Process(target=print).start()\n",
    "concurrent.futures.ProcessPoolExecutor": "from concurrent.futures import ProcessPoolExecutor\n",
    "pty.spawn": "import pty\npty.spawn(['sh'])\n",
    "webbrowser.open": "import webbrowser\nwebbrowser.open('http://x')\n",
}


def test_the_scan_finds_every_way_of_starting_a_process():
    missed = [name for name, source in SPAWNS.items() if not any(s.name == name for s in scan_source("x.py", source))]
    assert missed == []


def test_the_scan_does_not_count_what_starts_nothing():
    source = (
        "import os, platform, subprocess\nfrom subprocess import PIPE, DEVNULL\n"
        "platform.system(); os.getpid(); x = subprocess.PIPE; os.pidfd_open(1)\n"
        "def fork_session(agent):\n    agent.sessions.fork('s')\n"
    )
    assert [s.name for s in scan_source("x.py", source)] == []
