"""Network by name through the real binary: `[sandbox] network` in the user's config file, a hostile scripted model
in `auto` mode, two local HTTP servers reached under two names of one address (`localhost`, named, and
`127.0.0.1`, not named; the proxy compares names, never addresses), a UDP listener, and an editor's terminal.
Checked where it lands: what each server accepted, what the listener received, the frames the editor got (the
refusal line, the note in the tool result, the question and why), the processes left."""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
import tempfile

import pytest

from runtime import sandbox
from tests.security.world import EditorTerminals, Run, answer_with, attack, bash, make_world
from tests.support.net_helpers import client_scripts, http_servers, network_config, received, udp_listener
from tests.support.sandbox_helpers import alive, children, wait_for

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sandbox.support().active, reason="no Landlock on this system"),
]
needs_namespaces = pytest.mark.skipif(not sandbox.support().namespaces, reason="no user namespaces here")
# The interpreter running the tests, first on the agent's PATH as `python3` (a command naming a path outside the
# workspace would ask, even in auto mode).
PYTHON_BIN = os.path.dirname(sys.executable)
REFUSED = "gatewright: 127.0.0.1 is not in [sandbox] network"


@pytest.fixture
def world(tmp_path):
    w = make_world(tmp_path)
    client_scripts(w.ws)
    return w


@pytest.fixture
def servers():
    with http_servers("A", "B") as s:
        yield s


def _env(world, hosts: list[str] | None, **extra: str) -> dict[str, str]:
    env = {"PATH": f"{PYTHON_BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}", **extra}
    if hosts is not None:
        env["GATEWRIGHT_CONFIG"] = str(network_config(world.root / "config.toml", hosts))
    return env


def _attack_command(a_port: int, b_port: int, udp_port: int) -> str:
    return (
        f"python3 fetch.py http://localhost:{a_port}/ok; echo; python3 fetch.py http://127.0.0.1:{b_port}/no; "
        f"python3 direct.py {b_port}; python3 udp.py {udp_port}; python3 other.py; echo end"
    )


def _limited_attack(spawn, world, servers, *, env: dict[str, str] | None = None, **kw) -> tuple[Run, list[bytes]]:
    """The attack command in a session whose config names only server A's `localhost:PORT`; (the run, the datagrams
    that reached the UDP listener)."""
    a, b = servers
    with udp_listener() as udp:
        run = attack(
            spawn,
            world,
            [bash(_attack_command(a.port, b.port, udp.getsockname()[1]))],
            mode="auto",
            env=_env(world, [f"localhost:{a.port}"], **(env or {})),
            **kw,
        )
        return run, received(udp)


def _expected(direct: str, udp: str, other: str) -> list[str]:
    """The attack command's lines: A answers, B under the other name is refused, then what the direct connection,
    the datagram and the proxy's port on another address did."""
    return ["A answered /ok", "", f"403 {REFUSED}", f"DIRECT-FAILED {direct}", udp, other, "end"]


# With namespaces: the datagram is sent into the command's own namespace (and reaches nothing outside it); the
# proxy's port on 127.0.0.2 is a port of that namespace's loopback, which no Landlock rule limits.
IN_NAMESPACE = ("ConnectionRefusedError", "UDP-SENT", "OTHER-ADDRESS-OK")


def _proxies(helper: int) -> list[int]:
    """The helper's children in its own pid namespace: its network proxies (every spawn's init, the agent's own git
    and rg included, is pid 1 of a namespace of its own: one more `NSpid` entry; `status` stays readable although
    the helper is not dumpable)."""
    return [pid for pid in children(helper) if _depth(pid) == _depth(helper)]


