"""The network-by-name proxy: the only way out of a command's network when `[sandbox] network` names its hosts.

One process per agent, forked by the sandbox helper the first time a command needs it (`helper`), never when the
setting is absent. It is Landlocked (reads the system locations only, writes nothing but its one-shot sockets),
dies with the helper (parent-death signal) and with the agent (its control socket closes), and speaks plain
HTTP/1.1 proxying: `CONNECT host:port` (HTTPS and anything else tunnelled) and absolute-URL requests
(`GET http://host/…`). It resolves names itself, so a command needs no DNS, and it compares the name the command
asked for with the endpoint's patterns (`netnames`): a name that is not listed gets `403` with one line
(`gatewright: example.com is not in [sandbox] network`), as the reason phrase and as the body, and the line is
written on the endpoint's notes pipe, which the agent reads into the tool result.

Endpoints (one per command; the agent opens and closes them over the control socket, `client.ProxyControl`):
- `pair`: a socketpair; the command's namespace init (`child`) gets one end and sends back, on it, a listening
  socket it made on `127.0.0.1:PORT` inside the command's own network namespace. The proxy accepts on that socket
  directly (a listening socket works from any namespace), so no bytes are copied on the way in. When the init ends,
  its end of the pair closes and the endpoint goes with it.
- `path`: the same over a one-shot unix socket in the proxy's private directory, for the editor-terminal launcher
  (the editor, not the helper, starts it, so it cannot be handed a descriptor): the launcher connects once, and
  the socket file is removed.
- `tcp`: a listener on `127.0.0.1:0` of the agent's own network, for systems without network namespaces (the
  command's Landlock rules then allow TCP connections to that port only).

Bounds: a request head of at most 64 KiB read within 30 s; 15 s to connect upstream; a relay with no byte either way
for 15 minutes is closed; 64 KiB in flight per direction; at most 256 connections at once (more are answered 503);
closing an endpoint ends its connections.

Control protocol (SOCK_SEQPACKET, one JSON message each way): `{"op": "open", "kind", "hosts"}` with the notes pipe
attached → `{"id", "port"?, "path"?}` (a `pair` endpoint's other end attached); `{"op": "close", "id"}` → `{}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
import time

from runtime.sandbox.netnames import allowed, normalise_host, parse_patterns, parse_port, refusal, split_authority

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from runtime.sandbox.netnames import HostPattern

MAX_HEAD = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
IDLE_TIMEOUT = 900.0
CHUNK = 64 * 1024
MAX_CONNECTIONS = 256
MAX_ENDPOINTS = 1024
MAX_NOTES = 32  # distinct refusals written per endpoint (the rest are still refused)
MAX_MESSAGE = 1 << 16
LISTEN_BACKLOG = 128
ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"
# Headers that belong to one hop (RFC 9110 7.6.1) or to the proxy, never passed on; Host is rewritten.
_HOP = frozenset(
    (b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization", b"te", b"trailer", b"upgrade", b"host")
)


class BadRequest(Exception):
    """A request the proxy cannot pass on (answered 400 with the message)."""


class Endpoint:
    __slots__ = ("id", "patterns", "notes", "listener", "channel", "oneshot", "path", "noted", "conns", "closed")

    def __init__(self, ep_id: int, patterns: tuple[HostPattern, ...], notes: int | None) -> None:
        self.id = ep_id
        self.patterns = patterns
        self.notes = notes
        self.listener: socket.socket | None = None
        self.channel: socket.socket | None = None
        self.oneshot: socket.socket | None = None
        self.path: str | None = None
        self.noted: set[str] = set()
        self.conns: set[socket.socket] = set()
        self.closed = False


class Proxy:
    def __init__(self, control: socket.socket, private_dir: str | None) -> None:
        self.control = control
        self.private_dir = private_dir
        self.endpoints: dict[int, Endpoint] = {}
        self.roles: dict[int, tuple[str, Endpoint | None]] = {}
        self.poll = select.poll()
        self.lock = threading.Lock()  # endpoint state shared with the connection threads
        self.active = 0
        self.next_id = 1
        self._watch(control.fileno(), "control", None)

    # ---- the main loop: control, listeners, channels ----------------------------------------------------------
    def serve(self) -> None:
        """Until the control socket closes (the agent or the helper is gone)."""
        try:
            while True:
                for fd, _ in self.poll.poll():
                    role, ep = self.roles.get(fd, ("", None))
                    if role == "control":
                        if not self._control():
                            return
                    elif ep is not None and role == "listener":
                        self._accept(ep)
                    elif ep is not None and role == "channel":
                        self._channel(ep)
                    elif ep is not None and role == "oneshot":
                        self._oneshot(ep)
        finally:
            for ep in list(self.endpoints.values()):
                self._close(ep)

    def _watch(self, fd: int, role: str, ep: Endpoint | None) -> None:
        self.roles[fd] = (role, ep)
        self.poll.register(fd, select.POLLIN)

    def _unwatch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with contextlib.suppress(OSError, ValueError, KeyError):
            fd = sock.fileno()
            self.poll.unregister(fd)
            del self.roles[fd]

    def _control(self) -> bool:
        try:
            data, fds, _, _ = socket.recv_fds(self.control, MAX_MESSAGE, 2)
        except OSError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        give: int | None = None
        try:
            reply, give = self._op(json.loads(data), fds)
        except Exception as exc:  # any failure is an answer, never the proxy's end
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            socket.send_fds(self.control, [json.dumps(reply).encode()], [give] if give is not None else [])
        except OSError:
            return False
        finally:
            if give is not None:
                os.close(give)
        return True

    def _op(self, req: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], int | None]:
        op = req.get("op")
        if op == "close":
            for fd in fds:
                os.close(fd)
            ep = self.endpoints.get(int(req["id"]))
            if ep is not None:
                self._close(ep)
            return {}, None
        if op != "open":
            raise ValueError(f"unknown operation {op!r}")
        notes = fds[0] if fds else None
        for fd in fds[1:]:
            os.close(fd)
        if len(self.endpoints) >= MAX_ENDPOINTS:
            if notes is not None:
                os.close(notes)
            raise OSError("too many commands use the network proxy at once")
        ep = Endpoint(self.next_id, parse_patterns(list(req.get("hosts") or ())), notes)
        if notes is not None:
            os.set_blocking(notes, False)
        self.next_id += 1
        kind = req.get("kind")
        try:
            if kind == "tcp":
                ep.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                ep.listener.bind(("127.0.0.1", 0))
                ep.listener.listen(LISTEN_BACKLOG)
                self._watch(ep.listener.fileno(), "listener", ep)
                reply: dict[str, Any] = {"id": ep.id, "port": ep.listener.getsockname()[1]}
                give = None
            elif kind == "pair":
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                ep.channel = ours
                self._watch(ours.fileno(), "channel", ep)
                reply, give = {"id": ep.id}, theirs.detach()
            elif kind == "path":
                if self.private_dir is None:
                    raise OSError("the proxy has no private directory")
                # 64 random bits in a directory no sandboxed command can list: short enough for sun_path.
                ep.path = os.path.join(self.private_dir, os.urandom(8).hex())
                ep.oneshot = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                ep.oneshot.bind(ep.path)
                ep.oneshot.listen(1)
                self._watch(ep.oneshot.fileno(), "oneshot", ep)
                reply, give = {"id": ep.id, "path": ep.path}, None
            else:
                raise ValueError(f"unknown endpoint kind {kind!r}")
        except BaseException:
            self._close(ep)
            raise
        self.endpoints[ep.id] = ep
        return reply, give

    def _channel(self, ep: Endpoint) -> None:
        """The namespace's init sends its listening socket (`L`); end of file: the command's namespace is gone."""
        assert ep.channel is not None
        try:
            data, fds, _, _ = socket.recv_fds(ep.channel, 16, 1)
        except OSError:
            data, fds = b"", []
        if data == b"L" and fds and ep.listener is None:
            ep.listener = socket.socket(fileno=fds.pop())
            ep.listener.setblocking(True)
            self._watch(ep.listener.fileno(), "listener", ep)
        for fd in fds:
            os.close(fd)
        if not data:
            self._close(ep)

    def _oneshot(self, ep: Endpoint) -> None:
        """The launcher connected: that connection is the endpoint's channel; nothing else may connect."""
        assert ep.oneshot is not None
        try:
            conn, _ = ep.oneshot.accept()
        except OSError:
            return
        self._unwatch(ep.oneshot)
        ep.oneshot.close()
        ep.oneshot = None
        _remove_socket_file(ep)
        ep.channel = conn
        self._watch(conn.fileno(), "channel", ep)

    def _close(self, ep: Endpoint) -> None:
        self.endpoints.pop(ep.id, None)
        for sock in (ep.listener, ep.channel, ep.oneshot):
            self._unwatch(sock)
            if sock is not None:
                sock.close()
        ep.listener = ep.channel = ep.oneshot = None
        _remove_socket_file(ep)
        with self.lock:
            ep.closed = True
            conns = list(ep.conns)
            if ep.notes is not None:
                with contextlib.suppress(OSError):
                    os.close(ep.notes)
                ep.notes = None
        for conn in conns:  # no connection outlives its command
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    # ---- connections --------------------------------------------------------------------------------------------
    def _accept(self, ep: Endpoint) -> None:
        assert ep.listener is not None
        try:
            conn, _ = ep.listener.accept()
        except OSError:
            return
        with self.lock:
            full = self.active >= MAX_CONNECTIONS
            if not full:
                self.active += 1
                ep.conns.add(conn)
        if full:
            with contextlib.suppress(OSError):
                conn.setblocking(False)
                conn.send(_answer(503, "gatewright: too many connections through the sandbox's proxy at once"))
            conn.close()
            return
        threading.Thread(target=self._connection, args=(conn, ep), daemon=True).start()

    def _connection(self, client: socket.socket, ep: Endpoint) -> None:
        upstream: socket.socket | None = None
        try:
            upstream = self._open(client, ep)
            if upstream is not None:
                relay(client, upstream)
        except OSError:
            pass
        finally:
            with self.lock:
                self.active -= 1
                ep.conns.discard(client)
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()

    def _open(self, client: socket.socket, ep: Endpoint) -> socket.socket | None:
        """Read the request, check its host, connect upstream and answer the client: the upstream socket, ready to
        relay, or None when the request was answered here."""
        got = read_head(client, time.monotonic() + HEAD_TIMEOUT)
        if got is None:
            return None
        head, rest = got
        try:
            method, host, port, forward = parse_request(head)
        except BadRequest as exc:
            client.sendall(_answer(400, f"gatewright: {exc}"))
            return None
        if not allowed(ep.patterns, host, port):
            line = refusal(ep.patterns, host, port)
            self._note(ep, host, port, line)
            client.sendall(_answer(403, line))
            return None
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except socket.gaierror:
            client.sendall(_answer(502, f"gatewright: {_shown(host)} could not be resolved"))
            return None
        except OSError as exc:
            client.sendall(_answer(502, f"gatewright: could not connect to {_shown(host)}:{port} ({_why(exc)})"))
            return None
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if method == b"CONNECT":
                client.sendall(ESTABLISHED)
                if rest:
                    upstream.sendall(rest)
            else:
                upstream.sendall(forward + rest)
        except OSError:
            upstream.close()
            raise
        return upstream

    def _note(self, ep: Endpoint, host: str, port: int, line: str) -> None:
        target = f"{_shown(host)}:{port}"
        with self.lock:
            if ep.notes is None or target in ep.noted or len(ep.noted) >= MAX_NOTES:
                return
            ep.noted.add(target)
            with contextlib.suppress(OSError):  # a full pipe drops the note, never blocks a connection
                os.write(ep.notes, f"{target}\t{line}\n".encode())


