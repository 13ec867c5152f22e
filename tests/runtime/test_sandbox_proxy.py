"""The network-by-name proxy (`runtime.sandbox.proxy`) in process: a `Proxy` served on a thread, driven over its
control socket as the agent drives it, against local HTTP servers that record what reached them."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.sandbox.proxy import MAX_HEAD, Proxy, parse_request
from tests.support.net_helpers import RecordingServer, http_servers

pytestmark = [pytest.mark.timeout(30)]


class Control:
    def __init__(self, tmp_dir: str) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proxy = Proxy(theirs, tmp_dir)
        self.thread = threading.Thread(target=self.proxy.serve, daemon=True)
        self.thread.start()

    def request(self, msg: dict[str, Any], fds: list[int] | None = None) -> tuple[dict[str, Any], int | None]:
        socket.send_fds(self.sock, [json.dumps(msg).encode()], fds or [])
        data, got, _, _ = socket.recv_fds(self.sock, 65536, 1)
        return json.loads(data), (got[0] if got else None)

    def open(self, kind: str, hosts: list[str]) -> tuple[dict[str, Any], int | None, int]:
        notes_r, notes_w = os.pipe()
        try:
            reply, fd = self.request({"op": "open", "kind": kind, "hosts": hosts}, [notes_w])
        finally:
            os.close(notes_w)
        os.set_blocking(notes_r, False)
        return reply, fd, notes_r

    def barrier(self) -> None:
        """Return once the proxy has handled every event that was pending when this was called: its one thread
        handles all the ready descriptors of a poll before the next, so the second answer comes after them."""
        for _ in range(2):
            self.request({"op": "nothing"})

    def close(self) -> None:
        self.sock.close()
        self.thread.join(10)


@pytest.fixture
def private_dir() -> Iterator[str]:
    """The proxy's private directory, short as the helper makes it (a unix socket's path is at most 107 bytes)."""
    path = tempfile.mkdtemp(prefix="gw-proxy-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def control(private_dir) -> Iterator[Control]:
    c = Control(private_dir)
    yield c
    c.close()
    assert not c.thread.is_alive()  # the proxy ends when its control socket closes


@pytest.fixture
def servers() -> Iterator[list[RecordingServer]]:
    with http_servers("A", "B") as s:
        yield s


def notes(fd: int) -> list[str]:
    try:
        return os.read(fd, 65536).decode().splitlines()
    except BlockingIOError:
        return []


def get(port: int, url: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", url, headers=headers or {})
    r = c.getresponse()
    out = (r.status, r.reason, r.read().decode())
    c.close()
    return out


def test_a_named_host_answers_and_another_name_for_the_same_server_is_refused_with_one_line(control, servers):
    a, b = servers
    reply, _, notes_r = control.open("tcp", [f"localhost:{a.port}"])
    assert get(reply["port"], f"http://localhost:{a.port}/x")[0::2] == (200, "A answered /x\n")
    status, reason, body = get(reply["port"], f"http://127.0.0.1:{b.port}/y")
    line = "gatewright: 127.0.0.1 is not in [sandbox] network"
    assert (status, reason, body) == (403, line, line + "\n")
    assert b.requests == [] and b.accepted == 0  # nothing reached the server that was not named
    assert notes(notes_r) == [f"127.0.0.1:{b.port}\t{line}"]


def test_the_port_of_a_named_host_matters_when_the_entry_names_one(control, servers):
    a, b = servers
    reply, _, notes_r = control.open("tcp", [f"localhost:{a.port}"])
    status, _, body = get(reply["port"], f"http://localhost:{b.port}/")
    assert status == 403 and body == f"gatewright: port {b.port} of localhost is not in [sandbox] network\n"
    assert b.accepted == 0


def test_a_refused_target_is_noted_once_however_often_it_is_tried(control, servers):
    reply, _, notes_r = control.open("tcp", ["pypi.org"])
    for _ in range(3):
        assert get(reply["port"], "http://example.com/")[0] == 403
    assert get(reply["port"], "http://example.com:8080/")[0] == 403
    assert [n.split("\t")[0] for n in notes(notes_r)] == ["example.com:80", "example.com:8080"]


def test_the_host_header_is_the_urls_own_so_a_named_host_cannot_be_asked_for_another_site(control, servers):
    a, _ = servers
    reply, _, _ = control.open("tcp", [f"localhost:{a.port}"])
    get(reply["port"], f"http://localhost:{a.port}/p?q=1", {"Host": "evil.example", "Proxy-Authorization": "x"})
    assert a.requests == [("GET", "/p?q=1", f"localhost:{a.port}")]


def test_connect_tunnels_to_a_named_host_and_is_refused_for_others(control, servers):
    a, b = servers
    reply, _, _ = control.open("tcp", [f"localhost:{a.port}"])
    c = http.client.HTTPConnection("127.0.0.1", reply["port"], timeout=10)
    c.set_tunnel("localhost", a.port)
    c.request("GET", "/tunnelled")
    assert c.getresponse().read() == b"A answered /tunnelled\n"
    c.close()
    c = http.client.HTTPConnection("127.0.0.1", reply["port"], timeout=10)
    c.set_tunnel("127.0.0.1", b.port)
    with pytest.raises(OSError, match=r"403 gatewright: 127\.0\.0\.1 is not in \[sandbox\] network"):
        c.request("GET", "/")
    assert b.accepted == 0


def raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize(
    ("request_bytes", "says"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"send requests through it as a proxy"),
        (b"GET https://pypi.org/ HTTP/1.1\r\n\r\n", b"go through CONNECT"),
        (b"CONNECT pypi.org HTTP/1.1\r\n\r\n", b"CONNECT needs host:port"),
        (b"GET http://user:pw@pypi.org/ HTTP/1.1\r\n\r\n", b"credentials in the URL"),
        (b"GET http://pypi.org/ HTTP/1.1\r\n folded\r\n\r\n", b"folded header"),
        (b"hello\r\n\r\n", b"not an HTTP/1.x request"),
        (b"get http://pypi.org/ HTTP/1.1\r\n\r\n", b"not an HTTP method"),
        (b"CONNECT [::1:80 HTTP/1.1\r\n\r\n", b"is not host:port"),
    ],
)
def test_a_request_the_proxy_cannot_pass_on_gets_400_saying_why(control, request_bytes, says):
    reply, _, _ = control.open("tcp", ["pypi.org"])
    out = raw(reply["port"], request_bytes)
    assert out.startswith(b"HTTP/1.1 400 ") and says in out


def test_a_request_head_larger_than_the_bound_is_answered_431_and_not_read_on(control):
    reply, _, _ = control.open("tcp", ["pypi.org"])
    out = raw(reply["port"], b"GET http://pypi.org/ HTTP/1.1\r\nX: " + b"a" * (MAX_HEAD + 10))
    assert out.startswith(b"HTTP/1.1 431 ")


def test_a_named_host_that_does_not_answer_gets_502_naming_it(control):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound, never listening: connecting is refused
        reply, _, _ = control.open("tcp", [f"127.0.0.1:{closed}"])
        out = raw(reply["port"], f"GET http://127.0.0.1:{closed}/ HTTP/1.1\r\n\r\n".encode())
    assert out.startswith(b"HTTP/1.1 502 gatewright: could not connect to 127.0.0.1:")


def test_a_pair_endpoint_accepts_on_the_listener_it_is_sent_and_ends_when_the_channel_closes(control, servers):
    a, _ = servers
    reply, channel, _ = control.open("pair", [f"localhost:{a.port}"])
    assert channel is not None
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    with socket.socket(fileno=channel) as chan:
        socket.send_fds(chan, [b"L"], [listener.fileno()])
        listener.close()  # the proxy has its own
        assert get(port, f"http://localhost:{a.port}/ns")[0::2] == (200, "A answered /ns\n")
    # the init's end closed: the endpoint and its listener are gone
    control.barrier()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=10)


def test_closing_an_endpoint_ends_its_live_tunnels(control, servers):
    a, _ = servers
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        up_port = upstream.getsockname()[1]
        reply, _, _ = control.open("tcp", [f"localhost:{up_port}"])
        c = socket.create_connection(("127.0.0.1", reply["port"]), timeout=10)
        c.sendall(f"CONNECT localhost:{up_port} HTTP/1.1\r\n\r\n".encode())
        assert c.recv(100).startswith(b"HTTP/1.1 200 ")
        server_side, _ = upstream.accept()
        control.request({"op": "close", "id": reply["id"]})
        assert c.recv(100) == b""  # the tunnel was ended with its endpoint
        assert server_side.recv(100) == b""
        server_side.close()
        c.close()


def test_a_path_endpoint_takes_one_connection_and_removes_its_socket(control, private_dir):
    reply, _, _ = control.open("path", ["pypi.org"])
    path = reply["path"]
    assert os.path.dirname(path) == private_dir and os.path.exists(path)
    first = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    first.connect(path)
    control.barrier()
    assert not os.path.exists(path)
    first.close()


def test_control_errors_are_answers_and_the_proxy_goes_on(control):
    assert "error" in control.request({"op": "nothing"})[0]
    assert "error" in control.request({"op": "open", "kind": "tcp", "hosts": ["https://x"]})[0]
    assert "error" in control.request({"op": "open", "kind": "sideways", "hosts": []})[0]
    assert "port" in control.open("tcp", [])[0]


def test_a_forwarded_request_drops_hop_by_hop_headers_and_closes_after_the_answer():
    method, host, port, head = parse_request(
        b"POST http://Example.org:8080/a?b HTTP/1.1\r\nConnection: X-Secret\r\nX-Secret: 1\r\n"
        b"Proxy-Connection: keep-alive\r\nKeep-Alive: 5\r\nContent-Length: 0\r\nHost: other"
    )
    assert (method, host, port) == (b"POST", "example.org", 8080)
    assert head == (b"POST /a?b HTTP/1.1\r\nContent-Length: 0\r\nHost: example.org:8080\r\nConnection: close\r\n\r\n")