def _depth(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(len(line.split()) - 1 for line in f if line.startswith("NSpid:"))
    except (OSError, StopIteration):
        return -1


def _status(run: Run) -> str:
    assert run.agent.prompt(run.session, "/status")["result"]["stopReason"] == "end_turn"
    return "".join(
        u["content"]["text"] for u in run.agent.updates(run.session) if u.get("sessionUpdate") == "agent_message_chunk"
    )


@pytest.mark.req("gw:sandbox:network-by-name")
@needs_namespaces
def test_the_named_host_answers_the_other_name_is_refused_and_nothing_else_gets_out(spawn, world, servers):
    """In auto mode with namespaces: the command runs unasked; the named host answers; the same server under the
    other name is refused with the clear line, which the tool result names; a plain socket to the server's address
    and a UDP datagram reach nothing; /status says what holds it."""
    a, b = servers
    run, datagrams = _limited_attack(spawn, world, servers)
    assert datagrams == [] and run.questions == []
    out = run.results()[0]
    assert out["rawOutput"]["stdout"].splitlines() == _expected(*IN_NAMESPACE)
    assert out["rawOutput"]["refusedConnections"] == [REFUSED]
    shown = json.dumps(out["content"])
    assert "the sandbox's network proxy refused: 127.0.0.1 is not in [sandbox] network" in shown
    assert f"Commands reach only localhost:{a.port} ([sandbox] network in the user's config file)" in shown
    assert a.requests == [("GET", "/ok", f"localhost:{a.port}")] and b.accepted == 0
    status = _status(run)
    assert f"Network: commands reach only localhost:{a.port} ([sandbox] network)" in status
    assert "held by a network namespace" in status


@pytest.mark.req("gw:sandbox:network-by-name")
def test_without_namespaces_the_command_asks_first_saying_what_leaks_and_exactly_that_leaks(spawn, world, servers):
    """`GATEWRIGHT_SANDBOX=landlock`: in auto mode the command asks, and the question says what the sandbox cannot
    hold; approved, the named host answers and the other name is refused as before, a direct TCP connection is
    refused by Landlock, a datagram socket by the seccomp filter (where it works: otherwise the datagram gets out,
    as documented), and the proxy's port on another address is reachable (the documented leak)."""
    if sandbox.support().landlock_abi < 4:
        pytest.skip("Landlock ABI < 4 has no TCP rules")
    a, b = servers
    run, datagrams = _limited_attack(
        spawn, world, servers, env={"GATEWRIGHT_SANDBOX": "landlock"}, responder=answer_with("allow_once")
    )
    # The seccomp filter refuses datagram sockets where it works; without it UDP is the other documented leak.
    udp = "UDP-FAILED PermissionError" if sandbox.support().netfilter else "UDP-SENT"
    assert datagrams == ([] if sandbox.support().netfilter else [b"LEAK"])
    assert len(run.questions) == 1
    asked = json.dumps(run.questions[0]["params"])
    assert "[sandbox] network is not fully held here (no network namespace)" in asked
    assert "TCP is allowed to the proxy's port on every address" in asked
    assert ("UDP, DNS included, is not blocked" in asked) is not sandbox.support().netfilter
    # ... and the proxy's port on another address is reachable: Landlock's rule matches the port only.
    stdout = run.results()[0]["rawOutput"]["stdout"]
    assert stdout.splitlines() == _expected("PermissionError", udp, "OTHER-ADDRESS-OK")
    assert b.accepted == 0
    assert "not fully held here (no network namespace)" in _status(run)


@pytest.mark.req("gw:sandbox:network-by-name")
@needs_namespaces
def test_without_the_setting_nothing_changes_and_no_proxy_runs(spawn, world, servers):
    a, b = servers
    with udp_listener() as udp:
        run = attack(
            spawn,
            world,
            [bash(f"env | grep -ci '^https\\?_proxy=http://127.0.0.1'; python3 direct.py {b.port}")],
            mode="auto",
            env=_env(world, None),
        )
        helpers = children(run.agent.proc.pid)
        assert helpers and [p for h in helpers for p in _proxies(h)] == []  # the sandbox helper runs no proxy
        assert glob.glob(os.path.join(tempfile.gettempdir(), f"gatewright-proxy-{helpers[0]}-*")) == []
        assert received(udp) == []
    assert run.questions == []
    assert run.results()[0]["rawOutput"]["stdout"].split() == ["0", "DIRECT-OK"]
    assert "Network:" not in _status(run)


@pytest.mark.req("gw:sandbox:network-by-name")
@needs_namespaces
def test_the_proxy_dies_with_the_agent(spawn, world, servers):
    a, _ = servers
    run = attack(
        spawn,
        world,
        [bash(f"python3 fetch.py http://localhost:{a.port}/x")],
        mode="auto",
        env=_env(world, [f"localhost:{a.port}"]),
    )
    helpers = children(run.agent.proc.pid)
    proxies = [p for h in helpers for p in _proxies(h)]
    assert len(proxies) == 1
    os.kill(run.agent.proc.pid, signal.SIGKILL)
    assert wait_for(lambda: not any(alive(p) for p in [*helpers, *proxies]), 20)


@pytest.mark.req("gw:sandbox:network-by-name")
@needs_namespaces
def test_a_command_in_the_editors_terminal_is_held_to_the_same_hosts(spawn, world, servers):
    _, b = servers
    editor = EditorTerminals(answer_with("allow_once"))
    run, datagrams = _limited_attack(spawn, world, servers, responder=editor, caps={"terminal": True})
    assert datagrams == []
    assert editor.commands, "the editor terminal was not used"
    out = run.results()[-1]
    assert out["rawOutput"]["output"].splitlines() == _expected(*IN_NAMESPACE)
    assert out["rawOutput"]["refusedConnections"] == [REFUSED]
    assert b.accepted == 0