def _remove_socket_file(ep: Endpoint) -> None:
    if ep.path is not None:
        with contextlib.suppress(OSError):
            os.unlink(ep.path)
        ep.path = None


# ---- HTTP, sans I/O where it can be ------------------------------------------------------------------------------
def _answer(status: int, line: str) -> bytes:
    """A complete answer whose reason phrase and body are the same line (clients show one or the other)."""
    body = (line + "\n").encode()
    reason = line.replace("\r", " ").replace("\n", " ")
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _why(exc: OSError) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return exc.strerror or type(exc).__name__


def read_head(sock: socket.socket, deadline: float) -> tuple[bytes, bytes] | None:
    """The request head (without its blank line) and whatever followed it; None when the client went away, sent
    too much, or took too long."""
    buf = bytearray()
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(buf[:end]), bytes(buf[end + 4 :])
        end = buf.find(b"\n\n")
        if end >= 0:
            return bytes(buf[:end]), bytes(buf[end + 2 :])
        if len(buf) >= MAX_HEAD:
            with contextlib.suppress(OSError):
                sock.sendall(_answer(431, "gatewright: the request head is larger than 64 KiB"))
                _linger(sock, time.monotonic() + 2.0)
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(MAX_HEAD - len(buf) + 4)
        except (TimeoutError, OSError):
            return None
        if not chunk:
            return None
        buf += chunk


