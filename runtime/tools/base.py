"""Tools: what the model sees (`ToolRegistry`) apart from what runs (`ToolExecutor`).

A `Tool` describes itself (schema, ACP kind, title, locations, which paths it touches, its effect) and runs.
`RoutingToolExecutor` routes a validated call to its tool by name and refuses any name the session does not expose.
Governance (approval) wraps the executor, never the registry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import orjson

from permissions.confinement import Confinement
from runtime import lazy, secrets  # lazy: jsonschema, for the first schema beyond argcheck's part of JSON Schema
from runtime.tools import argcheck
from runtime.workspace import PathError, Workspace

if TYPE_CHECKING:
    from runtime.elicitation import UserAsker
    from runtime.events import EventSink
    from runtime.tracing import CallRecord

Effect = Literal["read", "write", "execute", "other"]
# The argument schemas ship inside the package (package data), so a wheel or `pipx install` finds them too.
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


def digest(value: Any) -> str:
    """A stable fingerprint of a value (a string as is, anything else as canonical JSON), for rule keys: a rule binds
    to the exact content, input or arguments without the rules file holding them."""
    data = (
        value.encode("utf-8", "surrogatepass")
        if isinstance(value, str)
        else orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)
    )
    return "sha256:" + hashlib.sha256(data).hexdigest()


class ToolFailure(Exception):
    """A tool failed in a way the model can act on. `error_type` is a stable short name."""

    def __init__(self, message: str, error_type: str = "ToolFailed") -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A normalised call: id always set, name trimmed, arguments parsed (an object) once validated."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str
    index: int = 0


@dataclass(frozen=True, slots=True)
class ToolResult:
    output: str  # what the model sees
    is_error: bool = False
    content: tuple[dict[str, Any], ...] = ()  # ACP ToolCallContent for the editor
    raw_output: Any = None
    locations: tuple[dict[str, Any], ...] | None = None
    title: str | None = None
    # A structured account of what happened inside the call (hits, steps, sub-calls): shown to the client and
    # stored with the result, never sent to the model.
    trace: Any = None


class StartedHook(Protocol):
    """Called once a call is past approval and about to run; `meta` says why it may run (the approval layer's
    decision, shown in the `in_progress` update's `_meta`), None when no approval layer decided it."""

    async def __call__(self, meta: dict[str, Any] | None) -> None: ...


class EditorBridge(Protocol):
    """The editor's own file system and terminals, when the client advertised them (else None in the context)."""

    can_read: bool
    can_write: bool
    can_terminal: bool

    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str: ...

    async def write_text_file(self, path: str, content: str) -> None: ...

    async def create_terminal(
        self, command: str, args: list[str], cwd: str, env: Mapping[str, str], output_byte_limit: int
    ) -> str:
        """Start `command` in an editor terminal; returns its id."""
        ...

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]: ...

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]: ...

    async def kill_terminal(self, terminal_id: str) -> None: ...

    async def release_terminal(self, terminal_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    session_id: str
    call_id: str
    workspace: Workspace
    grants: frozenset[str] = frozenset()
    editor: EditorBridge | None = None
    state: dict[str, Any] = field(default_factory=dict)
    progress: Callable[[ToolResult], Awaitable[None]] | None = None
    started: StartedHook | None = None
    env: Mapping[str, str] | None = None
    # The business operation this call performs: the same across automatic retries, so a service can deduplicate.
    operation_id: str = ""
    # The runtime's log of this one call (attempts); mutable on purpose, owned by this call only.
    record: CallRecord | None = None
    # Session-level events a tool may send besides its own progress (e.g. the plan).
    emit: EventSink | None = None
    # What the OS sandbox lets the processes this call starts do (set by the approval decorator from its decision).
    confinement: Confinement = field(default_factory=Confinement)
    # Why the approval layer let this call run (`_meta.gatewright` of its `in_progress` update); None before it.
    approval_meta: dict[str, Any] | None = None
    # Puts questions to the user (`runtime.elicitation`), when the host can; None otherwise.
    asker: UserAsker | None = None

    def approved(self, grants: frozenset[str], confinement: Confinement, meta: dict[str, Any]) -> ToolContext:
        """The context of a call the approval layer lets run (`permissions.decorator.ApprovalContext`)."""
        return replace(self, grants=self.grants | grants, confinement=confinement, approval_meta=meta)


class Tool:
    """Base class for tools. Subclasses set `name`, `description`, `kind` and implement `run`."""

    name: str = ""
    description: str = ""
    kind: str = "other"  # ACP ToolKind
    read_only_hint: bool = False
    # The processes this tool starts run under the OS sandbox (`runtime.sandbox`): reads it always allows (system
    # and toolchain locations) need no question.
    sandboxed: bool = False

    def starts_process(self, args: Mapping[str, Any]) -> bool:
        """Whether this call starts a process (which gets the network if it is not proven read-only)."""
        return False

    @functools.cached_property
    def schema(self) -> dict[str, Any]:
        return load_tool_schema(self.name)

    # A tool whose call touches the one file named by its `path` argument sets `path_effect` ("read" or "write"):
    # `effect` and `paths` then follow from it.
    path_effect: Effect | None = None

    def effect(self, args: Mapping[str, Any]) -> Effect:
        return self.path_effect or "other"

    def paths(self, args: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """The paths a call touches, as given, each with whether it writes."""
        p = args.get("path") if self.path_effect is not None else None
        return [(p, self.path_effect == "write")] if isinstance(p, str) else []

    def kind_for(self, args: Mapping[str, Any]) -> str:
        """The ACP kind of one call (a patch that only deletes is a `delete`); the class's `kind` by default."""
        return self.kind

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return self.name

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        """A short label for approval options, e.g. "`npm test`" or "writes to `src/a.py`"."""
        return f"`{self.name}` with these arguments"

    def rule_key(self, args: Mapping[str, Any], ws: Workspace) -> str:
        """The call's identity for remembered rules: everything that decides its effect. By default, where each path
        it touches resolves now and a digest of all its arguments (contents and patches stay out of the rules file).
        """
        where = []
        for p, _ in self.paths(args):
            try:
                where.append(ws.resolve(p).path)
            except PathError:
                where.append(str(p))
        return f"{self.name}:{','.join(where)}:{digest(args)}"

    def locations(self, args: Mapping[str, Any], ws: Workspace) -> list[dict[str, Any]]:
        out = []
        for p, _ in self.paths(args):
            try:
                out.append({"path": ws.resolve(p).path})
            except Exception:  # noqa: S112 - a bad path shows no location; validation reports it
                continue
        return out

    def analyse(self, args: Mapping[str, Any], ws: Workspace) -> tuple[bool, tuple[str, ...]]:
        """(proven read-only, reasons that force a question) from a deeper analysis, e.g. of a shell command."""
        return False, ()

    def unnamed_reads(self, args: Mapping[str, Any], ws: Workspace) -> list[str]:
        """Why the call may read a file that may hold secrets without naming it (a command's glob, a recursive search
        of a tree holding `.env`): each reason makes the call ask, as a named one would (`runtime.secret_files`)."""
        return []

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[dict[str, Any], ...]:
        """Content shown before the call runs (e.g. the diff of an edit, for the permission question)."""
        return ()

    async def precheck(self, args: Mapping[str, Any], ctx: ToolContext) -> None:
        """Refuse a call that cannot succeed before anyone is asked about it (e.g. a write over a file that changed
        since the model read it). Called by the approval describer before `preview`; `run` checks again.

        Raises:
            ToolFailure: the call is refused now, and the model is told why.
        """

    def check_arguments(self, args: Mapping[str, Any]) -> None:
        """Structural checks the JSON schema cannot express (e.g. a server-bound argument supplied by the model).

        Raises:
            ToolFailure: `InvalidArguments`.
        """

    def timeout_seconds(self, args: Mapping[str, Any]) -> float | None:
        """A tool's own time budget (e.g. bash `timeoutMs`); the per-call timeout is never shorter."""
        return None

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise NotImplementedError


@functools.cache
def load_tool_schema(name: str) -> dict[str, Any]:
    with open(SCHEMA_DIR / f"{name}.json", encoding="utf-8") as f:
        schema: dict[str, Any] = json.load(f)
    return schema


@functools.cache
def _validator(name: str, schema_json: str) -> Any:
    schema = json.loads(schema_json)
    if argcheck.supported(schema):  # every built-in tool's schema: no jsonschema (~25 ms to import) at all
        return argcheck.Checker(schema)
    cls = lazy.jsonschema.validators.validator_for(schema)
    return cls(schema)


def validate_arguments(tool: Tool, args: dict[str, Any]) -> None:
    """Check arguments against the tool's JSON schema (unknown fields rejected).

    Raises:
        ToolFailure: `InvalidArguments`, with a message naming the field.
    """
    schema = tool.schema
    validator = _validator(tool.name, json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path)
        msg = err.message if len(err.message) < 300 else err.message[:300] + "…"
        raise ToolFailure(f"{tool.name}: {msg}" + (f" (at {where})" if where else ""), "InvalidArguments")
    tool.check_arguments(args)


class ToolRegistry:
    """What the model sees. Only exposed tools can run (the executor checks with `is_exposed`)."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools or []:
            self.add(t)

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def is_exposed(self, name: str) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool]:
        return list(self._tools.values())


class ToolExecutor(Protocol):
    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult: ...


class RoutingToolExecutor:
    """Routes a call to the tool of that name, if and only if the registry exposes it."""

    def __init__(self, registry: ToolRegistry, timeout_seconds: float = 600.0) -> None:
        self.registry = registry
        self.timeout_seconds = timeout_seconds

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = self.registry.get(call.name)
        if tool is None:
            raise ToolFailure(f"tool {call.name!r} is not available in this session", "ToolNotFound")
        if ctx.started is not None:
            await ctx.started(ctx.approval_meta)
        own = tool.timeout_seconds(call.arguments)
        budget = max(self.timeout_seconds, own + 5) if own else self.timeout_seconds
        try:
            with anyio.fail_after(budget):
                return await tool.run(call.arguments, ctx)
        except TimeoutError:
            raise ToolFailure(f"{call.name} did not finish within {budget:g} s and was stopped", "Timeout") from None


CALL_SCRATCH = "call_scratch"


def call_scratch(ctx: ToolContext) -> dict[Any, Any]:
    """A dict private to one tool call, kept in the session's tool state between describing the call (for the
    approval question) and running it, so a tool can reuse what it read for the preview instead of reading again."""
    calls: dict[str, dict[Any, Any]] = ctx.state.setdefault(CALL_SCRATCH, {})
    return calls.setdefault(ctx.call_id, {})


def clear_call_scratch(state: dict[str, Any], call_id: str) -> None:
    """Forget what a call kept: at each new description of it (what is shown must be read afresh) and once it ends."""
    calls = state.get(CALL_SCRATCH)
    if calls:
        calls.pop(call_id, None)


def cap_output(text: str, limit: int) -> str:
    """Keep the head and tail of an over-long tool output with a visible marker between them."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters truncated: output exceeded {limit} characters ...]\n{text[-tail:]}"


# Characters a terminal or an editor would not show as themselves: C0/C1 controls (an escape sequence can erase the
# line a question is printed on), zero-width characters and bidirectional overrides (text that reads backwards).
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def visible(text: str) -> str:
    """`text` with every character that would not show as itself written as an escape (`\\x1b`, `\\u202e`)."""
    return _INVISIBLE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def content_text(block: Any) -> str | None:
    """The text of a tool-call content block of the `content` kind (`{"type": "content", "content": {"type":
    "text", ...}}`), else None: what a terminal host prints of a question besides its diffs."""
    if not isinstance(block, dict) or block.get("type") != "content":
        return None
    inner = block.get("content")
    if isinstance(inner, dict) and inner.get("type") == "text" and isinstance(inner.get("text"), str):
        return str(inner["text"])
    return None


def display_path(ws: Workspace, path: str) -> str:
    try:
        return ws.display(ws.resolve(path).path)
    except Exception:
        return path


def environ_without_secrets(extra_secret_names: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment for child processes: every secret the agent knows of removed (see `runtime.secrets`)."""
    return secrets.child_environ(extra_names=extra_secret_names)
