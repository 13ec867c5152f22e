"""Network by name under real sandboxed processes (`runtime.processes` through the sandbox helper and its proxy):
two local HTTP servers reached under two names for the same address, `localhost` (named in the command's hosts)
and `127.0.0.1` (not named), and what a command that ignores the proxy variables can reach, checked where it lands
(what each server accepted, what a UDP listener received).

`localhost` and `127.0.0.1` are the honest pair here: the proxy compares the name a command asked for, never the
address it resolves to, so two names of one address are as different as two hosts, and both exist on every system
without root or a hosts file of the test's own."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from permissions.confinement import Confinement
from runtime import processes, sandbox
from runtime.sandbox import build_spec, session_tmpdir
from runtime.sandbox._libc import PR_SET_NO_NEW_PRIVS, libc
from runtime.sandbox.client import Spawner
from runtime.sandbox.launcher_env import launcher_command
from runtime.sandbox.seccomp import network_filter
from tests.support.net_helpers import RecordingServer, client_scripts, http_servers, received, udp_listener
from tests.support.sandbox_helpers import alive, wait_for

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sandbox.support().active, reason="no Landlock on this system"),
]
ROOT = Path(__file__).resolve().parents[2]
BASE_PYTHON = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
needs_namespaces = pytest.mark.skipif(not sandbox.support().namespaces, reason="no user namespaces here")


@pytest.fixture
def servers():
    with http_servers("A", "B") as s:
        yield s


@pytest.fixture
def ws(tmp_path):
    d = tmp_path / "ws"
    d.mkdir()
    client_scripts(d)
    return d.resolve()


def limited(hosts: list[str] | None) -> Confinement:
    return Confinement(write=True, network=True, hosts=None if hosts is None else tuple(hosts))


async def run(ws: Path, command: str, confinement: Confinement) -> processes.ExecResult:
    spec = build_spec(confinement, [str(ws)], tmpdir=session_tmpdir("sess_net"), grace=processes.EXEC_GRACE)
    env = dict(os.environ, PY=sys.executable)
    return await processes.run_exec(["/bin/bash", "-c", command], cwd=str(ws), env=env, timeout=30, spec=spec)


def named(a: RecordingServer) -> Confinement:
    return limited([f"localhost:{a.port}"])


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["namespaces", "landlock"])
async def test_a_named_host_answers_and_the_same_server_under_another_name_is_refused_with_one_line(
    ws, servers, mode, monkeypatch
):
    if mode == "namespaces" and not sandbox.support().namespaces:
        pytest.skip("no user namespaces here")
    if mode == "landlock":
        monkeypatch.setenv("GATEWRIGHT_SANDBOX", "landlock")
    a, b = servers
    res = await run(
        ws,
        f'"$PY" fetch.py http://localhost:{a.port}/ok; echo; "$PY" fetch.py http://127.0.0.1:{b.port}/no',
        named(a),
    )
    line = "gatewright: 127.0.0.1 is not in [sandbox] network"
    assert res.stdout == f"A answered /ok\n\n403 {line}\n", res.stderr
    assert res.refused == (line,)
    assert a.requests == [("GET", "/ok", f"localhost:{a.port}")]
    assert b.accepted == 0  # not one connection reached the server that was not named


@needs_namespaces
@pytest.mark.anyio
async def test_with_namespaces_a_command_that_ignores_the_proxy_reaches_nothing_tcp_or_udp(ws, servers):
    a, b = servers
    with udp_listener() as udp:
        res = await run(
            ws,
            f'"$PY" direct.py {b.port}; "$PY" direct.py {a.port}; "$PY" udp.py {udp.getsockname()[1]} >/dev/null; '
            'unset HTTP_PROXY http_proxy; "$PY" fetch.py http://localhost:' + str(a.port) + "/ 2>&1 | tail -1",
            named(a),
        )
        assert received(udp) == []
    assert res.stdout.splitlines()[:2] == ["DIRECT-FAILED ConnectionRefusedError"] * 2, res.stdout
    assert "Connection refused" in res.stdout.splitlines()[2]  # the namespace's own loopback holds no server
    assert a.accepted == 0 and b.accepted == 0


@pytest.mark.anyio
async def test_without_namespaces_tcp_is_held_to_the_proxys_port_and_exactly_the_documented_leaks_remain(
    ws, servers, monkeypatch
):
    """`GATEWRIGHT_SANDBOX=landlock`: Landlock (ABI 4+) allows TCP connections to the proxy's port only, so a direct
    connection to a server fails, and the seccomp filter refuses datagram sockets (UDP, DNS included); what cannot
    be held is that port on any other address."""
    if sandbox.support().landlock_abi < 4:
        pytest.skip("Landlock ABI < 4 has no TCP rules")
    monkeypatch.setenv("GATEWRIGHT_SANDBOX", "landlock")
    a, b = servers
    with udp_listener() as udp:
        res = await run(ws, f'"$PY" direct.py {b.port}; "$PY" udp.py {udp.getsockname()[1]}; "$PY" other.py', named(a))
        got = received(udp)
    if sandbox.support().netfilter:
        assert got == [] and res.stdout.splitlines()[1] == "UDP-FAILED PermissionError"
    else:  # no seccomp filter on this machine: UDP is the other documented leak
        assert got == [b"LEAK"] and res.stdout.splitlines()[1] == "UDP-SENT"
    assert res.stdout.splitlines()[::2] == ["DIRECT-FAILED PermissionError", "OTHER-ADDRESS-OK"], res.stderr
    assert b.accepted == 0


@pytest.mark.anyio
async def test_without_the_setting_nothing_changes_no_proxy_and_the_whole_network(ws, servers):
    a, b = servers
    before = Spawner.get()._proxy
    res = await run(ws, f'env | grep -ci "^https\\?_proxy=http://127.0.0.1" ; "$PY" direct.py {b.port}', limited(None))
    assert res.stdout.split() == ["0", "DIRECT-OK"]
    assert Spawner.get()._proxy is before  # no proxy was started for it


@pytest.mark.anyio
async def test_a_command_proven_read_only_has_no_network_whatever_the_setting(ws, servers):
    a, _ = servers
    res = await run(ws, f'"$PY" fetch.py http://localhost:{a.port}/ 2>&1 | tail -1', Confinement(write=False))
    assert a.accepted == 0 and res.refused == ()


@pytest.mark.anyio
@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
async def test_curl_gets_the_refusal_for_https_and_the_page_of_a_named_host(ws, servers):
    a, b = servers
    res = await run(
        ws,
        f"curl -sS http://localhost:{a.port}/c; curl -sS -p http://localhost:{a.port}/t; "
        f"curl -sS https://example.com/ 2>&1; curl -sS -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{b.port}/",
        named(a),
    )
    out = res.stdout.splitlines()
    assert out[:2] == ["A answered /c", "A answered /t"]
    assert "403" in out[2] and out[3] == "403"
    assert sorted(res.refused) == [
        "gatewright: 127.0.0.1 is not in [sandbox] network",
        "gatewright: example.com is not in [sandbox] network",
    ]


def test_the_proxy_ends_with_the_helper_and_starts_again_for_the_next_command(ws, servers):
    a, _ = servers
    spec = build_spec(named(a), [str(ws)], tmpdir=session_tmpdir("sess_net"), grace=0.3)
    spawner = Spawner.get()
    net = spawner.net_limit(spec)
    net.close()
    pid = spawner.proxy().pid
    assert os.path.exists(f"/proc/{pid}")
    Spawner.stop()
    assert spawner.proc.poll() is not None
    # the helper is gone; the proxy was killed with it (a fact of another process: polled, bounded)
    assert wait_for(lambda: not alive(pid), 10)
    net = Spawner.get().net_limit(spec)
    net.close()
    assert Spawner.get().proxy().pid != pid


# ---- the editor-terminal launcher ----------------------------------------------------------------------------------
@needs_namespaces
def test_the_editor_terminal_launcher_holds_the_same_limit(ws, servers):
    a, b = servers
    spec = build_spec(named(a), [str(ws)], tmpdir=session_tmpdir("sess_net"), grace=0.3)
    net = Spawner.get().net_limit(spec, launcher=True)
    try:
        command = (
            f'"$PY" fetch.py http://localhost:{a.port}/term; echo; "$PY" fetch.py http://127.0.0.1:{b.port}/; '
            f'"$PY" direct.py {b.port}'
        )
        exe, args = launcher_command(net.spec, ["/bin/bash", "-c", command])
        # The base interpreter (the scripts need only the standard library): the launcher's baseline is that of the
        # terminal's environment, where the tests' venv may not be readable.
        env = sandbox.child_env(dict(os.environ, PYTHONPATH=str(ROOT), PY=BASE_PYTHON), net.spec)
        p = subprocess.run([exe, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=30)
        assert p.stdout.splitlines() == [
            "A answered /term",
            "",
            "403 gatewright: 127.0.0.1 is not in [sandbox] network",
            "DIRECT-FAILED ConnectionRefusedError",
        ], p.stderr
        assert net.refused() == ["gatewright: 127.0.0.1 is not in [sandbox] network"]
        assert b.accepted == 0
    finally:
        net.close()
    assert not os.path.exists(net.spec.proxy_path or "")  # the one-shot socket is gone


def test_the_launcher_refuses_to_run_when_the_proxy_cannot_be_reached(ws, tmp_path):
    spec = build_spec(limited(["pypi.org"]), [str(ws)], tmpdir=session_tmpdir("sess_net"), grace=0.3)
    gone = spec.through_proxy(20001, str(tmp_path / "gone.sock"))
    exe, args = launcher_command(gone, ["/bin/bash", "-c", "touch ran"])
    at = args.index("--spec") + 1
    payload = json.loads(args[at])
    payload["caps"][1] = True  # as where namespaces exist
    args[at] = json.dumps(payload)
    p = subprocess.run(
        [exe, *args], cwd=ws, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 126 and "network proxy cannot be reached" in p.stderr
    assert not (ws / "ran").exists()


@pytest.mark.anyio
async def test_a_background_process_is_held_the_same_way_and_its_refusals_are_in_its_status(ws, servers):
    a, b = servers
    spec = build_spec(named(a), [str(ws)], tmpdir=session_tmpdir("sess_net_bg"), grace=None)
    table = processes.session_table("sess_net_bg")
    try:
        proc = table.start(
            [
                "/bin/bash",
                "-c",
                f'"$PY" fetch.py http://localhost:{a.port}/bg; "$PY" fetch.py http://127.0.0.1:{b.port}/',
            ],
            command="fetch twice",
            cwd=str(ws),
            env=dict(os.environ, PY=sys.executable),
            spec=spec,
        )
        assert proc.child.wait_sync(30) == 0
        for t in proc.threads:
            t.join(10)
        assert "A answered /bg" in proc.log.read(0, 10_000)[0]
        assert proc.info()["refusedConnections"] == ["gatewright: 127.0.0.1 is not in [sandbox] network"]
        assert b.accepted == 0
    finally:
        processes.close_session("sess_net_bg")


# ---- the seccomp filter of a limited command without a network namespace -------------------------------------------
SOCKETS = {
    "tcp4": (socket.AF_INET, socket.SOCK_STREAM, 0),
    "tcp6": (socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC, socket.IPPROTO_TCP),
    "unix": (socket.AF_UNIX, socket.SOCK_DGRAM, 0),
    "udp4": (socket.AF_INET, socket.SOCK_DGRAM, 0),
    "udp6": (socket.AF_INET6, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK, 0),
    "raw": (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    "sctp": (socket.AF_INET, socket.SOCK_STREAM, 132),
    "packet": (getattr(socket, "AF_PACKET", 17), socket.SOCK_DGRAM, 0),
}


def _made_under(flt) -> dict[str, bool]:
    """Which of `SOCKETS` a forked child can make under the filter (True: made, False: refused with EACCES)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            flt.install()
            out = {}
            for name, args in SOCKETS.items():
                try:
                    socket.socket(*args).close()
                    out[name] = True
                except PermissionError:
                    out[name] = False
                except OSError:  # not offered by this kernel at all (sctp): refused either way
                    out[name] = False
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 65536)
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.mark.skipif(network_filter(tcp=True) is None, reason="no seccomp filter for this machine")
def test_a_limited_command_without_namespaces_may_open_tcp_sockets_only():
    assert _made_under(network_filter(tcp=True)) == {
        "tcp4": True,
        "tcp6": True,
        "unix": True,
        "udp4": False,
        "udp6": False,
        "raw": False,
        "sctp": False,
        "packet": False,
    }
    # and the filter of a command without the network is unchanged: no IP socket at all
    assert _made_under(network_filter()) == {name: name == "unix" for name in SOCKETS}
