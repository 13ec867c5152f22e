"""The model errors, in a module of their own: the CLI and the `initialize` fast path need them without importing
the conversation records of `runtime.models.base` (dozens of dataclasses, a measurable part of start-up)."""

from __future__ import annotations


class ModelError(Exception):
    """A model call failed. `message` is one line, safe to show to the user (no secrets, no stack trace)."""

    def __init__(self, message: str, *, auth: bool = False, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.auth = auth
        self.retryable = retryable


class ModelNotConfigured(ModelError):
    pass
