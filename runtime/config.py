"""The whole config file, read once at start-up: the models part (`runtime.models.config`), `[permissions]` and
`[sandbox]`.

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

    [sandbox]
    read = ["~/.m2"]                     # every command may also read these (absolute or ~/ paths)
    write = ["~/.gradle"]                # every command that may write may also write these (created 0700 if missing)
    network = ["pypi.org", "*.pythonhosted.org"]   # commands with the network reach only these hosts (a proxy)

`[sandbox]` paths must be absolute or start with `~/` (a relative path would mean a different place in every
project); they are kept as written, `~` expanded, and resolved when a command starts (`runtime.sandbox.grants`).
`network` entries are host names, `*.domain` for every name below it, addresses, each with an optional `:PORT`
(`runtime.sandbox.netnames`); a list that is present, even empty, limits every command that has the network.

Checking `bash:` entries needs the shell parser and the bash tool (about 0.1 s to import), so they are lazy
attributes (`permissions.shell`, `lazy.bash_tool`), only imported when the file has such entries.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import permissions  # lazy submodules: the rules and the shell parser load for a file with rules
from runtime import lazy, settings
from runtime.models.config import ConfigError, ModelsConfig, apply_env, build_config

if TYPE_CHECKING:
    from permissions.rules import Rule


@dataclass(frozen=True, slots=True)
class PermissionSettings:
    mode: str | None = None  # checked: one of permissions.modes
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()  # allow and deny, as rules (deny first)


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """The `[sandbox]` table: what every command may reach beyond the default sandbox (absolute paths)."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: tuple[str, ...] | None = None  # the only hosts commands with the network reach (None: every host)


@dataclass(frozen=True, slots=True)
class Config:
    source: str | None = None
    models: ModelsConfig = field(default_factory=ModelsConfig)
    permissions: PermissionSettings = field(default_factory=PermissionSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    # Whether `source` is the per-user default file (not one named by GATEWRIGHT_CONFIG): only a file named by the
    # environment can lie inside a workspace by accident, and then its [sandbox] table is not applied there.
    default_file: bool = True


def load(env: Mapping[str, str] | None = None, state_dir: str | None = None) -> Config:
    """Check the `GATEWRIGHT_*` variables and the config file (`runtime.settings.check`, which remembers in the
    state dir what it checked) and build what they say. Raises `ConfigError` (one line)."""
    env = os.environ if env is None else env
    checked = settings.check(env, state_dir)
    settings.remember_checked(checked, env)
    return from_document(checked.config, checked.source, env)


def from_document(doc: Mapping[str, Any] | None, source: str | None, env: Mapping[str, str]) -> Config:
    """The records of a checked config document (None: no file)."""
    doc = doc or {}
    where = f"config file {source}"
    models = apply_env(build_config(doc, source) if source is not None else ModelsConfig(), env)
    return Config(
        source,
        models,
        _permissions(doc.get("permissions") or {}, where),
        _sandbox(doc.get("sandbox") or {}),
        default_file=not env.get("GATEWRIGHT_CONFIG"),
    )


@dataclass(frozen=True, slots=True)
class SandboxInForce:
    """The `[sandbox]` table this agent process applies, and the file it came from."""

    settings: SandboxSettings = field(default_factory=SandboxSettings)
    source: str | None = None
    default_file: bool = True


_in_force = [SandboxInForce()]


def use_sandbox(config: Config | SandboxInForce) -> None:
    """Once at start-up: the config file's `[sandbox]` table widens every command of this agent process (read by
    `runtime.sandbox.grants` when a command starts; kept here so that the start-up path loads no sandbox code)."""
    if isinstance(config, Config):
        config = SandboxInForce(config.sandbox, config.source, config.default_file)
    _in_force[0] = config


def sandbox_in_force() -> SandboxInForce:
    return _in_force[0]


def parse_sandbox(table: Any, where: str) -> SandboxSettings:
    """A `[sandbox]` table, checked and built. Raises `ConfigError`."""
    return _sandbox(lazy.settings_models.check_table("sandbox", table, where))


def _sandbox(table: Mapping[str, Any]) -> SandboxSettings:
    network = table.get("network")  # checked entries, written back the way patterns print (`runtime.sandbox.netnames`)
    hosts = None if network is None else tuple(dict.fromkeys(network))
    return SandboxSettings(_paths(table.get("read") or ()), _paths(table.get("write") or ()), hosts)


def _paths(value: Any) -> tuple[str, ...]:
    """Checked paths (absolute, or `~/…`), `~` expanded and normalised, each once."""
    out = [os.path.normpath(os.path.expanduser(raw) if raw == "~" or raw.startswith("~/") else raw) for raw in value]
    return tuple(dict.fromkeys(out))


def parse_permissions(table: Any, where: str) -> PermissionSettings:
    """A `[permissions]` table, checked and built. Raises `ConfigError`."""
    return _permissions(lazy.settings_models.check_table("permissions", table, where), where)


def _permissions(table: Mapping[str, Any], where: str) -> PermissionSettings:
    mode = table.get("mode")
    lists = {key: tuple(table.get(key) or ()) for key in ("allow", "deny")}
    order: tuple[Literal["allow", "deny"], ...] = ("deny", "allow")  # deny rules first
    rules = tuple(_rule(action, i, entry, where) for action in order for i, entry in enumerate(lists[action]))
    return PermissionSettings(mode, lists["allow"], lists["deny"], rules)


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
