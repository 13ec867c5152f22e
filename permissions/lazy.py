"""Deferred imports: the one mechanism the three packages use, and the heavy modules `permissions` defers with it.

A module that must not pay for an import when it loads (the start-up path of `gatewright acp`, or a heavy dependency
only some calls need) never imports inside a function. It names a *lazy place* at module level and uses an attribute
of it: `from runtime import lazy` … `lazy.httpx2.AsyncClient(...)`, or `import runtime` … `runtime.open_store(...)`.
A lazy place lists what it defers twice: as real imports under `if TYPE_CHECKING:` (what type checkers and readers
see, with the real types) and in its `_LAZY` table, which `deferred` turns into its PEP 562 `__getattr__`: the first
access imports the module (and takes the attribute) and binds it in the place, so later look-ups are plain.

The places (tests/test_import_contract.py: there are no others, and each table matches its typed imports):
- each package's `__init__`: its public names and the submodules other modules defer (`runtime.sandbox`,
  `permissions.store`, `acp_server.rpc`);
- `runtime/lazy.py`: the heavy third-party and standard modules the runtime and the ACP host load only when used, and
  the runtime's own modules a start-up module defers;
- this module, for `permissions` (which imports no other package): sqlite3, tree-sitter and the Aho-Corasick
  automaton of secret redaction.

This module imports nothing at run time but `importlib`: the sandbox helper (`python -S`, no `typing`) loads it.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (see the docstring).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3 as sqlite3
    from collections.abc import Callable, Mapping

    import ahocorasick_rs as ahocorasick_rs
    import tree_sitter as tree_sitter
    import tree_sitter_bash as tree_sitter_bash


def deferred(namespace: dict[str, object], table: Mapping[str, str | tuple[str, str]]) -> Callable[[str], object]:
    """The PEP 562 `__getattr__` of the module whose globals are `namespace`: `table` maps each deferred name to the
    module it is (`"tree_sitter"`) or to a module and one of its attributes (`("runtime.store", "SessionStore")`)."""
    place = namespace["__name__"]

    def __getattr__(name: str) -> object:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {place!r} has no attribute {name!r}")
        if isinstance(target, str):
            value: object = importlib.import_module(target)
        else:
            value = getattr(importlib.import_module(target[0]), target[1])
        namespace[name] = value  # the next look-up is a plain module attribute
        return value

    return __getattr__


_LAZY: dict[str, str | tuple[str, str]] = {
    "ahocorasick_rs": "ahocorasick_rs",  # secret runs (`redaction.SecretMatcher`), when a text is first checked
    "sqlite3": "sqlite3",  # rule and audit databases: a session object and the start-up path never load it
    "tree_sitter": "tree_sitter",  # shell analysis, the first time a command is analysed
    "tree_sitter_bash": "tree_sitter_bash",
}

if not TYPE_CHECKING:
    __getattr__ = deferred(globals(), _LAZY)
