"""What one sandboxed process may reach (`SandboxSpec`), built from the policy's `Confinement` and the session.

- writes: the workspace roots and the session's private temp dir, only when `confinement.write`; each
  `confinement.extra_write` path; a few devices (`/dev/null`, `/dev/tty`, ptys) always. Protected paths inside a
  writable root (`<root>/.git`, `<root>/.gatewright`, the agent's state and config dirs) stay read-only: Landlock
  cannot carve a subtree out of a granted one, so they are bind-mounted read-only over themselves in the child's
  private mount namespace (`child`). Where there is no mount namespace, the root itself is not granted: each of its
  top-level entries except the protected ones is, so creating a new file directly in the root fails (the bash tool
  says why).
- reads: the above, `confinement.extra_read`, and the baseline of system and toolchain locations every command
  needs (`baseline()`): `/usr`, `/bin`, `/lib*`, `/opt`, a short list of `/etc` files (never `shadow`, `sudoers`,
  ssh host keys), `/proc`, `/sys`, basic devices, the running interpreter's prefixes, the `PATH` directories with
  their tool homes (`~/.pyenv` for `~/.pyenv/shims`, ...), the `PYTHONPATH` directories, `~/.gitconfig` and
  `~/.config/git`. Nothing else of the home directory (`~/.ssh`, other projects, `~/.npmrc` and its tokens).
- what the user's config file grants every command (`[sandbox]`, `grants`), and the project's tool cache, whose
  directory the toolchains' cache variables name (`SandboxSpec.env`).
- network: `confinement.network`; when `confinement.hosts` is set too (`[sandbox] network`), only those hosts,
  through the helper's proxy (`proxy`): `proxy_port` is where the command's proxy variables point (inside its own
  network namespace, or the proxy's own port where there is none), `proxy_path` the one-shot socket an editor
  terminal's launcher connects to (`child_env` sets the variables).

Pure data with a JSON form: the editor-terminal launcher (`python -m runtime.sandbox`) receives the same spec.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import sys
import threading
from collections.abc import Iterable, Sequence

from runtime.sandbox._frozen import Frozen

# typing.TYPE_CHECKING, without importing typing: the sandbox helper (`python -S`) would pay ~10 ms for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from permissions.confinement import Confinement
    from runtime.sandbox.grants import UserGrants

PROTECTED_NAMES = (".git", ".gatewright")

# Devices a command may write whatever its confinement: sinks, its terminal, new ptys.
DEVICE_WRITES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")
# /dev/fd and /dev/std* are links into /proc/self/fd: readable through /proc, and a pipe needs no rule at all.
DEVICE_READS = ("/dev/random", "/dev/urandom")
SYSTEM_TREES = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    "/gnu/store",
    "/proc",
    "/sys",
)
# What programs read under /etc. Not there on purpose: shadow, gshadow, sudoers(.d), ssh (host keys), machine-id,
# security/, the package manager's credentials.
ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "networks",
    "hostname",
    "localtime",
    "timezone",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "alternatives",
    "profile",
    "profile.d",
    "bash.bashrc",
    "bashrc",
    "environment",
    "inputrc",
    "shells",
    "gitconfig",
    "gitattributes",
    "os-release",
    "lsb-release",
    "debian_version",
    "redhat-release",
    "alpine-release",
    "mime.types",
    "magic",
    "magic.mime",
    "terminfo",
    "locale.alias",
    "locale.conf",
    "default/locale",
    "manpath.config",
    "mtab",
    "pip.conf",
    "npmrc",
    "python*",
    "perl",
    "java*",
    "maven",
    "fonts",
    "xdg",
    "mailcap",
)
# A PATH entry under the home directory grants its tool home: the whole of it when it is a dedicated dot-dir, or the
# parts listed here when the tool home also keeps credentials (cargo's `credentials.toml`).
TOOL_HOME_PARTS = {
    ".cargo": ("bin", "registry", "git", "config.toml", "config", "env"),
    ".local": ("bin", "lib", "share/pipx", "pipx", "share/uv/tools", "share/uv/python"),
}
TOOL_HOME_COMPANIONS = {".cargo": (".rustup",)}  # the cargo proxies in ~/.cargo/bin run toolchains from ~/.rustup
GENERIC_HOME_DIRS = (".config", ".cache")  # never granted whole through a PATH entry


class SandboxSpec(Frozen):
    """One process's sandbox. Paths are absolute and resolved; trees grant everything beneath them."""

    __slots__ = (
        "read",
        "write",
        "protected",
        "network",
        "tmpdir",
        "grace",
        "env",
        "hosts",
        "proxy_port",
        "proxy_path",
    )
    read: tuple[str, ...]
    write: tuple[str, ...]
    # Existing paths inside a write tree that stay read-only (mount namespace), and, for kernels where that is not
    # possible, the write trees to grant entry by entry instead of whole (see the module docstring).
    protected: tuple[str, ...]
    network: bool
    tmpdir: str | None
    # The drain grace of `exec` (the namespace's other processes are killed this long after the command exits);
    # None: the sandbox lives until its last process exits (background processes, MCP servers).
    grace: float | None
    # Variables the command gets (the toolchains' cache dirs, `grants.cache_env`), set by `child_env`.
    env: tuple[tuple[str, str], ...]
    # `[sandbox] network`: the only hosts a command with the network may reach (None: every host).
    hosts: tuple[str, ...] | None
    proxy_port: int | None
    proxy_path: str | None

    def __init__(
        self,
        read: tuple[str, ...] = (),
        write: tuple[str, ...] = (),
        protected: tuple[str, ...] = (),
        network: bool = False,
        tmpdir: str | None = None,
        grace: float | None = None,
        env: tuple[tuple[str, str], ...] = (),
        hosts: tuple[str, ...] | None = None,
        proxy_port: int | None = None,
        proxy_path: str | None = None,
    ) -> None:
        self._init(
            read=read,
            write=write,
            protected=protected,
            network=network,
            tmpdir=tmpdir,
            grace=grace,
            env=env,
            hosts=hosts,
            proxy_port=proxy_port,
            proxy_path=proxy_path,
        )

    @property
    def limited(self) -> bool:
        """The command has the network, but only to the hosts `[sandbox] network` names (through the proxy)."""
        return self.network and self.hosts is not None

    def through_proxy(self, port: int, path: str | None = None) -> SandboxSpec:
        """This spec with the proxy's way in filled in."""
        return SandboxSpec(
            self.read,
            self.write,
            self.protected,
            self.network,
            self.tmpdir,
            self.grace,
            self.env,
            self.hosts,
            proxy_port=port,
            proxy_path=path,
        )

    def to_json(self) -> str:
        return json.dumps(self.as_dict())

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, text: str) -> SandboxSpec:
        d = json.loads(text)
        return cls(
            read=tuple(d.get("read") or ()),
            write=tuple(d.get("write") or ()),
            protected=tuple(d.get("protected") or ()),
            network=bool(d.get("network")),
            tmpdir=d.get("tmpdir"),
            grace=d.get("grace"),
            env=tuple((str(k), str(v)) for k, v in d.get("env") or ()),
            hosts=_hosts(d.get("hosts")),
            proxy_port=_port(d.get("proxy_port")),
            proxy_path=str(d["proxy_path"]) if d.get("proxy_path") else None,
        )


