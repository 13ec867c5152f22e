"""What the user lets every command reach beyond the default sandbox, and where the toolchains' caches go.

- `UserGrants`: the `[sandbox]` table of the user's config file (`read = [...]`, `write = [...]`), put in force once
  per agent process by the CLI after reading the file (`runtime.config.use_sandbox`). Never taken from a file inside
  the workspace: a config file (`GATEWRIGHT_CONFIG`) that lies inside one of a session's roots is ignored for that
  session (`for_roots`), unless it is the per-user default file, which lives in the agent's protected config dir.
- `ensure_dir`: a granted path that does not exist yet is created (each missing component 0700) and exactly it is
  granted, never an ancestor (Landlock grants existing inodes; granting the nearest existing ancestor instead would
  grant far more than was written).
- `cache_env`: the toolchains' own cache variables, pointed into a per-project cache dir that only that project's
  commands can reach (`project_cache`): `$XDG_CACHE_HOME/gatewright/projects/<name>-<hash>`. Why per project, and
  not the user's own caches: a cache that a sandboxed command can write and that the user's unsandboxed tools later
  execute from (`~/.cache/pre-commit` hook environments, pip's wheel cache, `~/.cargo/registry` sources whose
  `build.rs` runs) would let one command plant code that runs outside the sandbox later: a persistence hole. A
  per-project cache carries no more authority than the workspace itself (which the same commands already write),
  and it survives the session, so the second `npm install` of a project is as fast as the user's own. A variable
  already pointing at a place the command may write (a `[sandbox] write` grant) is kept as it is.

Agent-side only: the sandbox helper never imports this module.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence

from runtime import config
from runtime.sandbox._frozen import Frozen

log = logging.getLogger("gatewright.sandbox")


class UserGrants(Frozen):
    """The `[sandbox]` table: absolute paths (`~` already expanded), as written; `source` is the config file."""

    __slots__ = ("read", "write", "source", "default_file")
    read: tuple[str, ...]
    write: tuple[str, ...]
    source: str | None
    default_file: bool  # the per-user default config file (not one named by GATEWRIGHT_CONFIG)

    def __init__(
        self,
        read: tuple[str, ...] = (),
        write: tuple[str, ...] = (),
        source: str | None = None,
        default_file: bool = True,
    ) -> None:
        self._init(read=read, write=write, source=source, default_file=default_file)

    @property
    def empty(self) -> bool:
        return not self.read and not self.write


NONE = UserGrants()


def configure(grants: UserGrants) -> None:
    """Set this agent process's grants (the CLI does it through `runtime.config.use_sandbox`; tests here)."""
    settings = config.SandboxSettings(grants.read, grants.write)
    config.use_sandbox(config.SandboxInForce(settings, grants.source, grants.default_file))


def configured() -> UserGrants:
    """The `[sandbox]` table in force (`runtime.config.use_sandbox`)."""
    found = config.sandbox_in_force()
    return UserGrants(found.settings.read, found.settings.write, found.source, found.default_file)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/") or root == "/"


def ignored_in(grants: UserGrants, roots: Sequence[str]) -> str | None:
    """Why `grants` do not apply to a session with these workspace roots, or None when they do."""
    if grants.empty or grants.source is None or grants.default_file:
        return None
    source = os.path.realpath(grants.source)
    for root in roots:
        if _within(source, os.path.realpath(root)):
            return (
                f"the [sandbox] read and write grants of {grants.source} are ignored: that config file lies inside "
                "the workspace, and a file inside the workspace never widens the sandbox"
            )
    return None


def for_roots(roots: Sequence[str]) -> UserGrants:
    """The configured grants, or none for a session whose workspace holds the config file."""
    grants = configured()
    return NONE if ignored_in(grants, roots) is not None else grants


def describe(roots: Sequence[str]) -> str | None:
    """One line for `/status`: what the config file grants every command, or why it is ignored; None when nothing."""
    grants = configured()
    why = ignored_in(grants, roots)
    if why is not None:
        return why
    if grants.empty:
        return None
    parts = []
    if grants.read:
        parts.append("read " + ", ".join(_shown(p) for p in grants.read))
    if grants.write:
        parts.append("write " + ", ".join(_shown(p) for p in grants.write))
    return "every command may also " + "; ".join(parts) + " ([sandbox] in the config file)"


