"""The workspace boundary: one resolution and one way of opening files, used by every tool.

Roots are the session `cwd` plus its `additionalDirectories`, resolved through symlinks once. A path is resolved
with `realpath` and classified `inside` / `outside` / `protected` by path components (never a string prefix, so
`/ws` does not cover `/ws-evil`). Opening is done component by component from the root's directory descriptor with
`O_NOFOLLOW`, so a directory swapped for a symlink between the check and the open makes the open fail instead of
escaping. Writes are atomic: a temporary file in the same directory, fsync, rename, fsync of the directory; the old
file's mode bits are kept, and a failure leaves the old file untouched.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

PathClass = Literal["inside", "outside", "protected"]

PROTECTED_DIRS = frozenset({".git", ".gatewright"})
"""Components that make a path protected: writes there ask even in `auto` (git hooks, the agent's own settings). They
compare without case: on a file system that ignores case (macOS, a Windows drive under WSL) `.GIT/hooks` is
`.git/hooks`."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


class PathError(Exception):
    """A path the workspace refuses. `error_type` is a stable name the model sees in `TOOL_ERROR`."""

    def __init__(self, message: str, error_type: str = "PathError") -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    requested: str
    path: str  # absolute, symlinks resolved
    klass: PathClass
    root: str | None  # the root containing it, None when outside

    @property
    def inside(self) -> bool:
        return self.klass != "outside"


def _is_within(path: str, root: str) -> bool:
    if path == root:
        return True
    return path.startswith(root if root.endswith(os.sep) else root + os.sep)


class Workspace:
    """`private`: the agent's own files and directories (its state and config dirs, a config file named elsewhere):
    protected too when a root holds them, as `.git` is (a user may open their home or `~/.config` as a root)."""

    def __init__(self, cwd: str, additional: Iterable[str] = (), private: Iterable[str] = ()) -> None:
        roots: list[str] = []
        for r in (cwd, *additional):
            if not os.path.isabs(r):
                raise PathError(f"workspace root must be absolute: {r}")
            real = os.path.realpath(r)
            if real not in roots:
                roots.append(real)
        self.cwd = roots[0]
        self.roots = tuple(roots)
        self.private = tuple(dict.fromkeys(os.path.realpath(p) for p in private))

    # ---- resolution --------------------------------------------------------------------------------------------
    def resolve(self, path: str | None, base: str | None = None) -> ResolvedPath:
        """Resolve a model- or user-supplied path. Relative paths are relative to the session cwd.

        Raises:
            PathError: empty, NUL byte, or not a string.
        """
        if path is None or path == "":
            path = "."
        if not isinstance(path, str):
            raise PathError("path must be a string", "InvalidPath")
        if "\x00" in path:
            raise PathError("path contains a NUL byte", "InvalidPath")
        if path.startswith("~"):
            path = os.path.expanduser(path)
        joined = path if os.path.isabs(path) else os.path.join(base or self.cwd, path)
        try:
            real = os.path.realpath(joined)
        except OSError:
            # A link the agent may not read (`/proc/<pid>/root`, `/proc/<pid>/cwd` of another user's process, or a
            # workspace symlink into one): where it leads cannot be proven, so it is outside, whatever its text says.
            return ResolvedPath(path, os.path.abspath(joined), "outside", None)
        return ResolvedPath(path, real, *self.classify(real))

    def classify(self, real: str) -> tuple[PathClass, str | None]:
        for root in self.roots:
            if _is_within(real, root):
                rel = os.path.relpath(real, root)
                parts = [] if rel == "." else rel.split(os.sep)
                if any(p.lower() in PROTECTED_DIRS for p in parts) or any(_is_within(real, p) for p in self.private):
                    return "protected", root
                return "inside", root
        return "outside", None

    def display(self, real: str) -> str:
        """A path relative to the cwd when inside it (for titles), else absolute."""
        if _is_within(real, self.cwd) and real != self.cwd:
            return os.path.relpath(real, self.cwd)
        return real

    def check(self, resolved: ResolvedPath, grants: frozenset[str]) -> None:
        """Refuse an outside path unless the approval layer granted exactly it."""
        if resolved.klass == "outside" and resolved.path not in grants:
            raise PathError(
                f"{resolved.path} is outside the workspace ({', '.join(self.roots)}) and was not approved",
                "PathOutsideWorkspace",
            )

    # ---- opening -----------------------------------------------------------------------------------------------
    def _anchor(self, resolved: ResolvedPath) -> tuple[str, list[str]]:
        anchor = resolved.root or os.sep
        rel = os.path.relpath(resolved.path, anchor)
        parts = [] if rel == "." else rel.split(os.sep)
        return anchor, parts

    def _walk_dirs(self, anchor: str, parts: list[str], create: bool) -> int:
        """Open the directory `anchor/parts...` without following any symlink; create missing ones if asked."""
        fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts:
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise PathError(f"{os.path.join(anchor, *parts)} does not exist", "FileNotFound") from None
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise PathError(
                            f"{os.path.join(anchor, *parts)}: a path component is not a directory "
                            "or was replaced by a symlink",
                            "PathChanged",
                        ) from None
                    raise _os_error(exc, os.path.join(anchor, *parts)) from None
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def open_read(self, resolved: ResolvedPath, grants: frozenset[str] = frozenset()) -> int:
        """Open a file for reading; returns an fd. Follows no symlink after resolution."""
        self.check(resolved, grants)
        anchor, parts = self._anchor(resolved)
        if not parts:
            raise PathError(f"{resolved.path} is a directory", "IsADirectory")
        dfd = self._walk_dirs(anchor, parts[:-1], create=False)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dfd)
        except OSError as exc:
            raise _os_error(exc, resolved.path) from None
        finally:
            os.close(dfd)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise PathError(f"{resolved.path} is a directory", "IsADirectory")
        return fd

    def open_dir(self, resolved: ResolvedPath, grants: frozenset[str] = frozenset()) -> int:
        """Open a directory (e.g. a search base or a command's cwd) without following any symlink; returns an fd."""
        self.check(resolved, grants)
        anchor, parts = self._anchor(resolved)
        try:
            return self._walk_dirs(anchor, parts, create=False)
        except OSError as exc:
            raise _os_error(exc, resolved.path) from None

    def ensure_parent(self, resolved: ResolvedPath, grants: frozenset[str] = frozenset()) -> None:
        """Create the parent directories of a file about to be written by someone else (the editor), no-follow."""
        self.check(resolved, grants)
        anchor, parts = self._anchor(resolved)
        if not parts:
            raise PathError(f"{resolved.path} is a directory", "IsADirectory")
        try:
            os.close(self._walk_dirs(anchor, parts[:-1], create=True))
        except OSError as exc:
            raise _os_error(exc, resolved.path) from None

    def read_bytes(
        self, resolved: ResolvedPath, grants: frozenset[str] = frozenset(), limit: int | None = None
    ) -> bytes:
        fd = self.open_read(resolved, grants)
        with os.fdopen(fd, "rb") as f:
            return f.read() if limit is None else f.read(limit)

    def exists(self, resolved: ResolvedPath) -> bool:
        return os.path.lexists(resolved.path)

    def write_atomic(
        self,
        resolved: ResolvedPath,
        data: bytes,
        *,
        grants: frozenset[str] = frozenset(),
        exclusive: bool = False,
        mode: int | None = None,
    ) -> bool:
        """Replace (or create) the file with `data` atomically. Returns True when the file was created.

        Raises:
            PathError: outside and not granted, a directory, exists while `exclusive`, or a path swap was detected.
        `mode` sets the permission bits of a new file (e.g. a moved file keeps its source's); an existing file keeps
        its own.
            OSError: the disk refused; the old file is left intact.
        """
        self.check(resolved, grants)
        anchor, parts = self._anchor(resolved)
        if not parts:
            raise PathError(f"{resolved.path} is a directory", "IsADirectory")
        dfd = self._walk_dirs(anchor, parts[:-1], create=True)
        name = parts[-1]
        tmp = f".{name}.gw-{secrets.token_hex(6)}.tmp"
        try:
            try:
                old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None:
                if stat.S_ISDIR(old.st_mode):
                    raise PathError(f"{resolved.path} is a directory", "IsADirectory")
                if stat.S_ISLNK(old.st_mode):
                    raise PathError(f"{resolved.path} was replaced by a symlink", "PathChanged")
                if exclusive:
                    raise PathError(f"{resolved.path} already exists", "FileExists")
            if old is not None:
                mode = stat.S_IMODE(old.st_mode)
            elif mode is None:
                mode = 0o666 & ~_umask()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            if exclusive:
                # link() fails if the name exists: an atomic create-exclusive.
                try:
                    os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
                except FileExistsError:
                    raise PathError(f"{resolved.path} already exists", "FileExists") from None
                os.unlink(tmp, dir_fd=dfd)
            else:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            tmp = ""
            try:
                os.fsync(dfd)
            except OSError:
                pass
            return old is None
        finally:
            if tmp:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
            os.close(dfd)

    def delete(self, resolved: ResolvedPath, grants: frozenset[str] = frozenset()) -> None:
        self.check(resolved, grants)
        anchor, parts = self._anchor(resolved)
        if not parts:
            raise PathError("refusing to delete a workspace root", "InvalidPath")
        dfd = self._walk_dirs(anchor, parts[:-1], create=False)
        try:
            st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                raise PathError(f"{resolved.path} is a directory", "IsADirectory")
            os.unlink(parts[-1], dir_fd=dfd)
        except FileNotFoundError:
            raise PathError(f"{resolved.path} does not exist", "FileNotFound") from None
        finally:
            os.close(dfd)


def _umask() -> int:
    # os.umask can only be read by setting it; do it once per process.
    global _UMASK
    if _UMASK is None:
        current = os.umask(0o022)
        os.umask(current)
        _UMASK = current
    return _UMASK


_UMASK: int | None = None


def _os_error(exc: OSError, path: str) -> PathError:
    if exc.errno == errno.ENOENT:
        return PathError(f"{path} does not exist", "FileNotFound")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return PathError(f"{path}: a path component is not a directory or was replaced by a symlink", "PathChanged")
    if exc.errno == errno.EACCES:
        return PathError(f"{path}: permission denied", "PermissionDenied")
    if exc.errno == errno.EISDIR:
        return PathError(f"{path} is a directory", "IsADirectory")
    return PathError(f"{path}: {exc.strerror or exc}", "OSError")
