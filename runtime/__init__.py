"""The agent, host-neutral: the turn loop, the tools, the model clients, the session store, the composition root.

This is the runtime's public API: hosts (`acp_server`, the terminal hosts) import these names from `runtime`, not from
the modules that define them (besides the few modules that are an API of their own: `runtime.secrets`,
`runtime.commands`, `runtime.config`, `runtime.sandbox`, `runtime.elicitation`, `runtime.recording` (the transcript
format both hosts record), `runtime.version`). The names, and the submodules a host defers (`runtime.sandbox`,
`runtime.recording`), are loaded on first use (`permissions.lazy`, the one deferral mechanism): `gatewright acp`
imports this package on the way to answering `initialize`, which must not pay for the event loop, the tools or SQLite
(tests/acp_server/test_startup_path.py holds that). Heavy libraries are deferred by `runtime.lazy`.
"""

from __future__ import annotations

from permissions.lazy import deferred

# typing.TYPE_CHECKING without importing typing: the sandbox helper (`python -S`) imports this package, and typing
# would be ~10 ms of its start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from runtime import recording as recording
    from runtime import sandbox as sandbox
    from runtime.assembly import SessionRuntime, build_runtime
    from runtime.chat.app import run_chat
    from runtime.cli_host import missing_key, run_prompt
    from runtime.context import look_early
    from runtime.events import (
        CompactionEvent,
        EventSink,
        NoticeEvent,
        PlanUpdated,
        RuntimeEvent,
        TextChunk,
        ThoughtChunk,
        ToolCallProgress,
        ToolCallStarted,
        UsageReported,
    )
    from runtime.loop import MODEL_FAILED, AgentRuntime, AuthRequired, RuntimeOptions, ToolEnvironment, TurnOutcome
    from runtime.mcp import close_servers, connect_servers
    from runtime.models import NO_MODEL_MESSAGE, ModelFactory, parse_model_spec
    from runtime.models.base import ImagePart, Message, ModelClient, TextPart, Usage, UserPart
    from runtime.models.scripted import ScriptError
    from runtime.processes import close_session as close_session_processes
    from runtime.processes import kill_all_process_groups
    from runtime.session import PromptPlan, Session, new_session_id, plan_prompt
    from runtime.signin import run_setup
    from runtime.store import CursorError, SessionRecord, SessionStore
    from runtime.store.live import open_store, replay_records, revive, store_new
    from runtime.tools.base import EditorBridge, Tool, ToolExecutor, ToolRegistry
    from runtime.tools.builtin import builtin_tools
    from runtime.tools.builtin.textio import EditorError
    from runtime.updates import NOTICE_META, asked_tool_call, event_to_update, info_update, pending_tool_call
    from runtime.workspace import Workspace

