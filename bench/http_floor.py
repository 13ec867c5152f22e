"""The floor under a CPython agent's first LLM request: a fresh interpreter that does only what gatewright must do
between `initialize` and the first request and cannot write itself: start anyio's event loop (asyncio and anyio's
backend), import the HTTP stack (httpx2, httpcore2, h11) and build a client, then POST one streamed request.

    python bench/http_floor.py URL      prints {"loop": s, "http": s, "post": s} (each step's duration) as JSON

`bench/first_prompt.py` runs it against the mock, interleaved with the agents, as a baseline: no agent on this stack
can send its first request sooner after `initialize` than `loop + http`.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    url = sys.argv[1]
    t0 = time.perf_counter()
    import anyio

    async def run() -> dict[str, float]:
        t1 = time.perf_counter()
        import ssl

        import httpx2

        # As gatewright's own client for a plain-http base URL (runtime.models.http): no CA bundle to load.
        client = httpx2.AsyncClient(timeout=30, verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
        t2 = time.perf_counter()
        body = {"model": "mock", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        async with client.stream("POST", url, json=body) as response:
            async for _ in response.aiter_bytes():
                pass
        await client.aclose()
        return {"loop": t1 - t0, "http": t2 - t1, "post": time.perf_counter() - t2}

    print(json.dumps(anyio.run(run)), flush=True)


if __name__ == "__main__":
    main()
