"""The requirements manifest: every MUST of ACP v1 and JSON-RPC 2.0 that applies to an agent, plus our own reliability
and security rules, each with a stable id, its source, and the tests that prove it. Known gaps are data too.

Ids: `jsonrpc:…` (JSON-RPC 2.0, https://www.jsonrpc.org/specification), `acp:…` (ACP v1 — prose at
https://agentclientprotocol.com/protocol/*, schema `schemas/acp/schema.json`; the requirement ids of the official
conformance kit, https://github.com/agentclientprotocol/acp-tck, as `TCK ACP-…` where one exists), `gw:…` (our rules:
docs/rules.md R1–R8 and T1–T16, the CLI's behaviour in docs/configuration.md, the transcript format in
docs/transcripts.md). Ids are stable: rename never, retire by moving to `RETIRED`.

A test proves a requirement either by carrying `@pytest.mark.req("<id>", …)` or by being listed in `tests` below as
`folder/file.py::test_name`, its path under tests/ (for tests in files whose owners have not marked them).
tests/test_requirements_manifest.py enforces both directions: every requirement has at least one existing test; every id
a test names exists here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Requirement:
    id: str
    source: str
    text: str
    tests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Gap:
    """A requirement we knowingly do not meet (or a feature not offered). `capability` is the `initialize` result
    path that must stay unadvertised while the gap stands; the manifest test checks it."""

    id: str
    source: str
    text: str
    reason: str
    capability: tuple[str, ...] | None = None


R = Requirement
PR = "e2e/test_protocol_raw.py::"
PM = "acp_server/test_protocol_methods.py::"
CT = "e2e/test_chat_terminal.py::"
E2E = "e2e/test_e2e_sdk.py::"
SS = "e2e/test_sessions_sdk.py::"

REQUIREMENTS: tuple[Requirement, ...] = (
    # ---- JSON-RPC 2.0 ---------------------------------------------------------------------------------------------
    R(
        "jsonrpc:parse-error:null-id",
        "JSON-RPC 2.0 §5.1; ACP schema ErrorCode",
        "A line that is not valid JSON gets -32700 with id null, and the connection keeps reading.",
        (
            PM + "test_unparseable_line_gets_parse_error_with_null_id_and_the_connection_lives_on",
            "acp_server/test_wire.py::test_malformed_frames_become_typed_errors",
        ),
    ),
    R(
        "jsonrpc:invalid-request:not-a-request-object",
        "JSON-RPC 2.0 §5.1, §6",
        "Valid JSON that is not a Request object (a scalar, an array, wrong jsonrpc, non-string method, params not "
        "structured, an id of the wrong type) gets -32600, id null unless one could be read.",
        (PM + "test_valid_json_that_is_not_a_request_object_gets_invalid_request",),
    ),
    R(
        "jsonrpc:request-id:bool-is-invalid",
        "JSON-RPC 2.0 §4 (id: String, Number or Null); rules R1",
        "A boolean id is invalid and never aliases integer 1.",
        (
            PM + "test_boolean_ids_are_invalid_and_never_confused_with_integer_ids",
            "acp_server/test_rpc_connection.py::test_a_cancel_for_integer_1_does_not_cancel_string_1",
        ),
    ),
    R(
        "jsonrpc:response:id-echoed-with-its-type",
        "JSON-RPC 2.0 §5 (id MUST be the same as the request's)",
        'A response carries the request\'s id with its JSON type (1 and "1" differ); a null id is answered null.',
        (
            PM + "test_ids_are_echoed_with_their_type",
            "acp_server/test_wire.py::test_correlation_keys_keep_int_and_string_ids_apart",
        ),
    ),
    R(
        "jsonrpc:response:exactly-one-per-request",
        "JSON-RPC 2.0 §5 (the Server MUST reply with a Response)",
        "Every request gets exactly one response with exactly one of result/error — duplicate ids included.",
        (PM + "test_duplicate_request_ids_are_each_answered_once",),
    ),
    R(
        "jsonrpc:notification:never-answered",
        "JSON-RPC 2.0 §4.1 (the Server MUST NOT reply to a Notification)",
        "Notifications — unknown, malformed or failing — never get a response.",
        (
            PM + "test_notifications_are_never_answered_even_unknown_or_malformed_ones",
            "acp_server/test_rpc_connection.py::test_failing_notification_handlers_are_never_answered",
        ),
    ),
    R(
        "jsonrpc:method-not-found",
        "JSON-RPC 2.0 §5.1; ACP extensibility (TCK ACP-EXT-001, ACP-JSONRPC-004)",
        "An unknown method, including an unknown `_` extension request, gets -32601.",
        (PM + "test_unknown_methods_including_extensions_get_method_not_found",),
    ),
    R(
        "jsonrpc:invalid-params:typed-error",
        "JSON-RPC 2.0 §5.1; rules R2",
        "Params that do not fit get -32602 with our own one-line message, never validator text.",
        (PM + "test_bad_params_get_invalid_params_without_validator_text",),
    ),
    R(
        "jsonrpc:internal-error:opaque",
        "JSON-RPC 2.0 §5.1; rules R2",
        "A handler crash gets -32603 with an opaque message and a correlation id; no exception text on the wire.",
        (
            "acp_server/test_rpc_connection.py::test_a_crashing_handler_gets_an_opaque_internal_error_with_a_correlation_id",
        ),
    ),
    # ---- ACP transport and schema ---------------------------------------------------------------------------------
    R(
        "acp:transport:stdout-only-acp-frames",
        "ACP transports (MUST NOT write anything that is not a valid ACP message); rules R4",
        "stdout carries only newline-delimited ACP frames; logs go to stderr.",
        (PR + "test_every_stdout_line_is_a_frame_and_stderr_carries_logs",),
    ),
    R(
        "acp:transport:no-embedded-newlines",
        "ACP transports (messages MUST NOT contain embedded newlines)",
        "Each frame is one line.",
        ("acp_server/test_wire.py::test_encoded_frames_are_one_line",),
    ),
    R(
        "acp:transport:exit-on-stdin-eof",
        "ACP transports; TCK ACP-SHUTDOWN-001; rules R5",
        "On stdin EOF the agent exits 0 promptly, whatever is running.",
        (
            PR + "test_stdin_eof_exits_0_within_two_seconds",
            PR + "test_stdin_eof_during_a_running_turn_and_a_pending_permission_exits_promptly",
        ),
    ),
    R(
        "acp:schema:every-agent-frame-valid",
        "TCK ACP-SCHEMA-001; schemas/acp/schema.json",
        "Every frame the agent emits validates against the official schema (the test harness checks every frame).",
        ("acp_server/test_transcripts.py::test_every_recorded_frame_is_valid_under_the_schema",),
    ),
    # ---- initialize, capabilities ---------------------------------------------------------------------------------
    R(
        "acp:init:version-negotiation",
        "ACP initialization (answer the client's version if supported, else our latest); TCK ACP-INIT-003",
        "A v1 agent answers protocolVersion 1 to any client version, never an echo.",
        (PR + "test_initialize_answers_version_1_to_any_client_version_and_advertises_agent_info",),
    ),
    R(
        "acp:clientcap:never-call-unadvertised-methods",
        "ACP initialization (omitted capabilities MUST be treated as "
        "unsupported); TCK ACP-CLIENTCAP-001..003; rules T16",
        "The agent never calls fs/*, terminal/* or elicitation methods the client did not advertise.",
        ("acp_server/test_tools_editor.py::test_a_bridge_exists_only_for_capabilities_the_client_advertised",),
    ),
    R(
        "acp:config:boolean-only-if-advertised",
        "ACP session config options; TCK ACP-CONFIG-003",
        "No boolean config option is sent unless the client advertised session.configOptions.boolean.",
        (),
    ),
    R(
        "acp:config:set-returns-the-full-list",
        "ACP session config options; TCK ACP-CONFIG-002",
        "session/set_config_option answers with the complete list of options.",
        (E2E + "test_modes_switch_through_set_mode_and_config_options",),
    ),
    # ---- elicitation ----------------------------------------------------------------------------------------------
    R(
        "acp:elicitation:form-and-url",
        "ACP elicitation (stable since schema 1.21.0); MCP elicitation",
        "Questions to the user (an MCP server's during its tool call, the model's ask_user) go out as session-scoped "
        "elicitation/create tied to the tool call, forms checked against what ACP forms hold, URLs as url mode with "
        "elicitation/complete; the user's accept/decline/cancel comes back as is, and the MCP server is told exactly "
        "the modes the editor shows.",
        (),
    ),
    R(
        "acp:elicitation:only-if-advertised",
        "ACP initialization (capabilities), elicitation (modes are advertised by a non-null form/url object)",
        "No elicitation/create for a mode the client did not advertise; without "
        "form support an MCP server's question is declined at once (and said), and ask_user is not offered.",
        (),
    ),
    R(
        "acp:elicitation:cancelled-with-the-turn",
        "ACP prompt turn (cancellation), $/cancel_request",
        "session/cancel withdraws every open question with $/cancel_request and answers the MCP server cancel; a "
        "question still open when its MCP tool call ends is withdrawn the same way.",
        (),
    ),
    # ---- sessions -------------------------------------------------------------------------------------------------
    R(
        "acp:session:new-ids-are-unique",
        "ACP session setup; TCK ACP-SESSION-002",
        "Two session/new calls give different session ids.",
        (PM + "test_session_ids_are_unique",),
    ),
    R(
        "acp:session:cwd-is-the-session-root",
        "ACP session setup (cwd MUST be used as the session root)",
        "Each session works in its own cwd, wherever the process was started.",
        (E2E + "test_two_sessions_have_separate_working_directories_and_approvals",),
    ),
    R(
        "acp:session:unknown-id-keeps-connection-usable",
        "ACP schema ErrorCode; TCK ACP-JSONRPC-005",
        "An unknown session id gets a typed error and the connection stays usable.",
        (PM + "test_unknown_session_ids_get_a_clear_error_and_the_connection_stays_usable",),
    ),
    R(
        "acp:session:load-replays-before-the-answer",
        "ACP session/load; TCK ACP-LOAD-002",
        "session/load replays the whole conversation as updates before its response, none after.",
        (SS + "test_a_session_loaded_in_a_new_process_replays_everything_before_the_answer_and_continues",),
    ),
    R(
        "acp:session:resume-close-delete-list",
        "ACP session/resume, close, delete, list",
        "resume does not replay; close cancels and frees; delete removes from list (unknown ids succeed); list with "
        "no match is an empty list.",
        (SS + "test_resume_fork_close_and_delete_through_the_sdk", SS + "test_close_cancels_the_running_prompt"),
    ),
    R(
        "acp:session:capabilities-match-what-works",
        "ACP initialization (capabilities advertise what is supported)",
        "The session capabilities advertised are exactly the session methods that work.",
        (SS + "test_capabilities_advertise_exactly_the_session_methods_that_work",),
    ),
    # ---- prompt turn -----------------------------------------------------------------------------------------------
    R(
        "acp:prompt:baseline-content",
        "ACP content (agents MUST support text and resource_link in prompts)",
        "text and resource_link blocks (and embedded resources, advertised) reach the model.",
        (E2E + "test_resource_links_and_embedded_resources_reach_the_model_as_text",),
    ),
    R(
        "acp:prompt:updates-carry-the-prompted-session-id",
        "ACP prompt turn; TCK ACP-PROMPT-002",
        "Every session/update of a turn carries that prompt's sessionId, even with many sessions at once.",
        (),
    ),
    R(
        "acp:prompt:answered-with-a-stop-reason",
        "ACP prompt turn (the agent MUST respond with a StopReason)",
        "Every prompt is answered with a stopReason result.",
        (E2E + "test_a_turn_streams_thoughts_tool_calls_with_diffs_and_text_through_an_approval",),
    ),
    R(
        "acp:paths:absolute",
        "ACP overview (all file paths MUST be absolute)",
        "Paths the agent sends (locations, diffs, fs requests) are absolute.",
        (),
    ),
    R(
        "acp:tool-call:ids-unique-per-session",
        "ACP tool calls (toolCallId unique within the session)",
        "Tool call ids are unique within a session, even when the model sends none or repeats one.",
        ("runtime/test_runtime_loop.py::test_missing_call_ids_become_tool_step_ids",),
    ),
    R(
        "acp:plan:complete-list",
        "ACP agent plan (always send the complete list; the client replaces the plan)",
        "Every plan update carries the whole plan.",
        (
            "runtime/test_plan.py::test_each_update_sends_the_complete_plan_and_the_runtime_keeps_the_last",
            "runtime/test_plan.py::test_plan_frames_on_the_wire_are_schema_valid_and_complete",
        ),
    ),
    R(
        "acp:mcp:stdio-and-http-servers",
        "ACP session setup (every agent MUST support stdio MCP servers; http when advertised)",
        "MCP servers from session/new are connected and their tools governed by the same approvals.",
        (
            "e2e/test_mcp_e2e.py::test_an_mcp_tool_is_approved_in_the_editor_and_its_content_shown",
            "e2e/test_mcp_e2e.py::test_a_streamable_http_server_works_end_to_end_with_its_headers",
        ),
    ),
    R(
        "acp:auth:terminal-method-only-if-advertised",
        "ACP authentication; TCK ACP-AUTH-002",
        "An auth method of type terminal is offered only to a client advertising auth.terminal.",
        (),
    ),
    R(
        "acp:permission:only-a-selected-offered-option-approves",
        "ACP request_permission (outcome selected/cancelled); rules T7 (a rejected call is not executed)",
        "Only a `selected` outcome naming an offered allow option "
        "approves; garbage, errors and unknown ids are rejections.",
        (E2E + "test_a_rejected_call_is_not_run_fails_and_ends_the_turn_without_another_model_call",),
    ),
    R(
        "acp:permission:cancelled-outcome-cancels-the-turn",
        "ACP cancellation (pending permission requests are answered cancelled)",
        "A cancelled permission outcome ends the turn with stopReason cancelled.",
        (
            E2E + "test_a_cancelled_permission_outcome_ends_the_turn_cancelled",
            E2E + "test_session_cancel_while_a_permission_is_pending_runs_nothing_and_answers_cancelled",
        ),
    ),
    # ---- cancellation ----------------------------------------------------------------------------------------------
    R(
        "acp:cancel:prompt-returns-cancelled",
        "ACP cancellation (the agent MUST answer the prompt with "
        "stopReason cancelled, not an error); TCK ACP-CANCEL-001",
        "After session/cancel the prompt answers a cancelled result.",
        (E2E + "test_session_cancel_during_a_slow_model_call_answers_cancelled",),
    ),
    R(
        "acp:cancel:no-update-after-the-answer",
        "ACP cancellation; TCK ACP-CANCEL-002",
        "No session/update of a cancelled turn arrives after its prompt's answer.",
        (),
    ),
    R(
        "acp:cancel-request:original-still-answered",
        "ACP $/cancel_request (the receiver MUST still answer the original request)",
        "A $/cancel_request'ed request is still answered: a result or -32800.",
        (
            "acp_server/test_rpc_connection.py::test_cancel_request_answers_the_original_request_with_request_cancelled",
            PM + "test_cancel_request_for_a_prompt_ends_it_with_cancelled",
        ),
    ),
    # ---- our reliability rules ---------------------------------------------------------------------------------------
    R(
        "gw:frame:oversized-refused-and-serving-continues",
        "rules R3",
        "A frame over the size bound gets one -32600 and is dropped up to its newline; serving continues.",
        (
            PM + "test_a_frame_beyond_the_size_bound_gets_an_error_and_the_connection_lives_on",
            PM + "test_a_huge_line_without_newline_followed_by_a_valid_frame_is_dropped_then_serving_continues",
        ),
    ),
    R(
        "gw:frame:deep-nesting-refused",
        "rules R3, T14 (orjson recursion CVEs)",
        "Deeply nested JSON is a parse error, not a crash.",
        (PM + "test_deeply_nested_json_is_a_parse_error_not_a_crash",),
    ),
    R(
        "gw:lifecycle:eof-kills-tool-processes",
        "rules R5",
        "On EOF every tool process group (grandchildren, background processes) is killed; nothing pending runs.",
        (),
    ),
    R(
        "gw:lifecycle:sigterm-graceful",
        "rules R5; MCP client shutdown sequence",
        "SIGTERM exits 0 and kills tool processes.",
        (PR + "test_sigterm_shuts_down_gracefully_with_exit_0",),
    ),
    R(
        "gw:lifecycle:cancel-kills-tool-processes",
        "rules R6",
        "A cancelled turn leaves none of its commands running.",
        ("runtime/test_tools_bash.py::test_cancelling_an_exec_kills_everything_it_started",),
    ),
    R(
        "gw:write:atomic-under-kill-9",
        "gatewright: a failed write leaves the old file intact",
        "A write interrupted by SIGKILL leaves "
        "the old or the new content, never a torn file; the session store survives too.",
        (
            "acp_server/test_tools_editor.py::test_a_writer_killed_mid_write_leaves_the_old_or_the_new_content_never_a_torn_file",
            "e2e/test_sessions_raw.py::test_after_kill_9_mid_turn_the_session_loads_with_every_completed_step",
        ),
    ),
    R(
        "gw:write:failure-leaves-old-file",
        "runtime.workspace (temp file, fsync, rename)",
        "A failing disk write gives a clear error naming the file; the old file is intact; no debris.",
        (),
    ),
    # ---- the hosts ----------------------------------------------------------------------------------------------
    R(
        "gw:hosts:one-composition-root",
        "ARCHITECTURE.md (one composition root)",
        "One function assembles a session's agent (registry, executor stack, approval, rules, audit, delegation) for "
        "the ACP host, the terminal hosts and the test harnesses.",
        (
            "runtime/test_runtime_api.py::test_only_the_composition_root_assembles_a_session_agent",
            "e2e/test_hosts_identical.py::test_the_same_script_and_answers_give_the_same_executions_in_every_host",
        ),
    ),
    R(
        "gw:chat:sessions-shared-with-editors",
        "gatewright chat: sessions shared with editors (docs/configuration.md)",
        "A chat session is saved as it goes, listed by session/list, continued with --continue, and loaded by an "
        "editor with a full replay; an editor's session is continued in the terminal.",
        (
            CT + "test_a_conversation_in_the_terminal_with_an_always_answer_is_saved_continued_and_loaded_by_an_editor",
            CT + "test_an_editor_session_is_continued_in_the_terminal",
        ),
    ),
    R(
        "gw:chat:ctrl-c-cancels-the-turn",
        "gatewright chat: Ctrl-C",
        "Ctrl-C in a chat cancels the running turn (its commands are gone) and returns to the prompt; Ctrl-C at an "
        "empty prompt or Ctrl-D leaves.",
        (CT + "test_ctrl_c_during_a_long_command_cancels_the_turn_kills_the_command_and_returns_to_the_prompt",),
    ),
    # ---- our security rules --------------------------------------------------------------------------------------
    R(
        "gw:workspace:escapes-fail-closed",
        "rules T1–T3",
        "Traversal, absolute paths, prefix confusion, NUL, symlinks and swap races fail closed in every file tool.",
        (
            "security/test_workspace_boundary.py::test_every_file_tool_fails_closed_on_every_attack",
            "security/test_workspace_boundary.py::test_a_directory_swapped_for_a_symlink_after_resolution_is_not_followed",
            "security/test_workspace_boundary.py::test_the_approval_layer_sees_the_resolved_outside_path",
        ),
    ),
    R(
        "gw:approval:auto-still-asks-dangerous-shell",
        "approval modes (auto); rules T4, T10",
        "auto mode still asks before downloads into a shell, recursive deletes, substitutions sent over the network.",
        (
            "permissions/test_shell_analysis.py::test_a_download_fed_to_a_shell_is_reported_as_such",
            "permissions/test_shell_analysis.py::test_network_commands_fed_by_substitutions_always_ask",
        ),
    ),
    R(
        "gw:approval:reject-continue-reason",
        "the reject-and-continue option (reject, and tell the agent why)",
        'After "Reject, and let the agent try another way", an editor that shows forms is asked for an optional '
        "reason, which reaches the model in the TOOL_ERROR; the call never runs, the five options stay as they are, "
        "and without a reason (none given, or no form support) the rejection reads as before.",
        (),
    ),
    R(
        "gw:approval:read-only-refuses-without-asking",
        "approval modes (read-only)",
        "read-only refuses anything that writes or runs a process, without asking.",
        ("runtime/test_runtime_loop.py::test_read_only_mode_refuses_writes_without_asking_and_tells_the_model",),
    ),
    R(
        "gw:approval:allow-always-binds-the-canonical-command",
        "rules T7",
        "allow_always binds to the canonical command and cwd, never to a string prefix.",
        (E2E + "test_allow_always_is_remembered_for_an_identical_call_in_the_session",),
    ),
    R(
        "gw:approval:tool-output-cannot-change-mode-or-rules",
        "rules T10",
        "Tool output is data: it never changes the mode or the remembered rules.",
        (),
    ),
    R(
        "gw:tools:extra-argument-fields-rejected",
        "rules T9 (GHSA-m77w-p5jj-xmhg)",
        "Unknown tool-argument fields (dangerouslyDisableSandbox…) are rejected before anything runs.",
        (),
    ),
    R(
        "gw:shell:repository-strings-never-execute",
        "rules T13 (GHSA-j4h9-wv2m-wrf7)",
        "File names, git config and file content from the repository never reach a shell.",
        (),
    ),
    R(
        "gw:secrets:never-leave-the-agent",
        "rules T12; docs/transcripts.md (Secrets)",
        "Provider keys and MCP env/header values never appear on stdout, stderr, transcripts, audit or the store.",
        (
            "acp_server/test_transcripts.py::test_recording_never_writes_secret_values",
            "runtime/test_tools_bash.py::test_exec_environment_drops_the_agents_secrets",
        ),
    ),
    R(
        "gw:secrets:configured-key-variables",
        "boundary corpus hole 7; rules T12",
        "A variable named by a provider's api_key_env, MCP env and header values, provider header values and "
        "authenticate payloads are registered secrets: no child process inherits them (bash, background processes, "
        "editor terminals, other MCP servers) and no sink writes them (wire, transcript, store, audit, logs).",
        (),
    ),
    R(
        "gw:secrets:runs-redacted",
        "README: Secrets",
        "Every run of 12 or more consecutive characters of a secret value is redacted like the whole value, in every "
        "sink: tool results before the model, frames, transcripts, the store, the audit log, log lines.",
        (),
    ),
    R(
        "gw:secrets:secret-files-ask",
        "README: Secrets",
        "A call that reads or changes a well-known secret file, or a file holding a registered secret value, asks "
        "first in every mode (auto included), naming the file and why, and is refused in read-only; a directory "
        "search never looks into such files.",
        (),
    ),
    R(
        "acp:session:additional-directories",
        "ACP session setup (additionalDirectories, needs sessionCapabilities.additionalDirectories)",
        "Extra workspace roots per session: new, load, resume and fork take absolute existing directories (anything "
        "else -32602), the store keeps them, and every root is the workspace for the tools, the boundary, the "
        "sandbox, the protected paths, the instructions and the git state.",
        (
            "e2e/test_multi_root_e2e.py::test_two_roots_are_one_workspace_for_tools_sandbox_and_instructions",
            "e2e/test_multi_root_e2e.py::"
            "test_an_additional_directory_that_is_not_an_absolute_existing_directory_is_invalid_params",
            "e2e/test_ts_sdk_e2e.py::test_the_typescript_sdk_client_gets_two_roots_the_newer_updates_and_logout",
        ),
    ),
    R(
        "acp:auth:logout",
        "ACP logout (needs agentCapabilities.auth.logout)",
        "logout forgets the credentials gatewright setup stored; open sessions stop using them.",
        (
            "acp_server/test_auth_methods.py::test_logout_forgets_the_stored_key_and_the_sessions_stop_using_it",
            "e2e/test_ts_sdk_e2e.py::test_the_typescript_sdk_client_gets_two_roots_the_newer_updates_and_logout",
        ),
    ),
    R(
        "gw:sandbox:network-by-name",
        "docs/sandbox.md: Network by name",
        "With [sandbox] network in the user's config file, a command that has the network reaches only the named "
        "hosts, through the sandbox's proxy; another host is refused with one line the tool result repeats; where "
        "namespaces exist nothing else gets out (TCP or UDP), where they do not, what leaks is exactly the "
        "documented part and such commands ask first in every mode; without the key nothing of it runs.",
        (),
    ),
)

GAPS: tuple[Gap, ...] = (
    Gap(
        "jsonrpc:batch:array-of-responses",
        "JSON-RPC 2.0 §6 (Batch)",
        "A batch gets an array of responses; an all-notification batch gets nothing.",
        "ACP v1 stdio carries individual messages only (no batches): an array is answered with one -32600 "
        "(rules R1). Batches arrive with the ACP v2 draft, behind a protocol-version gate.",
    ),
    Gap(
        "acp:prompt:audio-content",
        "ACP content (audio needs promptCapabilities.audio)",
        "Audio prompt blocks reach the model.",
        "No configured model takes audio; audio is not advertised and an audio block gets a plain note.",
        ("agentCapabilities", "promptCapabilities", "audio"),
    ),
    Gap(
        "acp:schema:fuzz-jsonschema-in-suite",
        "rules R8 (hypothesis-jsonschema from_schema)",
        "Params generated by hypothesis-jsonschema in the bounded suite.",
        "hypothesis-jsonschema needs ~160 ms per PromptRequest example; the suite uses "
        "tests/support/fuzz_strategies.py (same schema, all instances schema-valid) and bench/fuzz_long.py uses "
        "hypothesis-jsonschema.",
    ),
)

RETIRED: tuple[str, ...] = ()
