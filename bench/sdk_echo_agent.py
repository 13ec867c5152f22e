"""Baseline for bench/startup.py: a minimal echo agent on the official Python ACP SDK (`agent-client-protocol`),
equivalent to the SDK's own `examples/echo_agent.py`."""

import asyncio

from acp import PROTOCOL_VERSION, Agent, InitializeResponse, NewSessionResponse, PromptResponse, run_agent


class EchoAgent(Agent):
    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd, mcp_servers=None, **kw):
        return NewSessionResponse(session_id="echo")

    async def prompt(self, prompt, session_id, **kw):
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(EchoAgent()))