def _hosts(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError("hosts must be a list of strings")
    return tuple(value)


def _port(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 < value < 65536:
        raise ValueError("proxy_port must be a TCP port")
    return value


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/") or root == "/"


def nearest_existing(path: str) -> str:
    """`path` if it exists, else its nearest existing ancestor (a write to a file not yet created needs its
    directory: Landlock grants on existing inodes only, so approving `/out/new/f` grants `/out` beneath)."""
    p = os.path.realpath(path)
    while not os.path.exists(p) and p != "/":
        p = os.path.dirname(p)
    return p


# ---- the baseline readable set ----------------------------------------------------------------------------------
@functools.cache
def baseline() -> tuple[str, ...]:
    """The system and toolchain locations every sandboxed process may read and execute (computed once)."""
    home = os.path.realpath(os.path.expanduser("~"))
    out: list[str] = []

    def add(path: str) -> None:
        if not path or not os.path.isabs(path):
            return
        real = os.path.realpath(path)
        if real in ("/", home) or not os.path.exists(real):
            return
        if within(real, "/proc"):  # /etc/mtab → /proc/self/mounts: /proc is granted, and `self` is not us
            real = "/proc"
        out.append(real)

    for p in SYSTEM_TREES:
        add(p)
    for pattern in ETC_ENTRIES:
        for p in glob.glob(os.path.join("/etc", pattern)):
            add(p)
    for p in DEVICE_READS:
        add(p)
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        if not _too_broad(os.path.realpath(prefix), home):
            add(prefix)
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        for p in _path_entry_grants(entry, home):
            add(p)
    # What the agent's environment tells every Python child to import from (an unreadable entry fails `pip`).
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry) and not _too_broad(os.path.realpath(entry), home):
            add(entry)
    add(os.path.join(home, ".gitconfig"))
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    add(os.path.join(xdg, "git"))
    # A symlinked entry (resolv.conf into /run) is granted at its target: Landlock rules bind resolved inodes.
    return minimal(out)


def minimal(paths: Iterable[str]) -> tuple[str, ...]:
    """`paths` without duplicates and without the ones lying beneath another (one rule each is enough)."""
    ordered = sorted(dict.fromkeys(paths), key=lambda p: (p.count("/"), p))
    kept: list[str] = []
    for p in ordered:
        if not any(within(p, k) for k in kept):
            kept.append(p)
    return tuple(kept)


def _too_broad(path: str, home: str) -> bool:
    """A directory that would grant the whole system, a home directory (ours or another user's) or an ancestor."""
    broad = ("/", "/home", "/Users", "/root", "/tmp", "/var", "/etc", "/run", "/mnt", "/media", "/srv")  # noqa: S108
    return path in broad or os.path.dirname(path) in ("/home", "/Users") or within(home, path)


def _path_entry_grants(entry: str, home: str) -> list[str]:
    if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
        return []
    real = os.path.realpath(entry)
    if within(real, home) and real != home:
        first = os.path.relpath(real, home).split(os.sep)[0]
        top = os.path.join(home, first)
        if first in TOOL_HOME_PARTS:
            grants = [os.path.join(top, part) for part in TOOL_HOME_PARTS[first]]
        elif first.startswith(".") and first not in GENERIC_HOME_DIRS:
            grants = [top]
        else:
            grants = [real]
        grants += [os.path.join(home, c) for c in TOOL_HOME_COMPANIONS.get(first, ())]
        return grants
    if _too_broad(real, home):
        return []
    grants = [real]
    parent = os.path.dirname(real)
    # /opt/x/bin → /opt/x, ~/proj/.venv/bin → the venv: a toolchain's libraries sit beside its bin/.
    if os.path.basename(real) in ("bin", "sbin") and not _too_broad(parent, home) and parent.count("/") >= 2:
        grants.append(parent)
    return grants


def baseline_readable(path: str) -> bool:
    """Whether the sandbox already lets every process read `path` (so a read there needs no approval)."""
    try:
        real = os.path.realpath(path)
    except OSError:  # a link the agent may not read: where it leads is unprovable, so it is not "already readable"
        return False
    return any(within(real, b) for b in baseline())


# ---- the session's private temp dir -----------------------------------------------------------------------------
_tmpdirs: dict[str, str] = {}
_tmp_lock = threading.Lock()


def session_tmpdir(session_id: str) -> str:
    """The session's private temp dir (0700), created on first use; `TMPDIR` of every process it starts."""
    with _tmp_lock:
        path = _tmpdirs.get(session_id)
        if path is None or not os.path.isdir(path):
            import tempfile  # the agent's side only: the helper (`python -S`) never loads it

            path = os.path.realpath(tempfile.mkdtemp(prefix="gatewright-"))
            _tmpdirs[session_id] = path
        return path


def remove_session_tmpdir(session_id: str) -> None:
    with _tmp_lock:
        path = _tmpdirs.pop(session_id, None)
    if path is not None:
        _rmtree(path)


def remove_all_tmpdirs() -> None:
    with _tmp_lock:
        paths = list(_tmpdirs.values())
        _tmpdirs.clear()
    for p in paths:
        _rmtree(p)


def _rmtree(path: str) -> None:
    import shutil  # the agent's side only, as tempfile above

    shutil.rmtree(path, ignore_errors=True)


# ---- the builder --------------------------------------------------------------------------------------------------
def agent_private_dirs(*, files: bool = True) -> list[str]:
    """The agent's own state and config directories, and a config file named elsewhere (protected wherever they lie
    in a writable tree: `runtime.settings.agent_private_paths`)."""
    from runtime.settings import agent_private_paths

    try:
        return agent_private_paths(files=files)
    except RuntimeError:  # no home directory can be found: there is no default state or config dir either
        return []


def _hold_missing(private: Sequence[str], write_trees: Sequence[str]) -> None:
    """Make the agent's missing private directories that a command could create (a root holds where they go: the
    user's home, `~/.config`), so that the sandbox can hold them read-only like the others: a bind mount or a
    Landlock rule protects only what exists, and a config dir a command made would be read by the next agent."""
    for p in private:
        if os.path.lexists(p) or not any(within(p, w) for w in write_trees):
            continue
        with contextlib.suppress(OSError):
            os.makedirs(p, mode=0o700, exist_ok=True)


def git_dirs(root: str) -> list[str]:
    """Where a root's repository really lives when `<root>/.git` is a file (a worktree, a submodule): its gitdir and
    the common dir it shares with the main checkout. Git reads them for any command; they are as protected as a
    `.git` directory (writable only when the call was approved for `<root>/.git`)."""
    dotgit = os.path.join(root, ".git")
    if not os.path.isfile(dotgit):
        return []
    try:
        with open(dotgit, encoding="utf-8") as f:
            first = f.readline().strip()
    except (OSError, UnicodeDecodeError):
        return []
    if not first.startswith("gitdir:"):
        return []
    gitdir = os.path.realpath(os.path.join(root, first[len("gitdir:") :].strip()))
    out = [gitdir] if os.path.isdir(gitdir) else []
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            common = os.path.realpath(os.path.join(gitdir, f.readline().strip()))
        if os.path.isdir(common):
            out.append(common)
    except (OSError, UnicodeDecodeError):
        pass
    return out


def build_spec(
    confinement: Confinement,
    roots: Sequence[str],
    *,
    tmpdir: str | None,
    grace: float | None = None,
    extra_protected: Sequence[str] = (),
    user: UserGrants | None = None,
) -> SandboxSpec:
    """The sandbox of one call of a session whose workspace roots are `roots`. `user`: what the user's config file
    grants every command (default: the configured `[sandbox]` table, unless the session's workspace holds that file);
    its write grants apply to every call that may write, its read grants to every call."""
    from runtime.sandbox import grants  # the agent's side only: the helper (`python -S`) never loads it

    roots = [os.path.realpath(r) for r in roots]
    user = grants.for_roots(roots) if user is None else user
    cache = grants.project_cache(roots)
    repos = {r: git_dirs(r) for r in roots}
    write: list[str] = []
    approved = [os.path.realpath(p) for p in confinement.extra_write] if confinement.write else []
    if confinement.write:
        write += roots
        if tmpdir:
            write.append(tmpdir)
        write += [nearest_existing(p) for p in confinement.extra_write]
        # Granted by the user as they are: created when missing, and exactly them (never an existing ancestor).
        write += [d for d in map(grants.ensure_dir, user.write) if d is not None]
        if cache is not None:
            write.append(cache)
        # A call approved for `<root>/.git` may write the repository wherever it lives (a worktree's gitdir).
        write += [d for r, dirs in repos.items() if os.path.join(r, ".git") in approved for d in dirs]
    write_trees = list(dict.fromkeys(write))
    candidates = [os.path.join(r, n) for r in roots for n in PROTECTED_NAMES]
    if confinement.write:
        _hold_missing(agent_private_dirs(files=False), write_trees)
    candidates += agent_private_dirs() + [os.path.realpath(p) for p in extra_protected]
    protected = []
    for p in dict.fromkeys(candidates):
        if not os.path.lexists(p) or not any(within(p, w) for w in write_trees):
            continue
        if any(within(p, a) for a in approved):
            continue  # the call was approved for this protected path (or a tree holding it)
        protected.append(p)
    extra = [
        *roots,
        *([tmpdir] if tmpdir else []),
        *(d for dirs in repos.values() for d in dirs),
        *(os.path.realpath(p) for p in confinement.extra_read),
        *(os.path.realpath(p) for p in user.read),
        *([cache] if cache is not None else []),
    ]
    read = tuple(dict.fromkeys((*baseline(), *(p for p in extra if os.path.lexists(p)))))
    return SandboxSpec(
        read=read,
        write=tuple(write_trees) + DEVICE_WRITES,
        protected=tuple(protected),
        network=confinement.network,
        tmpdir=tmpdir,
        grace=grace,
        env=grants.cache_env(cache, write_trees, protected, lambda p: _readable(p, read)),
        hosts=confinement.hosts if confinement.network else None,
    )


def _readable(path: str, read: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(within(real, r) for r in read)


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
NO_PROXY_LOOPBACK = "localhost,127.0.0.1,::1"


def child_env(env: dict[str, str], spec: SandboxSpec | None) -> dict[str, str]:
    """The child's environment: TMPDIR/TMP/TEMP pointing at the session's private temp dir, the spec's own
    variables (the toolchains' caches), and under `[sandbox] network` the proxy variables (both cases) pointing at
    the proxy, whatever the agent's own environment said. The loopback names stay out of the proxy (a command's own
    test servers) unless an entry names one: then they mean the host's services, through the proxy."""
    if spec is not None and spec.tmpdir:
        for var in ("TMPDIR", "TMP", "TEMP"):
            env[var] = spec.tmpdir
    if spec is not None:
        env.update(spec.env)
    if spec is not None and spec.limited and spec.proxy_port is not None:
        from runtime.sandbox.netnames import loopback_named, parse_patterns

        url = f"http://127.0.0.1:{spec.proxy_port}"
        for var in PROXY_VARIABLES:
            env[var] = env[var.lower()] = url
        loopback = loopback_named(parse_patterns(spec.hosts or ()))
        env["NO_PROXY"] = env["no_proxy"] = "" if loopback else NO_PROXY_LOOPBACK
    return env


def carve(tree: str, protected: Sequence[str]) -> list[str]:
    """Without a mount namespace: what to grant instead of `tree` so that its protected paths stay unwritable.

    Every entry of `tree` is granted except a protected one; an entry that holds a protected path deeper is carved
    the same way. A directory on the way loses its own rights, so creating a new entry directly in it fails (the
    bash tool says why). Symlinks are skipped: a rule follows its target, which may lie anywhere.
    """
    inside = [p for p in protected if within(p, tree) and p != tree]
    if not inside:
        return [tree]
    try:
        names = os.listdir(tree)
    except OSError:
        return []
    out: list[str] = []
    for name in names:
        entry = os.path.join(tree, name)
        if entry in inside or os.path.islink(entry):
            continue
        if any(within(p, entry) for p in inside):
            out += carve(entry, inside)
        else:
            out.append(entry)
    return out