def _linger(sock: socket.socket, deadline: float) -> None:
    """Close our side and read on a little (at most 1 MiB, until `deadline`): closing with unread input would reset
    the connection, and the client could lose the answer before reading it."""
    sock.shutdown(socket.SHUT_WR)
    left = 1 << 20
    while left > 0 and (wait := deadline - time.monotonic()) > 0:
        sock.settimeout(wait)
        chunk = sock.recv(65536)
        if not chunk:
            return
        left -= len(chunk)


def parse_request(head: bytes) -> tuple[bytes, str, int, bytes]:
    """(method, host, port, the head to send upstream) of a proxy request. Raises BadRequest."""
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise BadRequest("not an HTTP/1.x request")
    method, target, version = parts
    if not method.isalpha() or not method.isupper():
        raise BadRequest("not an HTTP method")
    try:
        text = target.decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("the request target is not ASCII") from None
    if method == b"CONNECT":
        host, port = _authority(text, None)
        return method, host, port, b""
    scheme, sep, rest = text.partition("://")
    if not sep or "/" in scheme:
        raise BadRequest(
            "this is the sandbox's HTTP proxy: send requests through it as a proxy (HTTP_PROXY, HTTPS_PROXY)"
        )
    if scheme.lower() != "http":
        raise BadRequest(f"{scheme}:// URLs go through CONNECT (HTTPS_PROXY), not as a plain request")
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "#" in path:
        path = path[: path.index("#")]
    if not path.startswith("/"):
        path = "/" + path
    host, port = _authority(authority, 80)
    out = [b"%s %s %s" % (method, path.encode("ascii"), version)]
    listed = _connection_tokens(lines[1:])
    for line in lines[1:]:
        if not line:
            continue
        if line[:1] in (b" ", b"\t"):
            raise BadRequest("folded header lines are not accepted")
        name, colon, _ = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise BadRequest("a malformed header line")
        low = name.lower()
        if low in _HOP or low in listed:
            continue
        out.append(line)
    shown = _shown(host) + ("" if port == 80 else f":{port}")
    out.append(b"Host: " + shown.encode("ascii"))
    out.append(b"Connection: close")
    return method, host, port, b"\r\n".join(out) + b"\r\n\r\n"


