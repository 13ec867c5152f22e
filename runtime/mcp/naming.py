"""Tool names the model sees for MCP tools: `mcp__<server>__<tool>`, within what every provider accepts.

Providers accept tool names made of `[A-Za-z0-9_-]`, at most 64 characters. A name built from a server name and a
tool name that are already clean and short is kept readable (`mcp__github__create_issue`). Anything that had to be
changed (a character replaced, a part shortened, or a server name that would make the split ambiguous) gets a short
hash of the *original* pair appended, so two different pairs can never end up with the same name, whatever order
their servers become ready in. Pure functions: no I/O, no state.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container

PREFIX = "mcp__"
SEPARATOR = "__"
MAX_LEN = 64
_HASH_LEN = 8

_BAD = re.compile(r"[^A-Za-z0-9_-]")
# A server part keeps `mcp__<server>__<tool>` splittable at its first "__": no "__" inside, no "_" at either end.
_CLEAN_SERVER = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
_CLEAN_TOOL = re.compile(r"[A-Za-z0-9_-]+")


def normalise_part(text: str) -> str:
    """Replace every character outside `[A-Za-z0-9_-]` with `_`; an empty part becomes `_`."""
    return _BAD.sub("_", text) or "_"


def stable_hash(server: str, tool: str, length: int = _HASH_LEN) -> str:
    """A short hash of the original (server, tool) pair: the same pair gives the same hash in every run."""
    return hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:length]


def is_clean(server: str, tool: str) -> bool:
    """True when `mcp__<server>__<tool>` can be used as is (valid characters, unambiguous, short enough)."""
    return (
        _CLEAN_SERVER.fullmatch(server) is not None
        and _CLEAN_TOOL.fullmatch(tool) is not None
        and len(PREFIX) + len(server) + len(SEPARATOR) + len(tool) <= MAX_LEN
    )


def hashed_name(server: str, tool: str, hash_len: int = _HASH_LEN) -> str:
    """`mcp__<server'>__<tool'>_<hash>`: normalised, shortened to fit 64 characters, hash of the original pair."""
    suffix = "_" + stable_hash(server, tool, hash_len)
    room = MAX_LEN - len(PREFIX) - len(SEPARATOR) - len(suffix)
    s = normalise_part(server)
    t = normalise_part(tool)
    # The tool part is the informative one: the server part gets what the tool leaves, but never less than a third.
    s_room = max(1, min(len(s), max(room // 3, room - len(t))))
    s = s[:s_room]
    t = t[: room - len(s)]
    return f"{PREFIX}{s}{SEPARATOR}{t}{suffix}"


def exposed_name(server: str, tool: str, taken: Container[str] = ()) -> str:
    """The name under which `tool` of `server` is shown to the model.

    `taken` holds the names already used in the session by *other* tools; a clash (only possible with a crafted tool
    name that mimics a hash) falls back to the hashed form, then to a longer hash.
    """
    if is_clean(server, tool):
        name = f"{PREFIX}{server}{SEPARATOR}{tool}"
        if name not in taken:
            return name
    name = hashed_name(server, tool)
    if name not in taken:
        return name
    return hashed_name(server, tool, 16)


def unique_server_names(names: list[str]) -> list[str]:
    """Server names made unique by position: a repeated name gets `-2`, `-3`… (the first keeps its name)."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        candidate = name
        n = 2
        while candidate in seen:
            candidate = f"{name}-{n}"
            n += 1
        seen.add(candidate)
        out.append(candidate)
    return out
