"""Network by name: which hosts `[sandbox] network` names, and whether a connection's host and port are among them.

Pure functions over strings, shared by the config check (`runtime.config`) and the proxy (`proxy`), which runs in a
`python -S` process: standard library only, no `typing` or `dataclasses` at run time.

What an entry means:
- `pypi.org`: exactly that host (any letter case, with or without a trailing dot), on any port;
- `*.pythonhosted.org`: every name below it (`files.pythonhosted.org`, `a.b.pythonhosted.org`), not the name itself
  (list both when both are wanted);
- `registry.local:4873`, `*.corp.example:8443`, `[::1]:8080`: the same, on that port only;
- `127.0.0.1`, `::1`: an address, written the way `ipaddress` writes it (`127.1` or `0x7f.0.0.1` are other names:
  the proxy compares what the command asked for, it never matches an address against a name's resolution).

The match is on the name the command asked the proxy for (a CONNECT's authority, an absolute URL's host), and the
proxy itself resolves that name: a name that is listed cannot lead anywhere but where the system resolver says it
goes. Nothing else is accepted (a URL, a path, a bare `*`, a name with characters no host name has): a typo stops
the start with one line instead of silently allowing something else.
"""

from __future__ import annotations

import ipaddress

from runtime.sandbox._frozen import Frozen

MAX_NAME = 253
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


class HostPattern(Frozen):
    """One entry of `[sandbox] network`. `host`: a normalised name or address (for a wildcard, the suffix below which
    every name matches); `port`: None for every port."""

    __slots__ = ("host", "wildcard", "port")
    host: str
    wildcard: bool
    port: int | None

    def __init__(self, host: str, wildcard: bool = False, port: int | None = None) -> None:
        self._init(host=host, wildcard=wildcard, port=port)

    def covers_host(self, host: str) -> bool:
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host

    def matches(self, host: str, port: int) -> bool:
        return (self.port is None or self.port == port) and self.covers_host(host)

    def __str__(self) -> str:
        if self.port is None:
            return ("*." if self.wildcard else "") + self.host
        host = f"[{self.host}]" if ":" in self.host else self.host
        return ("*." if self.wildcard else "") + f"{host}:{self.port}"


def normalise_host(text: str) -> str | None:
    """A host as a command wrote it (`Example.ORG.`, `[::1]`, `127.0.0.1`) in the form patterns use, or None when it
    is not a host name or an address at all."""
    if not text:
        return None
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
        try:
            return ipaddress.IPv6Address(text).compressed
        except ValueError:
            return None
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text).compressed
        except ValueError:
            return None
    name = text.lower()
    if name.endswith("."):
        name = name[:-1]
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        pass
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    if not name or len(name) > MAX_NAME:
        return None
    for label in name.split("."):
        if not label or len(label) > 63 or label[0] == "-" or label[-1] == "-" or not _LABEL_CHARS.issuperset(label):
            return None
    return name


def parse_port(text: str) -> int | None:
    """A decimal TCP port 1–65535, or None."""
    if not text.isdigit() or len(text) > 5:
        return None
    port = int(text)
    return port if 0 < port < 65536 else None


def split_authority(text: str) -> tuple[str, str | None] | None:
    """`host[:port]` / `[v6][:port]` / a bare IPv6 address → (host text, port text or None); None when malformed."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[: end + 1], text[end + 1 :]
        if not rest:
            return host, None
        if not rest.startswith(":"):
            return None
        return host, rest[1:]
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, port
    return text, None


def parse_pattern(entry: str) -> HostPattern:
    """One `[sandbox] network` entry. Raises ValueError saying what is wrong with it."""
    text = entry.strip()
    if not text or any(c.isspace() for c in text):
        raise ValueError("not a host name")
    if "://" in text or "/" in text or "@" in text or "?" in text or "#" in text:
        raise ValueError("a URL or a path, not a host")
    if text == "*" or text.startswith("*:"):
        raise ValueError("that would allow every host: remove [sandbox] network to give commands every host")
    parts = split_authority(text)
    if parts is None:
        raise ValueError("not a host name")
    host_text, port_text = parts
    port = None
    if port_text is not None:
        port = parse_port(port_text)
        if port is None:
            raise ValueError("the port must be a number from 1 to 65535")
    wildcard = host_text.startswith("*.")
    if wildcard:
        host_text = host_text[2:]
    if "*" in host_text:
        raise ValueError("a wildcard is only allowed as the first label, *.example.org")
    host = normalise_host(host_text)
    if host is None:
        raise ValueError("not a host name")
    if wildcard and _is_address(host):
        raise ValueError("a wildcard names the host names below a domain, not addresses")
    return HostPattern(host, wildcard, port)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_patterns(entries: list[str] | tuple[str, ...]) -> tuple[HostPattern, ...]:
    """Every entry, in order, without duplicates. Raises ValueError naming the first bad one."""
    out: list[HostPattern] = []
    for e in entries:
        p = parse_pattern(e)
        if p not in out:
            out.append(p)
    return tuple(out)


def allowed(patterns: tuple[HostPattern, ...], host: str, port: int) -> bool:
    """Whether a normalised `host` on `port` is named by one of `patterns`."""
    return any(p.matches(host, port) for p in patterns)


def refusal(patterns: tuple[HostPattern, ...], host: str, port: int) -> str:
    """The one line a refused connection gets (the proxy's 403 body, the tool result's note)."""
    shown = f"[{host}]" if ":" in host else host
    if any(p.covers_host(host) for p in patterns):
        return f"gatewright: port {port} of {shown} is not in [sandbox] network"
    return f"gatewright: {shown} is not in [sandbox] network"


def loopback_named(patterns: tuple[HostPattern, ...]) -> bool:
    """Whether an entry names the loopback (`localhost`, `127.0.0.1`, `::1`): then those names go through the proxy,
    to the host's own services, instead of staying inside the command's network namespace."""
    for p in patterns:
        if p.wildcard:
            if p.host == "localhost":
                return True
            continue
        if p.host == "localhost" or p.host.endswith(".localhost"):
            return True
        try:
            if ipaddress.ip_address(p.host).is_loopback:
                return True
        except ValueError:
            pass
    return False
