"""gatewright's ACP host: stdio framing, JSON-RPC, ACP methods, sessions, the CLI entry point."""

__version__ = "0.1.0"
