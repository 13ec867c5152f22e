"""Every `GATEWRIGHT_*` variable, declared once, and the one check of what a user writes: those variables and the
config file, before anything is served.

`VARIABLES` is the declaration: each variable's kind, what it accepts, its default and what it sets (the table of
docs/configuration.md is compared with it by a test). pydantic checks the values, with the config file's models
(`runtime.settings_models`, built from this table and the file's tables): a bad value stops the start with one line
naming the variable or key, what it got and what it accepts (`ConfigError`, exit 2; for `acp` before any frame).

pydantic costs ~75 ms to import and build, and every editor thread starts a fresh `gatewright acp`, so the start-up
path only pays it when there is something new to check. Variables of kind "text" or "path" accept any string and
need no check; for the rest and the config file, a digest of what was checked (the variables' values, the file's
bytes, the version) is remembered in the state dir with the checked values (`settings.checked.json`, 0600; never the
config's `headers`, which may carry credentials): an unchanged configuration starts without pydantic. The state dir
is a protected path (no sandboxed command writes it), so what it remembers is what this program checked.

Readers take the checked values from `current()`: the settings this process started with, checked again when the
environment changed (tests, and library use without a start-up check).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import orjson

from runtime import lazy  # the pydantic models, and tomllib, only for what was not checked before
from runtime.models.config import ConfigError, config_path
from runtime.version import __version__

Kind = Literal["text", "path", "choice", "integer", "seconds"]

# Bump when a check changes what it accepts (a remembered verdict of an older check must not be reused).
CHECK_REVISION = 1
CACHE_NAME = "settings.checked.json"
_CACHE_ENTRIES = 8


class Variable:
    """One `GATEWRIGHT_*` variable: its kind and bounds (what pydantic checks), and what the docs say of it. (A plain
    slotted class: a dataclass costs ~0.45 ms to define, on the start-up path.)"""

    __slots__ = ("case_insensitive", "choices", "default", "exclusive", "flag", "kind", "minimum", "name", "sets")

    def __init__(
        self,
        name: str,
        kind: Kind,
        sets: str,  # what it sets, for the docs
        default: str,  # the default, as the docs say it
        *,
        choices: tuple[str, ...] = (),
        minimum: float | None = None,  # for integer and seconds
        exclusive: bool = False,  # minimum itself is not allowed
        flag: str | None = None,  # the command-line option that wins over it
        case_insensitive: bool = False,
    ) -> None:
        self.name, self.kind, self.sets, self.default = name, kind, sets, default
        self.choices, self.minimum, self.exclusive = choices, minimum, exclusive
        self.flag, self.case_insensitive = flag, case_insensitive

    def accepts(self) -> str:
        """What it accepts, in the words of an error line."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices) + (" (any case)" if self.case_insensitive else "")
        if self.kind in ("integer", "seconds"):
            what = "an integer" if self.kind == "integer" else "a number of seconds"
            if self.minimum is None:
                return what
            bound = f"{self.minimum:g}"
            return f"{what} {'greater than' if self.exclusive else 'of at least'} {bound}"
        return "a path" if self.kind == "path" else "any text"


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "GATEWRIGHT_MODEL",
        "text",
        "the model, as `--model`: `scripted:PATH`, `openai:MODEL`, `anthropic:MODEL`, `PROVIDER:MODEL` for a provider "
        "of the config file, or the name of a `[models.NAME]` entry",
        "the config file's `default_model`; else none (a prompt answers that no model is configured)",
        flag="--model",
    ),
    Variable(
        "GATEWRIGHT_MODE",
        "choice",
        "the approval mode, as `--mode`",
        "the config file's `[permissions] mode`, else `safe`",
        choices=("safe", "manual", "auto", "read-only"),
        flag="--mode",
    ),
    Variable(
        "GATEWRIGHT_STATE_DIR",
        "path",
        "the state dir, as `--state-dir` (see [the state dir](#the-state-dir))",
        "`$XDG_STATE_HOME/gatewright`, else `~/.local/state/gatewright`",
        flag="--state-dir",
    ),
    Variable(
        "GATEWRIGHT_RECORD", "path", "append every JSON-RPC frame to this file, as `--record`", "off", flag="--record"
    ),
    Variable(
        "GATEWRIGHT_CONFIG",
        "path",
        "the config file. **A path that does not exist is an error**: gatewright prints one line naming it and exits 2",
        "`$XDG_CONFIG_HOME/gatewright/config.toml`, else `~/.config/gatewright/config.toml`; a missing default file "
        "is an empty configuration",
    ),
    Variable(
        "GATEWRIGHT_PERMISSION_TIMEOUT",
        "seconds",
        "seconds a permission question may stay unanswered; then the call is not run (a rejection); 0 waits",
        "none: wait for the answer",
        minimum=0,
    ),
    Variable(
        "GATEWRIGHT_LOG",
        "choice",
        "log level on stderr, as `--log-level`",
        "`WARNING`",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        flag="--log-level",
        case_insensitive=True,
    ),
    Variable(
        "GATEWRIGHT_CONTEXT_WINDOW",
        "integer",
        "the context window (tokens) of models that declare none (the scripted model); compaction starts near it",
        "128000",
        minimum=1000,
    ),
    Variable(
        "GATEWRIGHT_MCP_TURN_WAIT", "seconds", "seconds a turn waits for MCP servers still starting", "10", minimum=0
    ),
    Variable(
        "GATEWRIGHT_MCP_START_TIMEOUT",
        "seconds",
        "seconds an MCP server may take to finish its handshake before it is given up",
        "30",
        minimum=0,
        exclusive=True,
    ),
    Variable(
        "GATEWRIGHT_SANDBOX",
        "choice",
        "the OS sandbox under every process the agent starts ([sandbox.md](sandbox.md)): `off` runs them unconfined "
        "(as on a system without Landlock or namespaces: the modes then ask more), `landlock` uses Landlock without "
        "namespaces (as where unprivileged user namespaces are forbidden)",
        "everything the system offers",
        choices=("off", "landlock"),
        case_insensitive=True,
    ),
    Variable("GATEWRIGHT_LIST_PAGE_SIZE", "integer", "sessions per page of `session/list`", "50", minimum=1),
    Variable(
        "GATEWRIGHT_MAX_FRAME_BYTES",
        "integer",
        "the largest JSON-RPC frame accepted on stdin",
        "67108864 (64 MiB)",
        minimum=1024,
    ),
)
BY_NAME: dict[str, Variable] = {v.name: v for v in VARIABLES}