def _shown(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if _within(path, home) and home != "/" else path


# ---- creating what is granted ----------------------------------------------------------------------------------
_dir_lock = threading.Lock()


def ensure_dir(path: str) -> str | None:
    """`path` as a directory: created when missing (each missing component with mode 0700), then resolved. None when
    it cannot be made a directory (it is a file, or a component cannot be created): nothing is granted then."""
    path = os.path.abspath(path)
    with _dir_lock:
        missing: list[str] = []
        p = path
        while not os.path.lexists(p) and p != os.path.dirname(p):
            missing.append(p)
            p = os.path.dirname(p)
        try:
            for component in reversed(missing):
                os.mkdir(component, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            log.warning("cannot create %s to grant it to commands: %s", path, exc.strerror or exc)
            return None
    real = os.path.realpath(path)
    return real if os.path.isdir(real) else None


# ---- the toolchains' caches ------------------------------------------------------------------------------------
def cache_root(env: Mapping[str, str] | None = None) -> str:
    """Where gatewright keeps per-project tool caches: `$XDG_CACHE_HOME/gatewright/projects`."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gatewright", "projects")


def project_cache(roots: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    """The cache dir of the project whose first root is `roots[0]` (created 0700), or None without roots."""
    if not roots:
        return None
    root = os.path.realpath(roots[0])
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in os.path.basename(root))[:40] or "root"
    key = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
    return ensure_dir(os.path.join(cache_root(env), f"{name}-{key}"))


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def _xdg_cache(env: Mapping[str, str]) -> str:
    return env.get("XDG_CACHE_HOME") or os.path.join(_home(env), ".cache")


def tool_caches(env: Mapping[str, str]) -> list[tuple[tuple[str, ...], str, str]]:
    """(variables, where the tool would write by default in `env`, the name of its dir in the project cache)."""
    home, xdg = _home(env), _xdg_cache(env)
    gopath = (env.get("GOPATH") or os.path.join(home, "go")).split(os.pathsep)[0]
    return [
        (("XDG_CACHE_HOME",), xdg, "xdg"),
        (("PIP_CACHE_DIR",), os.path.join(xdg, "pip"), "pip"),
        (("UV_CACHE_DIR",), os.path.join(xdg, "uv"), "uv"),
        (("npm_config_cache", "NPM_CONFIG_CACHE"), os.path.join(home, ".npm"), "npm"),
        (("YARN_CACHE_FOLDER",), os.path.join(xdg, "yarn"), "yarn"),
        (("CARGO_HOME",), os.path.join(home, ".cargo"), "cargo"),
        (("GOCACHE",), os.path.join(xdg, "go-build"), "go-build"),
        (("GOMODCACHE",), os.path.join(gopath, "pkg", "mod"), "go-mod"),
        (("PRE_COMMIT_HOME",), os.path.join(xdg, "pre-commit"), "pre-commit"),
    ]


def cache_env(
    cache: str | None,
    writable: Sequence[str],
    protected: Sequence[str],
    readable: Callable[[str], bool],
    env: Mapping[str, str] | None = None,
) -> tuple[tuple[str, str], ...]:
    """The cache variables a command gets: each tool's cache where it would be anyway when the command may write
    there (`writable`, minus `protected`), else its dir in the project cache `cache`. `readable`: whether the
    sandbox lets the command read a path (the user's cargo configuration is linked only then)."""
    env = os.environ if env is None else env

    def may_write(path: str) -> bool:
        real = os.path.realpath(path)
        return any(_within(real, w) for w in writable) and not any(_within(real, p) for p in protected)

    out: list[tuple[str, str]] = []
    for names, default, dirname in tool_caches(env):
        current = next((env[n] for n in names if env.get(n)), None) or default
        if may_write(current):
            value = current
        elif cache is not None:
            value = os.path.join(cache, dirname)
            if dirname == "cargo":
                _link_cargo_config(value, current, readable)
        else:
            continue
        out += [(n, value) for n in names]
    return tuple(out)


def _link_cargo_config(cargo_home: str, users: str, readable: Callable[[str], bool]) -> None:
    """The user's cargo configuration (mirrors, registries, build flags) still applies in the project's CARGO_HOME:
    linked there (`credentials.toml` never is). Whatever the project's commands put there instead is theirs."""
    if ensure_dir(cargo_home) is None:
        return
    for name in ("config.toml", "config"):
        theirs = os.path.join(users, name)
        ours = os.path.join(cargo_home, name)
        if os.path.isfile(theirs) and readable(theirs) and not os.path.lexists(ours):
            try:
                os.symlink(theirs, ours)
            except OSError as exc:
                log.debug("cannot link %s into %s: %s", theirs, cargo_home, exc)
