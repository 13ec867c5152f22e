"""stdout carries ACP frames only: the guard works at the file-descriptor level (our rule; ACP transports:
"The agent MUST NOT write anything to its stdout that is not a valid ACP message")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

POLLUTER = r"""
import ctypes, os, subprocess, sys
from acp_server.stdio import guard_stdio
with guard_stdio() as fds:
    print("stray print")                                   # Python-level
    sys.stdout.write("stray sys.stdout\n"); sys.stdout.flush()
    os.write(1, b"stray fd 1\n")                           # descriptor-level
    ctypes.CDLL(None).write(1, b"stray libc write\n", 17)  # C-level, as an extension would
    subprocess.run(["sh", "-c", "echo stray child; cat"], check=True)   # a child inheriting fds 0 and 1
    data = sys.stdin.read()                                # stdin is the null device while serving
    os.write(fds.write_fd, b'{"jsonrpc":"2.0","method":"ok","params":{"stdin":"%s"}}\n' % data.encode())
print("after the guard, stdout is stdout again")
"""


def test_prints_c_writes_and_children_never_reach_the_protocol_stream():
    proc = subprocess.run(
        [sys.executable, "-c", POLLUTER], cwd=REPO, input=b"client bytes\n", capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert json.loads(lines[0]) == {"jsonrpc": "2.0", "method": "ok", "params": {"stdin": ""}}
    assert lines[1:] == ["after the guard, stdout is stdout again"]
    err = proc.stderr.decode()
    for stray in ("stray print", "stray sys.stdout", "stray fd 1", "stray libc write", "stray child"):
        assert stray in err


def test_the_protocol_descriptors_are_not_inherited_by_children():
    code = r"""
import os, subprocess, sys
from acp_server.stdio import guard_stdio
with guard_stdio() as fds:
    probe = "import os, sys\nfor n in sys.argv[1:]:\n    try:\n        os.fstat(int(n)); print('open', n)\n"
    probe += "    except OSError:\n        pass\n"
    r = subprocess.run([sys.executable, "-c", probe, str(fds.read_fd), str(fds.write_fd)],
                       capture_output=True, text=True)
    assert r.stdout == "", r.stdout
print("ok")
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert proc.stdout.decode().strip() == "ok", proc.stderr