def _connection_tokens(lines: list[bytes]) -> frozenset[bytes]:
    names: set[bytes] = set()
    for line in lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() in (b"connection", b"proxy-connection"):
            names.update(t.strip().lower() for t in value.split(b",") if t.strip())
    return frozenset(names)


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    if "@" in text:
        raise BadRequest("credentials in the URL are not passed through the proxy")
    parts = split_authority(text)
    if parts is None:
        raise BadRequest(f"{text!r} is not host:port")
    host_text, port_text = parts
    host = normalise_host(host_text)
    if host is None:
        raise BadRequest(f"{host_text!r} is not a host name")
    if port_text is None or port_text == "":
        if default_port is None:
            raise BadRequest("CONNECT needs host:port")
        return host, default_port
    port = parse_port(port_text)
    if port is None:
        raise BadRequest(f"{port_text!r} is not a port")
    return host, port


def relay(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides are done, at most `CHUNK` bytes in flight per direction; half-closes are
    passed on; `IDLE_TIMEOUT` without a byte either way ends it."""
    socks = (a, b)
    fds = (a.fileno(), b.fileno())
    for s in socks:
        s.setblocking(False)
    pending = [b"", b""]  # pending[i]: read from socks[i], not yet written to the other
    reading = [True, True]
    p = select.poll()
    registered = [False, False]
    while True:
        for i in (0, 1):
            ev = (select.POLLIN if reading[i] and not pending[i] else 0) | (select.POLLOUT if pending[1 - i] else 0)
            if ev:
                p.register(fds[i], ev)
                registered[i] = True
            elif registered[i]:
                p.unregister(fds[i])
                registered[i] = False
        if not any(registered):
            return
        ready = p.poll(int(IDLE_TIMEOUT * 1000))
        if not ready:
            return
        for fd, ev in ready:
            i = 0 if fd == fds[0] else 1
            other = socks[1 - i]
            if pending[1 - i] and ev & (select.POLLOUT | select.POLLERR | select.POLLHUP):
                try:
                    n = socks[i].send(pending[1 - i])
                except BlockingIOError:
                    n = 0
                except OSError:
                    return
                pending[1 - i] = pending[1 - i][n:]
                if not pending[1 - i] and not reading[1 - i]:
                    with contextlib.suppress(OSError):
                        socks[i].shutdown(socket.SHUT_WR)
            if reading[i] and not pending[i] and ev & (select.POLLIN | select.POLLERR | select.POLLHUP):
                try:
                    data = socks[i].recv(CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if data:
                    pending[i] = data
                else:
                    reading[i] = False
                    with contextlib.suppress(OSError):
                        other.shutdown(socket.SHUT_WR)


# ---- the process ---------------------------------------------------------------------------------------------
def run(control_fd: int, abi: int, private_dir: str | None, parent: int) -> None:
    """The proxy process's life, in the helper's forked child. Never returns."""
    code = 0
    try:
        _harden(control_fd, abi, private_dir, parent)
        threading.stack_size(256 * 1024)
        Proxy(socket.socket(fileno=control_fd), private_dir).serve()
    except BaseException as exc:  # one line where the agent's logs go, never a traceback
        with contextlib.suppress(OSError):
            os.write(2, f"gatewright network proxy: {type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))
        code = 1
    os._exit(code)


def _harden(control_fd: int, abi: int, private_dir: str | None, parent: int) -> None:
    from runtime.sandbox import landlock
    from runtime.sandbox._libc import PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, libc
    from runtime.sandbox.spec import baseline

    lc = libc()
    lc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)  # the helper died before the death signal was armed
    lc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.closerange(3, control_fd)
    os.closerange(control_fd + 1, os.sysconf("SC_OPEN_MAX"))
    if abi <= 0:
        return
    with landlock.Ruleset(abi, network=True) as rs:
        rs.allow_all(baseline(), landlock.READ)
        if private_dir is not None:
            rs.allow(private_dir, landlock.READ | landlock.FS_MAKE_SOCK | landlock.FS_REMOVE_FILE)
        if lc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
        rs.restrict_self()
