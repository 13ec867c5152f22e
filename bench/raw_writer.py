"""The streaming baseline: writes the same `agent_message_chunk` frames gatewright sends, as fast as this machine
lets a Python process serialise them (orjson, one frame at a time, as the agent does) and push them down a pipe in
64 KiB writes. For each request line `{"id": ID, "n": N, "piece": TEXT, "sessionId": S}` on stdin it writes N frames,
then `{"jsonrpc": "2.0", "id": ID, "result": {}}` so the client can tell the batch is done."""

from __future__ import annotations

import os
import sys

import orjson


def main() -> None:
    out = sys.stdout.fileno()
    for line in sys.stdin.buffer:
        req = orjson.loads(line)
        pieces, sid = [req["piece"]] * req["n"], req["sessionId"]
        buf: list[bytes] = []
        size = 0
        for text in pieces:
            frame = (
                orjson.dumps(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {
                            "sessionId": sid,
                            "update": {
                                "sessionUpdate": "agent_message_chunk",
                                "content": {"type": "text", "text": text},
                            },
                        },
                    }
                )
                + b"\n"
            )
            buf.append(frame)
            size += len(frame)
            if size >= 65536:
                _write_all(out, b"".join(buf))
                buf, size = [], 0
        buf.append(orjson.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {}}) + b"\n")
        _write_all(out, b"".join(buf))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


if __name__ == "__main__":
    main()