def docs_rows() -> list[str]:
    """The rows of docs/configuration.md's table of variables, as declared (a test holds the two together)."""
    rows = []
    for v in VARIABLES:
        accepts = "" if v.kind in ("text", "path") else f"; {v.accepts()}"
        rows.append(f"| `{v.name}` | {v.sets}{accepts} | {v.default} |")
    return rows


class Settings:
    """What this process runs with, checked: the variables' values (typed; absent ones are missing) and the config
    file's document as checked (defaults not filled in: the runtime's records own them)."""

    __slots__ = ("config", "source", "values")

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,  # None: no config file
        source: str | None = None,
    ) -> None:
        self.values: Mapping[str, Any] = values or {}
        self.config = config
        self.source = source

    def get(self, name: str, default: Any = None) -> Any:
        if name not in BY_NAME:
            raise KeyError(f"{name} is not a declared setting")
        return self.values.get(name, default)


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$GATEWRIGHT_STATE_DIR`, else `$XDG_STATE_HOME/gatewright`, else `~/.local/state/gatewright`."""
    env = os.environ if env is None else env
    named = env.get("GATEWRIGHT_STATE_DIR")
    if named:
        return Path(named)
    xdg = env.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "gatewright"


def agent_private_paths(env: Mapping[str, str] | None = None, *, files: bool = True) -> list[str]:
    """The agent's own files, resolved: the state dir, the config dir (the default config file and the stored
    sign-in, `credentials.json`) and a config file `GATEWRIGHT_CONFIG` names elsewhere (the file, not the directory
    holding it, which may be a project; `files=False` leaves it out). No command and no file tool changes them
    unasked, wherever they lie (a user may open their home, or `~/.config`, as a workspace root)."""
    env = os.environ if env is None else env
    default = config_path({k: v for k, v in env.items() if k != "GATEWRIGHT_CONFIG"})
    paths = [state_dir(env), default.parent]
    if files:
        # Each file too, for where it resolves: a config file linked from a dotfiles repository (GNU stow) is that
        # repository's file, which a workspace root may hold.
        paths += [default, default.parent / "credentials.json"]
        if env.get("GATEWRIGHT_CONFIG"):
            paths.append(config_path(env))
    resolved = (os.path.realpath(os.path.expanduser(p)) for p in paths)
    return list(dict.fromkeys(resolved))


def _to_check(env: Mapping[str, str]) -> dict[str, str]:
    """The set variables whose values need a check (text and paths accept anything)."""
    return {v.name: env[v.name] for v in VARIABLES if v.kind not in ("text", "path") and env.get(v.name, "") != ""}


def check(env: Mapping[str, str] | None = None, state: str | Path | None = None) -> Settings:
    """Check the variables and the config file (see the module docstring). Raises `ConfigError` (one line)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {v.name: env[v.name] for v in VARIABLES if v.kind in ("text", "path") and env.get(v.name)}
    raw = _to_check(env)
    path = config_path(env)
    named = bool(env.get("GATEWRIGHT_CONFIG"))
    try:
        data: bytes | None = path.read_bytes()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"config file {path} (GATEWRIGHT_CONFIG) does not exist") from None
        data = None
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot be read ({exc.strerror or exc})") from None
    source = str(path) if data is not None else None
    if not raw and data is None:
        return Settings(values)
    digest = _digest(raw, data, source)
    cache = Path(state) / CACHE_NAME if state is not None else state_dir(env) / CACHE_NAME
    found = _remembered(cache, digest)
    if found is None:
        found = lazy.settings_models.check(raw, data, source)
        _remember(cache, digest, found)
    checked_values, document = found
    if document is not None and data is not None:
        document = _with_headers(document, data)
    return Settings(values | checked_values, document, source)


def _digest(raw: Mapping[str, str], data: bytes | None, source: str | None) -> str:
    h = lazy.hashlib.sha256()
    h.update(orjson.dumps([__version__, CHECK_REVISION, sorted(raw.items()), source]))
    h.update(b"\x00" + (data if data is not None else b"\xff"))
    return h.hexdigest()


def _remembered(cache: Path, digest: str) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    try:
        entries = orjson.loads(cache.read_bytes())["entries"]
        entry = next(e for e in entries if e["digest"] == digest)
        return dict(entry["values"]), entry["config"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, StopIteration):
        return None


def _remember(cache: Path, digest: str, found: tuple[dict[str, Any], dict[str, Any] | None]) -> None:
    """Best effort: a state dir that cannot be written only means the next start checks again."""
    values, document = found
    try:
        entries = orjson.loads(cache.read_bytes()).get("entries", [])
        entries = [e for e in entries if isinstance(e, dict) and e.get("digest") != digest]
    except (OSError, ValueError, AttributeError):
        entries = []
    entry = {"digest": digest, "values": values, "config": _without_headers(document)}
    body = orjson.dumps({"entries": [entry, *entries][:_CACHE_ENTRIES]})
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, cache)
    with contextlib.suppress(OSError):
        tmp.unlink()


def _without_headers(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """The checked document without the providers' header values (they may carry credentials)."""
    if document is None:
        return None
    providers = {
        name: {k: v for k, v in table.items() if k != "headers"} | ({"headers": True} if "headers" in table else {})
        for name, table in document.get("providers", {}).items()
    }
    return document | ({"providers": providers} if providers else {})


def _with_headers(document: Mapping[str, Any], data: bytes) -> dict[str, Any]:
    """Put the header values back from the file itself (its bytes are the ones that were checked)."""
    providers = document.get("providers", {})
    if not any("headers" in t for t in providers.values()):
        return dict(document)
    raw = lazy.tomllib.loads(data.decode("utf-8")).get("providers", {})
    merged = {
        name: (table | {"headers": dict(raw[name]["headers"])}) if "headers" in table else table
        for name, table in providers.items()
    }
    return dict(document) | {"providers": merged}


_current: list[tuple[tuple[Any, ...], Settings]] = []


def remember_checked(settings: Settings, env: Mapping[str, str] | None = None) -> None:
    """What the start-up check found, for `current()`."""
    _current[:] = [(_key(os.environ if env is None else env), settings)]


def current() -> Settings:
    """The checked settings of this process (checked again when the environment changed since)."""
    key = _key(os.environ)
    if _current and _current[0][0] == key:
        return _current[0][1]
    settings = check()
    _current[:] = [(key, settings)]
    return settings


def permission_timeout() -> float | None:
    """`GATEWRIGHT_PERMISSION_TIMEOUT`, checked: seconds a question may stay unanswered (None, or 0: no limit)."""
    seconds = current().get("GATEWRIGHT_PERMISSION_TIMEOUT")
    return float(seconds) if seconds else None


def _key(env: Mapping[str, str]) -> tuple[Any, ...]:
    return tuple(env.get(v.name) for v in VARIABLES) + (env.get("XDG_CONFIG_HOME"), env.get("HOME"))
