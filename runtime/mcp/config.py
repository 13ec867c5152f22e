"""The editor's `mcpServers` entries, read into frozen records, and the secrets they carry.

Each entry of `session/new` / `session/load` / `session/resume` becomes a `StdioServer` or an `HttpServer`
(`transport` "http" or "sse"), or a `ConfigProblem` the user is told about; a bad entry never fails the session and
never hides the other servers. `env` and `headers` are arrays of `{name, value}` pairs (ACP), not objects.

Secrets: env values, header values and credentials in a URL are secrets. They live only in these records (whose
`repr` hides them), are scrubbed from the messages this package builds (`redact`), and are put in the process-wide
secret registry before the server starts (`register_secrets`), so no other child inherits them and no sink (logs,
wire, transcript, store) writes them. Pinned values are trusted
context, not secrets (a tenant, the workspace path); they are kept out of the model's view by `pinning` instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from runtime import secrets
from runtime.mcp.naming import unique_server_names
from runtime.mcp.pinning import PinError, parse_pins

REDACTED = "<redacted>"
# Shorter values ("1", "true", "debug") would shred every log line and protect nothing.
MIN_SECRET_LEN = 6


@dataclass(frozen=True, slots=True)
class SandboxWidening:
    """What a stdio server's sandbox allows beyond the default (`_meta.gatewright.sandbox` of its entry)."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: bool = True


@dataclass(frozen=True, slots=True)
class StdioServer:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    pinned: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    sandbox: SandboxWidening = field(default_factory=SandboxWidening)

    @property
    def transport(self) -> Literal["stdio"]:
        return "stdio"

    def secrets(self) -> tuple[str, ...]:
        return tuple(v for _, v in self.env)


@dataclass(frozen=True, slots=True)
class HttpServer:
    name: str
    url: str
    transport: Literal["http", "sse"] = "http"
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    pinned: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)

    def secrets(self) -> tuple[str, ...]:
        return tuple(v for _, v in self.headers) + _url_secrets(self.url)


ServerSpec = StdioServer | HttpServer


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """An entry that cannot be started; `message` is safe to show (it never contains a value)."""

    name: str
    message: str


def parse_servers(
    entries: Iterable[Any], session: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> tuple[list[ServerSpec], list[ConfigProblem]]:
    """Read ACP `McpServer` entries. `session` is the trusted context pins may refer to (`id`, `cwd`)."""
    items = list(entries)
    raw_names = [
        name if isinstance(e, dict) and isinstance(name := e.get("name"), str) and name else f"mcp-{i + 1}"
        for i, e in enumerate(items)
    ]
    names = unique_server_names(raw_names)
    specs: list[ServerSpec] = []
    problems: list[ConfigProblem] = []
    for name, entry in zip(names, items, strict=True):
        try:
            specs.append(_parse_one(name, entry, session, environ))
        except (ValueError, PinError) as exc:
            problems.append(ConfigProblem(name, str(exc)))
    return specs, problems


def _parse_one(name: str, entry: Any, session: Mapping[str, str], environ: Mapping[str, str] | None) -> ServerSpec:
    if not isinstance(entry, dict):
        raise ValueError("the entry is not an object")
    kind = entry.get("type")
    pinned = parse_pins(entry.get("_meta"), session, environ)
    if kind is None or kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError('a stdio server needs a "command"')
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError('"args" must be an array of strings')
        return StdioServer(
            name,
            command,
            tuple(args),
            _pairs(entry.get("env", []), "env"),
            pinned,
            _sandbox(entry.get("_meta"), session.get("cwd") or os.getcwd()),
        )
    if kind in ("http", "sse"):
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f'an {kind} server needs an http(s) "url"')
        return HttpServer(name, url, kind, _pairs(entry.get("headers", []), "headers"), pinned)
    shown = kind if isinstance(kind, str) else type(kind).__name__
    raise ValueError(f"transport {shown[:40]!r} is not supported by this agent")


def _sandbox(meta: Any, cwd: str) -> SandboxWidening:
    """`_meta.gatewright.sandbox`: `{"read": [paths], "write": [paths], "network": bool}`, paths absolute, `~/…` or
    relative to the session's cwd. A malformed value refuses the server (never a silently wider or narrower one)."""
    ours = meta.get("gatewright") if isinstance(meta, dict) else None
    value = ours.get("sandbox") if isinstance(ours, dict) else None
    if value is None:
        return SandboxWidening()
    if not isinstance(value, dict) or set(value) - {"read", "write", "network"}:
        raise ValueError('_meta.gatewright.sandbox must be an object with "read", "write" and "network"')
    lists = []
    for key in ("read", "write"):
        items = value.get(key, [])
        if not isinstance(items, list) or not all(isinstance(p, str) and p for p in items):
            raise ValueError(f"_meta.gatewright.sandbox.{key} must be an array of paths")
        lists.append(tuple(os.path.realpath(os.path.join(cwd, os.path.expanduser(p))) for p in items))
    network = value.get("network", True)
    if not isinstance(network, bool):
        raise ValueError("_meta.gatewright.sandbox.network must be true or false")
    return SandboxWidening(lists[0], lists[1], network)


def _pairs(value: Any, what: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f'"{what}" must be an array of {{name, value}} pairs')
    out = []
    for item in value:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)):
            raise ValueError(f'"{what}" must be an array of {{name, value}} pairs')
        out.append((item["name"], item["value"]))
    return tuple(out)


def _url_secrets(url: str) -> tuple[str, ...]:
    # Credentials in the URL itself (user:password@host, ?token=…) are secrets too.
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    out = [p for p in (parts.username, parts.password) if p]
    out += [v for _, v in parse_qsl(parts.query)]
    return tuple(out)


def register_secrets(spec: ServerSpec, environ: Mapping[str, str] | None = None) -> None:
    """Put a server's secret values in the process-wide registry (`runtime.secrets`), before it starts: from then on
    no child inherits them and no sink writes them.

    Left out, because it is provably not a secret: an env value the agent's own environment already holds under the
    same name (a `PATH` or `HOME` passed through; registering it would strip that variable from every child). Values
    naming existing paths are left out by the registry itself."""
    if isinstance(spec, HttpServer):
        secrets.register_headers(spec.headers, MIN_SECRET_LEN)
        secrets.register_values(_url_secrets(spec.url), MIN_SECRET_LEN, f"MCP server {spec.name}'s URL")
        return
    env = os.environ if environ is None else environ
    passed_through = {k for k, v in spec.env if env.get(k) == v and not secrets.REGISTRY.is_secret_name(k)}
    labelled = ((v, f"MCP server {spec.name}'s {k}") for k, v in spec.env if k not in passed_through)
    secrets.register_labelled(labelled, MIN_SECRET_LEN)


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of a secret value; longest first, so a secret containing another goes whole."""
    for s in sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return text


def session_context(session_id: str, cwd: str) -> dict[str, str]:
    """The trusted context a pin may refer to with `{"$session": …}`."""
    return {"id": session_id, "cwd": os.path.abspath(cwd)}
