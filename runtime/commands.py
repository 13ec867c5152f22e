"""Slash commands, the same in every host: which there are, and running them.

Built-in commands (`/help`, `/mode`, `/model`, `/permissions`, `/compact`, `/status`) run locally: they answer with
Markdown text (which ACP clients and the terminal render: a blank line before every list) and `end_turn`, and only
`/compact` calls the model (for the summary). The ACP host advertises them (`acp_server.updates.commands_update`);
`plan_prompt` (`runtime.session`) runs them. An unknown `/name` and an empty prompt are answered locally too: they
never reach the model. Project commands are
Markdown prompt templates in the workspace, `.gatewright/commands/NAME.md`: an optional front matter line
`description: …`, then the prompt; `$ARGUMENTS` is replaced by what the user typed after the command (appended when
the template has no `$ARGUMENTS`). A project command is a normal model turn with the expanded prompt.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from permissions.modes import MODES
from permissions.rules import SCOPE_WORDS
from permissions.store import RulesUnreadable, known_state_dir_problem
from runtime.events import CompactionEvent
from runtime.sandbox import describe_network, grants, support
from runtime.updates import new_compaction_id

if TYPE_CHECKING:
    from runtime.session import Session

log = logging.getLogger("gatewright.commands")

PROJECT_DIR = (".gatewright", "commands")
MAX_PROJECT_COMMANDS = 100
MAX_TEMPLATE_BYTES = 64 * 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    description: str
    hint: str | None = None
    template: str | None = None  # a project command's prompt; None for built-ins


BUILTINS: tuple[Command, ...] = (
    Command("help", "List the available commands"),
    Command("mode", "Show or switch the approval mode", "safe | manual | auto | read-only"),
    Command("model", "Show or switch the model of this session", "model id"),
    Command(
        "permissions",
        "List remembered approval rules; /permissions revoke ID forgets one; "
        "/permissions remember session|project|everywhere sets where answers are remembered",
        "revoke RULE_ID | remember SCOPE",
    ),
    Command("compact", "Summarise the conversation so far into a checkpoint to free context"),
    Command("status", "Show this session: mode, model, context use and usage"),
)
_BUILTIN_NAMES = {c.name for c in BUILTINS}


def project_commands(cwd: str) -> list[Command]:
    """The workspace's prompt templates, sorted by name. Unreadable or oversized files are skipped."""
    folder = Path(cwd, *PROJECT_DIR)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".md"))
    except OSError:
        return []
    out: list[Command] = []
    for filename in names[:MAX_PROJECT_COMMANDS]:
        name = filename[:-3]
        if not _NAME.match(name) or name in _BUILTIN_NAMES:
            continue
        try:
            path = folder / filename
            if not path.is_file() or path.stat().st_size > MAX_TEMPLATE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            log.debug("skipping project command %s", filename, exc_info=True)
            continue
        description, template = _front_matter(text)
        out.append(
            Command(name, description or f"Project command ({'/'.join(PROJECT_DIR)}/{filename})", "arguments", template)
        )
    return out


def _front_matter(text: str) -> tuple[str | None, str]:
    description = None
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end > 0:
            for line in text[4:end].splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "description":
                    description = value.strip().strip("\"'")
            text = text[end + 4 :].lstrip("\n")
    if description is None:
        first = next((ln.strip().lstrip("#").strip() for ln in text.splitlines() if ln.strip()), "")
        description = first[:100] or None
    return description, text


def available(cwd: str) -> list[Command]:
    """The built-ins, then the project commands of the workspace at `cwd` (read afresh: the folder may change)."""
    return [*BUILTINS, *project_commands(cwd)]


def parse(blocks: list[Any]) -> tuple[str, str] | None:
    """`/name args…` when the prompt is one text block starting with a slash; else None."""
    if len(blocks) != 1 or not isinstance(blocks[0], dict) or blocks[0].get("type") != "text":
        return None
    text = str(blocks[0].get("text", "")).strip()
    if not text.startswith("/"):
        return None
    name, _, args = text[1:].partition(" ")
    name = name.strip()
    return (name, args.strip()) if _NAME.match(name) else None


