"""The durable session store (SQLite in the state dir). Import lazily: it is never needed to answer `initialize`."""

from runtime.store.db import default_state_dir
from runtime.store.sessions import CursorError, SessionRecord, SessionStore
from runtime.updates import iso8601

__all__ = ["CursorError", "SessionRecord", "SessionStore", "default_state_dir", "iso8601"]
