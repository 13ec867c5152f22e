"""The process-wide registry of secrets: which environment variables hold one (names) and the secrets themselves
(values), and the two things done with them: children never inherit them, sinks never write them.

Registered, always before any child process can be started:
- at start-up (`ModelFactory`, when the config is loaded): every provider's `api_key_env` (configured providers and
  the built-in `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`), with the value each one holds, and provider `headers` values;
- at first use: this process's variables whose name looks secret (`API_KEY`, `TOKEN`, … anywhere in the name);
- at `session/new` / `load` / `resume`: the `env` and `headers` values of the session's MCP servers (and credentials
  in their URLs), before the servers start;
- at `authenticate`: every string of the payload beyond the method id.
Nothing is ever forgotten: a log line written after a session closed is scrubbed too.

Children (`child_environ`): no `GATEWRIGHT_*` variable, no secret-looking or registered name, and no variable whose
value holds a registered value (the same key under another name). An MCP stdio server gets that plus its own `env`,
never another server's. An editor terminal runs in the editor's environment, which we cannot trim: its env blanks
every secret name we know (`blank_secret_names`).

Sinks redact values, and every run of 12 or more consecutive characters of a value (`permissions.redaction.
SecretMatcher`; `redact_text`, `redact` for JSON-like objects, `json_has_secret` as the cheap check first):
tool results before the model or the editor sees them (runtime.loop), every frame but streamed text chunks on the
wire (acp_server.rpc), the `--record` transcript, the session store, the audit log, and every log record
(`install_log_filter`). Values shorter than `MIN_VALUE_LEN` are not registered: "true" or "1" would shred every
line and protect nothing; nor are values that name existing absolute paths (`names_paths`).

Streamed text chunks are not redacted on the wire: every tool result reaches the model redacted, so it can echo
only a form of a value redaction cannot recognise (a transform, pieces shorter than a run: reading a file that may
hold one asks first, see docs/secrets.md); a real provider streams a key across several chunks, which a per-chunk
check cannot see, while the check would double the cost of the hot path (measured with whole values: 0.2-0.4 µs per
chunk with 3-10 values registered, against 0.33 µs for the whole `AcpSession.emit` of a chunk). The journal writes a
message's chunks joined, so the store redacts them; the transcript redacts each chunk's frame.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from permissions.redaction import SecretMatcher, add_secret_source

REDACTED = "<redacted>"
MIN_VALUE_LEN = 8
# A variable whose name holds one of these is a secret even if nobody registered it.
NAME_MARKERS = ("API_KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY")
# The agent's own settings are no business of a child (and GATEWRIGHT_CONFIG names where the keys are described).
OWN_PREFIX = "GATEWRIGHT_"
# Header values under these names are protocol details, not credentials.
PLAIN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "content-type",
        "user-agent",
        "referer",
        "http-referer",
        "x-title",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
    }
)


def secret_looking(name: str) -> bool:
    upper = name.upper()
    return any(m in upper for m in NAME_MARKERS)


def names_paths(value: str) -> bool:
    """Whether a value is existing absolute paths (`/opt/tool`, a `PATH`-like list): configuration, not a secret, and
    redacting it would blank a path in every tool result (`AWS_SHARED_CREDENTIALS_FILE` names a file)."""
    parts = [p for p in value.split(os.pathsep) if p]
    return bool(parts) and all(os.path.isabs(p) and os.path.exists(p) for p in parts)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What readers use, replaced whole on every registration (readers never lock)."""

    names: frozenset[str] = frozenset()
    values: tuple[str, ...] = ()  # longest first: a secret containing another is replaced whole
    value_set: frozenset[str] = frozenset()
    matcher: SecretMatcher = SecretMatcher(())  # each value, and every run of RUN of its characters
    in_json: SecretMatcher = SecretMatcher(())  # the same, of each value as it appears inside a JSON string
    labelled: tuple[tuple[bytes, str], ...] = ()  # each value as a file holds it (UTF-8), and where it came from


