"""Stored sign-in: the provider keys `gatewright setup` saved, in `credentials.json` in the user's config dir.

The file is the user's only (mode 0600 in a 0700 directory, checked when read: a file others can read is refused,
with one line saying so) and is written whole or not at all (a temporary file, fsync, rename). It maps the variable a
provider reads its key from (`OPENAI_API_KEY`, a configured provider's `api_key_env`) to the key, so a stored key
works exactly like the same variable set in the environment, and the environment wins over the file.

Every stored key joins the secret registry when read (`runtime.secrets`): it is never logged, never written to a
frame, a transcript or the session store, and no process the agent starts inherits it (it was never in this
process's environment to begin with). `forget` (ACP `logout`, `gatewright logout`) removes the file.

The OS keyring is not used: no keyring library is a dependency, and the desktop services they talk to (the Secret
Service over D-Bus, macOS Keychain through a framework binding) are absent from the terminals, SSH sessions and
containers agents are started from; a 0600 file is what the providers' own CLIs use there too.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import orjson

from runtime import secrets

FILE_NAME = "credentials.json"


class CredentialsError(ValueError):
    """The credentials file cannot be used: one line naming it and why."""


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gatewright"


def path(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / FILE_NAME


def load(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The stored keys by variable name ({} when there is no file), registered as secrets.

    Raises:
        CredentialsError: the file is readable by others, unreadable, or not what `setup` writes.
    """
    p = path(env)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CredentialsError(f"{p}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CredentialsError(f"{p}: others can read it (mode {stat.S_IMODE(st.st_mode):o}); run chmod 600 on it")
        raw = f.read(1 << 20)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise CredentialsError(f"{p}: is not JSON; remove it and run gatewright setup again") from None
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items()):
        raise CredentialsError(f'{p}: has no "keys" object of strings; remove it and run gatewright setup again')
    secrets.register_labelled((v, f"the stored key {k}") for k, v in keys.items())
    return dict(keys)


def store(var: str, key: str, env: Mapping[str, str] | None = None) -> Path:
    """Save `key` as the value of `var`, beside the keys already stored; returns the file."""
    try:
        keys = load(env)
    except CredentialsError:
        keys = {}  # a broken file is replaced by a good one
    keys[var] = key
    secrets.register_labelled([(key, f"the stored key {var}")])
    return _write(keys, env)


def forget(env: Mapping[str, str] | None = None) -> list[str]:
    """Remove every stored key; returns the variables that had one."""
    p = path(env)
    try:
        names = sorted(load(env))
    except CredentialsError:
        names = []
    try:
        p.unlink()
    except FileNotFoundError:
        return []
    return names or ["(unreadable file)"]


def _write(keys: dict[str, str], env: Mapping[str, str] | None) -> Path:
    p = path(env)
    p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = orjson.dumps({"keys": keys}, option=orjson.OPT_INDENT_2) + b"\n"
    tmp = p.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment with the stored keys under it: a variable that is set wins over the stored key. A broken
    file is said in one line on stderr and ignored (the agent still starts; `gatewright setup` mends it)."""
    env = os.environ if env is None else env
    try:
        stored = load(env)
    except CredentialsError as exc:
        os.write(2, f"gatewright: {exc}\n".encode())
        stored = {}
    return {**stored, **env}
