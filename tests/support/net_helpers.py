"""Local servers for the network-by-name tests: HTTP servers on 127.0.0.1 that record what reached them, a UDP
listener, and a config file with `[sandbox] network`."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class _Handler(http.server.BaseHTTPRequestHandler):
    server: RecordingServer

    def do_GET(self) -> None:
        self.server.requests.append((self.command, self.path, self.headers.get("Host") or ""))
        body = f"{self.server.name} answered {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class RecordingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.name = name
        self.requests: list[tuple[str, str, str]] = []
        self.accepted = 0

    def get_request(self) -> tuple[socket.socket, object]:
        got = super().get_request()
        self.accepted += 1  # every TCP connection that reached it, a request or not
        return got

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@contextmanager
def http_servers(*names: str) -> Iterator[list[RecordingServer]]:
    servers = [RecordingServer(n) for n in names]
    threads = [threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True) for s in servers]
    for t in threads:
        t.start()
    try:
        yield servers
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


@contextmanager
def udp_listener() -> Iterator[socket.socket]:
    """A UDP socket on 127.0.0.1 (read it with a timeout: what a sandboxed command sent, if anything)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock
    finally:
        sock.close()


def received(sock: socket.socket) -> list[bytes]:
    """The datagrams that reached `sock` before now: a sentinel sent from here marks "now" (loopback keeps the
    order), so nothing is waited for but the sentinel itself."""
    sentinel = b"sentinel-" + socket.gethostname().encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(sentinel, sock.getsockname())
    sock.settimeout(10)
    out = []
    while (data := sock.recv(65536)) != sentinel:
        out.append(data)
    return out


# What a command runs to fetch a URL the way most tools do: through the proxy variables (urllib reads them).
FETCH = (
    "import sys, urllib.request, urllib.error\n"
    "try:\n"
    "    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode(), end='')\n"
    "except urllib.error.HTTPError as e:\n"
    "    print(e.code, e.read().decode(), end='')\n"
)
# ... and what a command runs that ignores them: a plain socket to an address and port.
DIRECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5).close(); print('DIRECT-OK')\n"
    "except OSError as e:\n"
    "    print('DIRECT-FAILED', type(e).__name__)\n"
)
UDP = (
    "import socket, sys\n"
    "try:\n"
    "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'LEAK', ('127.0.0.1', int(sys.argv[1])))\n"
    "    print('UDP-SENT')\n"
    "except OSError as e:\n"
    "    print('UDP-FAILED', type(e).__name__)\n"
)
# ... and one that listens on the proxy's port number at another loopback address and connects to it there: what
# Landlock's port rule cannot tell apart from the proxy, where there is no network namespace.
OTHER_ADDRESS = (
    "import os, socket\n"
    "port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])\n"
    "try:\n"
    "    s = socket.create_server(('127.0.0.2', port)); socket.create_connection(('127.0.0.2', port)).close()\n"
    "    print('OTHER-ADDRESS-OK')\n"
    "except OSError as e:\n"
    "    print('OTHER-ADDRESS-FAILED', type(e).__name__)\n"
)


def client_scripts(ws: Path) -> None:
    """`fetch.py URL` (as most tools fetch: through the proxy variables), `direct.py PORT` (a plain TCP connection
    to 127.0.0.1, ignoring them), `udp.py PORT` (one datagram to 127.0.0.1) and `other.py` (the proxy's port on
    127.0.0.2) in a workspace."""
    (ws / "fetch.py").write_text(FETCH)
    (ws / "direct.py").write_text(DIRECT)
    (ws / "udp.py").write_text(UDP)
    (ws / "other.py").write_text(OTHER_ADDRESS)


def network_config(path: Path, hosts: list[str], extra: str = "") -> Path:
    entries = ", ".join(f'"{h}"' for h in hosts)
    path.write_text(f"[sandbox]\nnetwork = [{entries}]\n{extra}", encoding="utf-8")
    return path