def is_empty(blocks: list[Any]) -> bool:
    """A prompt with nothing in it: no blocks, or only text blocks that are empty or whitespace."""
    return all(isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text", "")).strip() for b in blocks)


def unknown_reply(name: str, commands: list[Command]) -> str:
    """The local answer to `/name` that is no command: the real ones, and how to send such text to the model."""
    return (
        f"`/{name[:64]}` is not a command here, so nothing was sent to the model.\n\n**Commands**\n\n"
        + command_list(commands)
        + "\n\nTo ask the agent something that starts with a slash, put a word in front of it."
    )


def command_list(commands: list[Command]) -> str:
    """One Markdown list item per command, with its input hint (built-ins) in the same code span."""
    return "\n".join(
        f"- `/{c.name}{' ' + c.hint if c.hint and c.template is None else ''}`: {c.description}" for c in commands
    )


def markdown_list(head: str, items: list[str]) -> str:
    """A paragraph, a blank line, then a list: how a Markdown client shows several lines as several lines (single
    newlines inside a paragraph are joined into one)."""
    return head + "\n\n" + "\n".join(f"- {item}" for item in items)


def expand(template: str, args: str) -> str:
    if "$ARGUMENTS" in template:
        return template.replace("$ARGUMENTS", args)
    return f"{template.rstrip()}\n\n{args}" if args else template


async def run_builtin(session: Session, name: str, args: str) -> str:
    """Run a built-in command; the text is the answer shown to the user."""
    if name == "help":
        return "**Commands**\n\n" + command_list([*available(session.cwd), *session.host_commands()])
    if name == "mode":
        if not args:
            return f"Approval mode: {session.mode}. Available: {', '.join(m.id for m in MODES)}."
        if args not in {m.id for m in MODES}:
            return f"Unknown mode {args[:50]!r}. Available: {', '.join(m.id for m in MODES)}."
        session.set_mode(args)
        await session.announce(mode=True, config=True)
        session.save_settings()
        return f"Approval mode is now {args}."
    if name == "model":
        choices = [m.id for m in session.model_choices]
        if not args:
            return f"Model: {session.model_id or 'none'}." + (f" Available: {', '.join(choices)}." if choices else "")
        if args not in choices or session.factory is None:
            return f"Unknown model {args[:100]!r}." + (
                f" Available: {', '.join(choices)}." if choices else " This session cannot switch models."
            )
        session.set_model(args, session.factory.create(args))
        await session.announce(config=True)
        session.save_settings()
        return f"Model is now {args}; it answers from the next model call."
    if name == "permissions":
        return await _permissions(session, args)
    if name == "compact":
        return await _compact(session)
    return _status(session)


_REMEMBER_WORDS = {"session": "session", "project": "project", "everywhere": "global", "global": "global"}


async def _permissions(session: Session, args: str) -> str:
    verb, _, rest = args.partition(" ")
    rest = rest.strip()
    if verb == "revoke":
        if not rest:
            return "Usage: `/permissions revoke RULE_ID` (see `/permissions` for the ids)."
        try:
            revoked = session.rules.revoke(rest)
        except RulesUnreadable as exc:
            return f"Could not revoke {rest[:100]!r}: {exc.reason}."
        return f"Revoked {rest}." if revoked else f"No rule {rest[:100]!r}."
    if verb == "remember":
        scope = _REMEMBER_WORDS.get(rest.lower())
        if scope is None:
            return "Usage: `/permissions remember session|project|everywhere`."
        session.set_remember(scope)
        await session.announce(config=True)
        session.save_settings()
        return f"“Always” answers are now remembered {SCOPE_WORDS[scope]}."
    if verb:
        return (
            "Usage: `/permissions` lists the remembered rules; `/permissions revoke RULE_ID` forgets one; "
            "`/permissions remember session|project|everywhere` sets where “always” answers are remembered."
        )
    rules = session.rules.list()
    lines = [f"“Always” answers are remembered {SCOPE_WORDS[session.rules.remember]}."]
    if session.rules.unknown:
        lines.append(
            f"⚠ The saved rules cannot be read ({session.rules.problem}): only this session's rules are "
            "shown, and every tool call asks."
        )
    if not rules:
        lines.append("No remembered approval rules in this session.")
    else:
        lines.append(
            "**Remembered approval rules**\n\n"
            + "\n".join(f"- `{r.id}` {r.action} {r.tool}: {r.label} ({r.scope})" for r in rules)
        )
    return "\n\n".join(lines)  # paragraphs: a Markdown client joins single-newline lines into one


async def _compact(session: Session) -> str:
    journal = session.journal
    if session.model is None:
        return "No model is configured, so there is nothing to summarise with."
    if journal is None:
        return "Compaction is not available for this session."
    cid = new_compaction_id()  # shown as a compaction to a client that shows them, besides this reply
    await session.emit(CompactionEvent(cid, "in_progress"))
    result = await journal.compactor.compact(session.runtime)
    await session.emit(result.event(cid))
    journal.sync()
    if result.method == "summary":
        return (
            f"Compacted: {result.summarised} earlier messages summarised into a checkpoint "
            f"(about {result.tokens_before} → {result.tokens_after} tokens)."
        )
    if result.method == "dropped_tool_outputs":
        return (
            f"The summary failed ({result.error}); the oldest tool outputs were dropped instead "
            f"(about {result.tokens_before} → {result.tokens_after} tokens)."
        )
    return f"Nothing was compacted: {result.error}."


def state_lines(session: Session) -> list[str]:
    """What `/status` says about the state dir, the rules file and the audit log when one of them cannot be used."""
    if session.state_dir is None:
        return []
    state = known_state_dir_problem(session.state_dir)
    if state is not None:
        return [f"⚠ {state}: approvals are remembered for this session only, and no audit log is kept."]
    out = []
    if session.rules.unknown:
        out.append(
            f"⚠ Remembered rules cannot be read ({session.rules.problem}): every tool call asks until the "
            "file is repaired or removed."
        )
    elif session.rules.problem:
        out.append(
            f"⚠ Remembered rules cannot be saved ({session.rules.problem}): “always” answers last for this "
            "session only."
        )
    audit = getattr(session, "audit", None)
    if audit is not None and audit.problem:
        out.append(f"⚠ Audit log: not written ({audit.problem}).")
    return out


def _status(session: Session) -> str:
    rt = session.runtime
    journal = session.journal
    window = journal.window() if journal is not None else session.options.context_window
    used = journal.compactor.tokens(rt) if journal is not None else 0
    u = rt.total_usage
    head = f"**Session** `{session.id}`" + (f": {session.title}" if session.title else "")
    lines = [
        f"Workspace: `{session.cwd}`",
        f"Mode: {session.mode}",
        f"Model: {session.model_id or 'none'}",
        f"Context: about {used} of {window} tokens in {len(rt.history)} messages",
        f"Usage: {u.input_tokens} input, {u.output_tokens} output tokens"
        + (f", cost {session.cost:.4f}" if session.cost else ""),
        f"Remembered rules: {len(session.rules.list())}; “always” answers are remembered "
        f"{SCOPE_WORDS[session.rules.remember]}",
    ]
    lines += support().status_lines()  # "Sandbox: Landlock ABI 7 (...), user/pid/mount/net namespaces", what is missing
    widened = grants.describe(session.workspace.roots)
    if widened is not None:
        lines.append(widened[0].upper() + widened[1:])
    network = describe_network()
    if network is not None:
        lines.append(network)
    lines += state_lines(session)
    if journal is not None:
        lines.append(f"Saved in: `{journal.store.path}`" + (" (saving failed)" if journal.broken else ""))
    return markdown_list(head, lines)
