"""The network-by-name proxy's cost per connection: one new connection and one HTTP request to a local server, timed
inside sandboxed commands, through the proxy and directly, in the same run.

Three ways, a command of `COUNT` connections each, the commands taken in turn round after round (a noisy neighbour
slows all alike):
- direct: a sandboxed command with the whole network (`[sandbox] network` unset) connects to the server itself;
- forward: a command limited to the server's `127.0.0.1:PORT` sends `GET http://127.0.0.1:PORT/` to its proxy
  variable's address (the namespace's listener, accepted by the proxy, which connects upstream);
- connect: the same through `CONNECT 127.0.0.1:PORT` and a request inside the tunnel (what HTTPS costs, less TLS).
The target (≤ 2 ms added per connection, p50) is forward and connect against direct.
"""

from __future__ import annotations

import http.server
import os
import statistics
import sys
import tempfile
import threading
from pathlib import Path

import anyio

from permissions.confinement import Confinement
from runtime import processes
from runtime.sandbox import build_spec, session_tmpdir

COUNT = 20
CLIENT = """\
import http.client, os, sys, time
mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proxy = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1]) if mode != "direct" else port
out = []
for _ in range(n):
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", proxy)
    if mode == "connect":
        c.set_tunnel("127.0.0.1", port)
    c.request("GET", f"http://127.0.0.1:{port}/" if mode == "forward" else "/")
    c.getresponse().read()
    c.close()
    out.append(time.perf_counter() - t)
print(" ".join(f"{x:.7f}" for x in out))
"""


class _Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def measure(rounds: int) -> dict[str, list[float]]:
    ws = Path(tempfile.mkdtemp(prefix="gw-bench-proxy-")).resolve()
    (ws / "client.py").write_text(CLIENT)
    server = http.server.HTTPServer(("127.0.0.1", 0), _Quiet)  # one thread: no per-connection thread either way
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    whole = Confinement(write=True, network=True)
    limited = Confinement(write=True, network=True, hosts=(f"127.0.0.1:{port}",))
    samples: dict[str, list[float]] = {"direct": [], "forward": [], "connect": []}
    tmp = session_tmpdir("sess_bench_proxy")

    async def run(mode: str, confinement: Confinement, n: int) -> list[float]:
        spec = build_spec(confinement, [str(ws)], tmpdir=tmp, grace=processes.EXEC_GRACE)
        argv = [sys.executable, "client.py", mode, str(port), str(n)]
        res = await processes.run_exec(argv, cwd=str(ws), env=dict(os.environ), timeout=60, spec=spec)
        if res.exit_code != 0:
            raise RuntimeError(f"the {mode} client failed: {res.stderr.strip()[-300:]}")
        return [float(x) for x in res.stdout.split()]

    async def main() -> None:
        for mode, conf in (("direct", whole), ("forward", limited), ("connect", limited)):
            await run(mode, conf, 3)  # the helper, the proxy, the caches
        for _ in range(rounds):
            samples["direct"] += await run("direct", whole, COUNT)
            samples["forward"] += await run("forward", limited, COUNT)
            samples["connect"] += await run("connect", limited, COUNT)

    try:
        anyio.run(main)
    finally:
        server.shutdown()
        server.server_close()
        processes.close_session("sess_bench_proxy")
    return samples


def p50(xs: list[float]) -> float:
    return statistics.median(xs)