_EXPORTS: dict[str, tuple[str, str]] = {
    # the composition root
    "SessionRuntime": ("runtime.assembly", "SessionRuntime"),
    "build_runtime": ("runtime.assembly", "build_runtime"),
    # the turn and its events
    "AgentRuntime": ("runtime.loop", "AgentRuntime"),
    "AuthRequired": ("runtime.loop", "AuthRequired"),
    "MODEL_FAILED": ("runtime.loop", "MODEL_FAILED"),
    "RuntimeOptions": ("runtime.loop", "RuntimeOptions"),
    "ToolEnvironment": ("runtime.loop", "ToolEnvironment"),
    "TurnOutcome": ("runtime.loop", "TurnOutcome"),
    "CompactionEvent": ("runtime.events", "CompactionEvent"),
    "EventSink": ("runtime.events", "EventSink"),
    "NoticeEvent": ("runtime.events", "NoticeEvent"),
    "PlanUpdated": ("runtime.events", "PlanUpdated"),
    "RuntimeEvent": ("runtime.events", "RuntimeEvent"),
    "TextChunk": ("runtime.events", "TextChunk"),
    "ThoughtChunk": ("runtime.events", "ThoughtChunk"),
    "ToolCallProgress": ("runtime.events", "ToolCallProgress"),
    "ToolCallStarted": ("runtime.events", "ToolCallStarted"),
    "UsageReported": ("runtime.events", "UsageReported"),
    # models
    "NO_MODEL_MESSAGE": ("runtime.models", "NO_MODEL_MESSAGE"),
    "ModelFactory": ("runtime.models", "ModelFactory"),
    "parse_model_spec": ("runtime.models", "parse_model_spec"),
    "ImagePart": ("runtime.models.base", "ImagePart"),
    "Message": ("runtime.models.base", "Message"),
    "ModelClient": ("runtime.models.base", "ModelClient"),
    "TextPart": ("runtime.models.base", "TextPart"),
    "Usage": ("runtime.models.base", "Usage"),
    "UserPart": ("runtime.models.base", "UserPart"),
    # tools, workspace, processes
    "EditorBridge": ("runtime.tools.base", "EditorBridge"),
    "Tool": ("runtime.tools.base", "Tool"),
    "ToolExecutor": ("runtime.tools.base", "ToolExecutor"),
    "ToolRegistry": ("runtime.tools.base", "ToolRegistry"),
    "Workspace": ("runtime.workspace", "Workspace"),
    "close_session_processes": ("runtime.processes", "close_session"),
    "kill_all_process_groups": ("runtime.processes", "kill_all_process_groups"),
    # sessions: the host-neutral session, what a prompt does before the model, the records hosts show and store
    "PromptPlan": ("runtime.session", "PromptPlan"),
    "Session": ("runtime.session", "Session"),
    "new_session_id": ("runtime.session", "new_session_id"),
    "look_early": ("runtime.context", "look_early"),
    "plan_prompt": ("runtime.session", "plan_prompt"),
    "NOTICE_META": ("runtime.updates", "NOTICE_META"),
    "asked_tool_call": ("runtime.updates", "asked_tool_call"),
    "event_to_update": ("runtime.updates", "event_to_update"),
    "info_update": ("runtime.updates", "info_update"),
    "pending_tool_call": ("runtime.updates", "pending_tool_call"),
    # the session store
    "CursorError": ("runtime.store", "CursorError"),
    "SessionRecord": ("runtime.store", "SessionRecord"),
    "SessionStore": ("runtime.store", "SessionStore"),
    "open_store": ("runtime.store.live", "open_store"),
    "replay_records": ("runtime.store.live", "replay_records"),
    "revive": ("runtime.store.live", "revive"),
    "store_new": ("runtime.store.live", "store_new"),
    # MCP servers of a session
    "close_servers": ("runtime.mcp", "close_servers"),
    "connect_servers": ("runtime.mcp", "connect_servers"),
    # errors a host reports
    "EditorError": ("runtime.tools.builtin.textio", "EditorError"),
    "ScriptError": ("runtime.models.scripted", "ScriptError"),
    # the built-in tools (a host warms them up), the terminal hosts
    "builtin_tools": ("runtime.tools.builtin", "builtin_tools"),
    "run_chat": ("runtime.chat.app", "run_chat"),
    "missing_key": ("runtime.cli_host", "missing_key"),
    "run_prompt": ("runtime.cli_host", "run_prompt"),
    "run_setup": ("runtime.signin", "run_setup"),
}

# A literal list, so that tools see the re-exports (tests/runtime/test_runtime_api.py checks it matches _EXPORTS).
__all__ = [
    "AgentRuntime",
    "AuthRequired",
    "CompactionEvent",
    "CursorError",
    "EditorBridge",
    "EditorError",
    "EventSink",
    "ImagePart",
    "MODEL_FAILED",
    "Message",
    "ModelClient",
    "ModelFactory",
    "NOTICE_META",
    "NO_MODEL_MESSAGE",
    "NoticeEvent",
    "PlanUpdated",
    "PromptPlan",
    "RuntimeEvent",
    "RuntimeOptions",
    "ScriptError",
    "Session",
    "SessionRecord",
    "SessionRuntime",
    "SessionStore",
    "TextChunk",
    "TextPart",
    "ThoughtChunk",
    "Tool",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolEnvironment",
    "ToolExecutor",
    "ToolRegistry",
    "TurnOutcome",
    "Usage",
    "UsageReported",
    "UserPart",
    "Workspace",
    "asked_tool_call",
    "build_runtime",
    "builtin_tools",
    "close_servers",
    "close_session_processes",
    "connect_servers",
    "event_to_update",
    "info_update",
    "kill_all_process_groups",
    "look_early",
    "missing_key",
    "new_session_id",
    "open_store",
    "parse_model_spec",
    "pending_tool_call",
    "plan_prompt",
    "replay_records",
    "revive",
    "run_chat",
    "run_prompt",
    "run_setup",
    "store_new",
]


# Submodules loaded on first use by the hosts that defer them (not re-exported names).
_SUBMODULES = ("recording", "sandbox")

_LAZY: dict[str, str | tuple[str, str]] = {**_EXPORTS, **{name: f"runtime.{name}" for name in _SUBMODULES}}

if not TYPE_CHECKING:
    __getattr__ = deferred(globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
