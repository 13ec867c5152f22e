"""Tiny MCP servers the tests run as real subprocesses (written with the `mcp` SDK's server API)."""
