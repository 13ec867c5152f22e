"""gatewright's ACP host: stdio framing, JSON-RPC, ACP methods, sessions, the CLI entry point."""

from runtime.version import __version__

__all__ = ["__version__"]
