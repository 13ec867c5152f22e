"""gatewright's version: the one source (pyproject.toml reads it without importing anything; both hosts report it)."""

__version__ = "0.1.0"