def _file_bytes(value: str) -> bytes:
    """A value as a file holds it: an environment value's undecodable bytes as they were."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def _json_form(value: str) -> str:
    return orjson.dumps(value).decode()[1:-1]


class SecretRegistry:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ  # this process's environment
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self._values: dict[str, str] = {}  # value -> where it came from (the first registration's label)
        self._environment_read = False
        self.snapshot = _Snapshot()

    # ---- registering ---------------------------------------------------------------------------------------------
    def register_names(self, names: Iterable[str], environ: Mapping[str, str] | None = None) -> None:
        """Variables that hold secrets: stripped from children; the value each holds now is registered too."""
        env = self._environ if environ is None else environ
        names = [n for n in names if n]
        self._update(names, [(v, n) for n in names if len(v := env.get(n) or "") >= MIN_VALUE_LEN])

    def register_values(
        self, values: Iterable[str], min_len: int = MIN_VALUE_LEN, label: str = "a configured secret"
    ) -> None:
        """Secret values; `label` says where they come from, in a question about a file holding one."""
        self.register_labelled(((v, label) for v in values), min_len)

    def register_environment(self, environ: Mapping[str, str] | None = None) -> None:
        """This process's secret-looking variables (provider keys set for us, tokens), names and values."""
        env = self._environ if environ is None else environ
        names = [k for k in env if secret_looking(k)]
        self._update(names, [(env[k], k) for k in names if len(env[k]) >= MIN_VALUE_LEN])

    def register_labelled(self, pairs: Iterable[tuple[str, str]], min_len: int = MIN_VALUE_LEN) -> None:
        """Secret values, each with where it comes from: (value, label)."""
        self._update((), [(v, label) for v, label in pairs if isinstance(v, str) and len(v) >= min_len])

    def register_headers(self, headers: Iterable[tuple[str, str]], min_len: int = MIN_VALUE_LEN) -> None:
        self.register_labelled(((v, f"the {k} header") for k, v in headers if k.lower() not in PLAIN_HEADERS), min_len)

    def register_payload(self, payload: Any, skip: frozenset[str] = frozenset()) -> None:
        """Every string in a JSON-like payload (an `authenticate` request), except under the keys in `skip`."""
        found: list[str] = []

        def walk(v: Any) -> None:
            if isinstance(v, str):
                found.append(v)
            elif isinstance(v, dict):
                for k, x in v.items():
                    if k not in skip:
                        walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)

        walk(payload)
        self.register_values(found, label="the authenticate payload")

    def _update(self, names: Iterable[str], values: Iterable[tuple[str, str]]) -> None:
        """Add secret variable names and (value, label) pairs."""
        with self._lock:
            first = not self._environment_read
            if first:
                # The first use also reads the environment, so no reader ever sees a registry without it.
                env_names = [k for k in self._environ if secret_looking(k)]
                names = [*names, *env_names]
                values = [*values, *((v, k) for k in env_names if len(v := self._environ[k]) >= MIN_VALUE_LEN)]
            new_names = set(names) - self._names
            new_values: dict[str, str] = {}
            for v, label in values:
                if v and v not in self._values and v not in new_values and not names_paths(v):
                    new_values[v] = label
            if new_names or new_values or first:
                self._names |= new_names
                self._values = {**new_values, **self._values}
                ordered = tuple(sorted(self._values, key=len, reverse=True))
                self.snapshot = _Snapshot(
                    frozenset(self._names),
                    ordered,
                    frozenset(ordered),
                    SecretMatcher(ordered),
                    SecretMatcher(_json_form(v) for v in ordered),
                    tuple((_file_bytes(v), self._values[v]) for v in ordered),
                )
            self._environment_read = True  # only now: a reader that sees it also sees the snapshot
        install_log_filter()

    def _current(self) -> _Snapshot:
        if not self._environment_read:
            self._update((), ())
        return self.snapshot

    # ---- reading -------------------------------------------------------------------------------------------------
    def names(self) -> frozenset[str]:
        return self._current().names

    def values(self) -> tuple[str, ...]:
        return self._current().values

    def labelled(self) -> tuple[tuple[bytes, str], ...]:
        """Each value encoded as a file would hold it, longest first, with where it came from (a variable's name,
        `the X header`, `a configured secret`)."""
        return self._current().labelled

    def is_secret_name(self, name: str) -> bool:
        return name in self._current().names or secret_looking(name)

    # ---- children ------------------------------------------------------------------------------------------------
    def child_environ(
        self, environ: Mapping[str, str] | None = None, extra_names: Iterable[str] = ()
    ) -> dict[str, str]:
        """The environment a child process gets: `environ` (default: ours) without any secret."""
        snap = self._current()
        env = self._environ if environ is None else environ
        extra = set(extra_names)
        out: dict[str, str] = {}
        for k, v in env.items():
            if k.startswith(OWN_PREFIX) or k in snap.names or k in extra or secret_looking(k):
                continue
            if v in snap.value_set or (snap.values and any(s in v for s in snap.values)):
                continue  # a registered value under another name (or inside one, e.g. a URL with the key)
            out[k] = v
        return out

    def blank_secret_names(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` for a process started in someone else's environment (an editor terminal): every secret variable we
        know of is set to the empty string, so the editor's own copy of it does not reach the command."""
        snap = self._current()
        blank = {k for k in self._environ if k.startswith(OWN_PREFIX) or secret_looking(k)}
        return {**env, **dict.fromkeys(sorted(blank | snap.names), "")}

    # ---- sinks ---------------------------------------------------------------------------------------------------
    def redact_text(self, text: str) -> str:
        """`text` with every registered value, and every run of `RUN` or more of a value's characters, replaced."""
        return self._current().matcher.redact(text)

    def has_secret(self, text: str) -> bool:
        return self._current().matcher.found(text)

    def json_has_secret(self, data: str | bytes) -> bool:
        """Whether encoded JSON holds a registered value (or a run of one) inside one of its strings (the cheap check
        before `redact`)."""
        return self._current().in_json.found(data)

    def redact(self, obj: Any) -> Any:
        """A JSON-like object with every registered value (and run of one) replaced in its strings (keys too); the
        object itself when nothing had to change."""
        snap = self._current()
        if not snap.values:
            return obj
        try:  # one scan of the whole object first: most have nothing to redact
            if not snap.in_json.found(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)):
                return obj
        except (TypeError, orjson.JSONEncodeError):
            pass
        return _redact(obj, snap.matcher)


def _redact(obj: Any, matcher: SecretMatcher) -> Any:
    if isinstance(obj, str):
        return matcher.redact(obj)
    if isinstance(obj, dict):
        return {(_redact(k, matcher) if isinstance(k, str) else k): _redact(v, matcher) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_redact(v, matcher) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_redact(v, matcher) for v in obj)
    return obj


REGISTRY = SecretRegistry()

register_names = REGISTRY.register_names
register_values = REGISTRY.register_values
register_labelled = REGISTRY.register_labelled
register_environment = REGISTRY.register_environment
register_headers = REGISTRY.register_headers
register_payload = REGISTRY.register_payload
child_environ = REGISTRY.child_environ
blank_secret_names = REGISTRY.blank_secret_names
redact_text = REGISTRY.redact_text
redact = REGISTRY.redact
has_secret = REGISTRY.has_secret
json_has_secret = REGISTRY.json_has_secret
secret_values = REGISTRY.values
secret_names = REGISTRY.names
# What `permissions` writes (audit rows, rule labels) is redacted of these too: it cannot import this module.
add_secret_source(REGISTRY.values)


def redacted_json(obj: Any) -> bytes:
    """`orjson.dumps(obj)` with registered values redacted (encoded once when there is nothing to redact)."""
    data = orjson.dumps(obj)
    if REGISTRY.json_has_secret(data):
        data = orjson.dumps(REGISTRY.redact(obj))
    return data


# ---- log records -------------------------------------------------------------------------------------------------
class SecretLogFilter(logging.Filter):
    """Replaces registered values in a record's message and traceback before any handler formats it (our own
    messages and third-party ones: the MCP SDK and HTTP clients log URLs and exceptions)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not REGISTRY.snapshot.values:
            return True
        try:
            message = record.getMessage()
        except Exception:
            return True
        record.msg = REGISTRY.redact_text(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = REGISTRY.redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = REGISTRY.redact_text(record.stack_info)
        return True


LOG_FILTER = SecretLogFilter()


def install_log_filter() -> None:
    """Attach the filter to the root logger's handlers (idempotent; run at logging set-up and at every registration,
    so handlers added later are covered too)."""
    for handler in logging.getLogger().handlers:
        if LOG_FILTER not in handler.filters:
            handler.addFilter(LOG_FILTER)
