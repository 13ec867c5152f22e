"""The whole config file, read once at start-up: the models part (`runtime.models.config`) and `[permissions]`.

    [permissions]
    mode = "auto"                                   # the default approval mode (--mode / GATEWRIGHT_MODE win)
    allow = ["bash:npm test", "bash:make check"]    # run without asking
    deny = ["bash:git push"]                        # refused without asking

Every entry is an exact rule, mapped onto the remembered-rule matching of `permissions.rules` as an "everywhere"
rule, so it applies in every project: `bash:COMMAND` is running exactly that command (in its canonical form:
`npm  test` is `npm test`, but `npm test -- -x` or `npm test; rm x` is another command) with the workspace root as
its working directory, which is what "always allow `npm test` everywhere" covers. Other tools have no such
argument-independent identity (a remembered file edit or MCP call binds to its exact arguments), so they have no
config form. Nothing else is accepted: an entry of another form, a non-string, an unknown key, or an `allow` command
that gatewright would still ask about in `auto` mode (it could not fully parse it, or it downloads and runs code,
deletes, sends data out…) is a `ConfigError` at start-up, never a rule silently dropped or widened. Deny beats
allow.

Checking `bash:` entries needs the shell parser and the bash tool (about 0.1 s to import), so they are lazy
attributes (`permissions.shell`, `lazy.bash_tool`), only imported when the file has such entries.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import permissions  # lazy submodules: the rules and the shell parser load for a file with rules
from permissions.modes import parse_mode
from runtime import lazy
from runtime.models.config import ConfigError, ModelsConfig, apply_env, parse_config, read_document

if TYPE_CHECKING:
    from permissions.rules import Rule

_PERMISSION_KEYS = {"mode", "allow", "deny"}


@dataclass(frozen=True, slots=True)
class PermissionSettings:
    mode: str | None = None  # checked: one of permissions.modes
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()  # allow and deny, as rules (deny first)


@dataclass(frozen=True, slots=True)
class Config:
    source: str | None = None
    models: ModelsConfig = field(default_factory=ModelsConfig)
    permissions: PermissionSettings = field(default_factory=PermissionSettings)


def load(env: Mapping[str, str] | None = None) -> Config:
    """Read and check the config file (see `runtime.models.config.config_path`). Raises `ConfigError`."""
    env = os.environ if env is None else env
    doc, source = read_document(env=env)
    models = apply_env(parse_config(doc, source) if source is not None else ModelsConfig(), env)
    return Config(source, models, parse_permissions(doc.get("permissions", {}), f"config file {source}"))


def parse_permissions(table: Any, where: str) -> PermissionSettings:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [permissions] must be a table")
    unknown = set(table) - _PERMISSION_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: permissions: unknown key(s): {', '.join(sorted(unknown))} "
            f"(expected {', '.join(sorted(_PERMISSION_KEYS))})"
        )
    mode = table.get("mode")
    if mode is not None:
        if not isinstance(mode, str):
            raise ConfigError(f"{where}: permissions.mode must be a string")
        try:
            mode = parse_mode(mode)
        except ValueError as exc:
            raise ConfigError(f"{where}: permissions.mode: {exc}") from None
    lists = {key: _entries(table, key, where) for key in ("allow", "deny")}
    order: tuple[Literal["allow", "deny"], ...] = ("deny", "allow")  # deny rules first
    rules = tuple(_rule(action, i, entry, where) for action in order for i, entry in enumerate(lists[action]))
    return PermissionSettings(mode, lists["allow"], lists["deny"], rules)


def _entries(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'{where}: permissions.{key} must be a list of strings, e.g. ["bash:npm test"]')
    return tuple(value)


def _rule(action: Literal["allow", "deny"], index: int, entry: str, where: str) -> Rule:
    at = f"{where}: permissions.{action}[{index}] {entry!r}"
    rule_id = f"config-{action}-{index + 1}"
    kind, sep, rest = entry.partition(":")
    if kind == "bash" and sep:
        key, label = _bash_key(action, rest, at)
        return permissions.rules.Rule(rule_id, action, "bash", key, f"{label} (config file)", "global", "exact")
    raise ConfigError(
        f'{at}: not a rule gatewright can match exactly; write "bash:COMMAND" (that exact command '
        "at the workspace root)"
    )


def _bash_key(action: str, command: str, at: str) -> tuple[str, str]:
    if not command.strip() or "\n" in command or "\x00" in command:
        raise ConfigError(f"{at}: the command must be one non-empty line")
    if action == "allow":
        try:
            analysis = permissions.shell.analyze_command(command)
            reasons = tuple(permissions.shell.needs_approval_reasons(analysis))
        except Exception:
            raise ConfigError(f"{at}: the command could not be analysed, so it cannot be allowed in advance") from None
        if not analysis.parsed:
            raise ConfigError(f"{at}: the command could not be fully parsed, so it cannot be allowed in advance")
        if reasons:
            raise ConfigError(
                f"{at}: gatewright always asks about this command ({reasons[0]}), so it cannot be allowed in advance"
            )
    # The identity the bash tool computes for a call (its canonical form), so the rule matches exactly that call.
    canonical = lazy.bash_tool.canonical_command(command)
    return lazy.bash_tool.run_rule_key(lazy.approval.WORKSPACE_PLACEHOLDER, canonical), f"`{canonical}`"
