"""The `gatewright` command line: `acp` (what editors launch), `chat` (an interactive session on a terminal, also
`gatewright` alone on a terminal), `run` (one prompt, scriptable), `setup` and `logout` (sign in and out; `acp setup`
is `setup`), `demo`, `replay` (recorded transcripts), and the `permissions list|revoke` and `audit` views of the state
dir (these print to stdout: they are not acp mode).

Kept light on purpose: this module is on the start-up path of `gatewright acp`, so it imports only the standard library,
what `acp` needs to start (the config, the mode, the secrets filter) and the lazy places: each subcommand's own
modules load when it runs (`acp_server.replay`, `runtime.run_prompt`, `permissions.store`, `lazy.sqlite3`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import acp_server  # lazy submodules: each subcommand's modules load when it runs
import permissions  # lazy submodules: the rule store, the audit log, their reports
import runtime  # the runtime's lazy public API: `runtime.name` loads a name's module on first use
from permissions.modes import parse_mode
from runtime import credentials, lazy, secrets, settings
from runtime.config import load, use_sandbox
from runtime.version import __version__

if TYPE_CHECKING:
    from permissions.modes import ApprovalMode
    from permissions.rules import Rule
    from runtime import ModelFactory

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REJECTED = 3
EXIT_INTERRUPTED = 130


def _env(name: str) -> str:
    """The option's variable, for its help (the declaration: `runtime.settings.VARIABLES`)."""
    return f"(env {settings.BY_NAME[name].name})"


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        metavar="SPEC",
        default=os.environ.get("GATEWRIGHT_MODEL"),
        help=f"scripted:PATH, openai:MODEL, anthropic:MODEL, PROVIDER:MODEL or a configured model's name "
        f"{_env('GATEWRIGHT_MODEL')}",
    )
    p.add_argument(
        "--mode",
        default=os.environ.get("GATEWRIGHT_MODE"),
        help=f"approval mode: manual, safe (default), auto, read-only {_env('GATEWRIGHT_MODE')}",
    )
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        default=os.environ.get("GATEWRIGHT_STATE_DIR"),
        help=f"where sessions, remembered rules and the audit log live {_env('GATEWRIGHT_STATE_DIR')}",
    )
    p.add_argument(
        "--record",
        metavar="FILE",
        default=os.environ.get("GATEWRIGHT_RECORD"),
        help=f"append every JSON-RPC frame to FILE as JSON lines {_env('GATEWRIGHT_RECORD')}",
    )
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=settings.BY_NAME["GATEWRIGHT_LOG"].choices,
        default=None,
        help=f"what is logged on stderr (default WARNING) {_env('GATEWRIGHT_LOG')}",
    )


def _add_dirs(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--add-dir",
        dest="add_dirs",
        metavar="DIR",
        action="append",
        default=[],
        help="another workspace root, as ACP additionalDirectories (repeatable)",
    )


def _more_roots(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The `--add-dir` roots, absolute; None (after one line on stderr) when one is not an existing directory."""
    out: list[str] = []
    for d in args.add_dirs:
        path = os.path.abspath(os.path.expanduser(d))
        if "\x00" in d or not os.path.isdir(path):
            sys.stderr.write(f"gatewright: --add-dir {d}: not an existing directory\n")
            return None
        out.append(path)
    return tuple(out)


def _log_level(args: argparse.Namespace) -> str:
    return str(args.log_level or settings.current().get("GATEWRIGHT_LOG") or "WARNING")


def version() -> str:
    """gatewright's version (`runtime.version`, the one source the package metadata is built from too)."""
    return __version__


class _VersionAction(argparse.Action):
    """`--version`: the metadata is read only when asked for (argparse's own action builds its text up front)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print `gatewright X.Y.Z` and exit"
        )

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: object, values: object, option_string: str | None = None
    ) -> None:
        sys.stdout.write(f"gatewright {version()}\n")
        parser.exit(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gatewright", description="An ACP coding agent whose permissions you can trust."
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    acp = sub.add_parser("acp", help="serve the Agent Client Protocol on stdio (what an editor launches)")
    _add_common(acp)
    # ACP's terminal auth method appends its args to the agent's command: `gatewright acp setup` is the setup.
    acp.add_argument("action", nargs="?", choices=["setup"], help=argparse.SUPPRESS)
    run = sub.add_parser("run", help="run one prompt through the same runtime, approvals asked on the terminal")
    _add_common(run)
    run.add_argument("--cwd", default=None, help="workspace directory (default: the current directory)")
    _add_dirs(run)
    run.add_argument("--json", action="store_true", help="one JSON object per event on stdout")
    run.add_argument("prompt", nargs="+", help="the prompt; - reads it from stdin")
    chat = sub.add_parser(
        "chat", help="an interactive session in the current directory, on the same runtime and session store as acp"
    )
    _add_common(chat)
    _add_dirs(chat)
    which = chat.add_mutually_exclusive_group()
    which.add_argument(
        "--continue", dest="continue_latest", action="store_true", help="resume the latest session of this directory"
    )
    which.add_argument("--resume", metavar="ID", default=None, help="resume the session ID (as session/list shows)")
    replay = sub.add_parser("replay", help="show a `--record` transcript readably, or --check it against this agent")
    replay.add_argument("file", metavar="FILE", help="the transcript (`--record` output); - reads stdin")
    replay.add_argument(
        "--check",
        action="store_true",
        help="re-drive the recording against the current agent with its scripted model and report "
        "the first divergence (exit 0: none, 1: diverged, 2: not a transcript / cannot check)",
    )
    replay.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the output (auto: when stdout is a terminal)",
    )
    replay.add_argument("--full", action="store_true", help="show tool output and file contents in full")
    replay.add_argument(
        "--workspace",
        metavar="DIR",
        default=None,
        help="(--check) start from a copy of DIR instead of an empty workspace",
    )
    replay.add_argument(
        "--model",
        metavar="SPEC",
        default=None,
        help="(--check) scripted:FILE instead of the scripted model recorded in the transcript",
    )
    replay.add_argument(
        "--trust",
        action="store_true",
        help="(--check) also re-run what acts outside the temporary workspace (commands, MCP "
        "servers, outside writes); without it such a transcript is refused",
    )
    replay.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="(--check) how long a silent agent is waited for (default 10 s)",
    )
    sub.add_parser("demo", help="offline showcase: drive `gatewright acp` with a scripted model as an editor would")
    sub.add_parser("setup", help="sign in on the terminal: provider, key (hidden), verification, default model")
    sub.add_parser("logout", help="forget the keys `setup` stored (keys in your environment are not touched)")
    perms = sub.add_parser("permissions", help="list or revoke remembered permission rules (project and global)")
    perms_sub = perms.add_subparsers(dest="perm_command", metavar="ACTION")
    plist = perms_sub.add_parser("list", help="show remembered rules")
    plist.add_argument("--project", default=None, help="only this project's rules and the global ones")
    plist.add_argument("--json", action="store_true", help="one JSON object per line")
    prevoke = perms_sub.add_parser("revoke", help="forget a remembered rule")
    prevoke.add_argument("rule_id", metavar="ID", help="the rule's id, as `permissions list` shows it")
    for p in (plist, prevoke):
        p.add_argument("--state-dir", default=os.environ.get("GATEWRIGHT_STATE_DIR"), help="the state dir")
    audit = sub.add_parser("audit", help="show the audit log of permission decisions")
    audit.add_argument("--session", default=None, help="only this session's decisions")
    audit.add_argument("--project", default=None, help="only this project's decisions")
    audit.add_argument("--limit", type=int, default=50, help="how many of the newest entries (default 50)")
    audit.add_argument("--json", action="store_true", help="one JSON object per line")
    audit.add_argument("--state-dir", default=os.environ.get("GATEWRIGHT_STATE_DIR"), help="the state dir")
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, str(level).upper(), logging.WARNING),
        format="gatewright %(levelname)s %(name)s: %(message)s",
    )
    secrets.install_log_filter()  # no record reaches stderr with a secret in it (keys known now and registered later)


@dataclass(frozen=True, slots=True)
class Checked:
    """What `acp` and `run` start with, checked before anything runs."""

    factory: ModelFactory
    mode: ApprovalMode
    rules: tuple[Rule, ...] = ()  # the config file's allow/deny


def _check_options(args: argparse.Namespace) -> Checked | None:
    """Read the config file and validate model spec and mode; print a one-line error and return None on bad usage
    or configuration. The mode: --mode, else GATEWRIGHT_MODE, else the config's `[permissions] mode`, else safe."""
    try:
        config = load(state_dir=args.state_dir)
        mode = parse_mode(args.mode or config.permissions.mode)
        # The keys `gatewright setup` stored, under the environment (a variable that is set wins).
        factory = runtime.ModelFactory(
            runtime.parse_model_spec(args.model), config=config.models, env=credentials.environment()
        )
    except (ValueError, runtime.ScriptError) as exc:
        sys.stderr.write(f"gatewright: {secrets.redact_text(str(exc))}\n")
        return None
    use_sandbox(config)
    return Checked(factory, mode, config.permissions.rules)


def cmd_acp(args: argparse.Namespace) -> int:
    checked = _check_options(args)
    if checked is None:
        return EXIT_USAGE
    _setup_logging(_log_level(args))
    return acp_server.server.serve_stdio(
        checked.factory, checked.mode, record=args.record, state_dir=args.state_dir, rules=checked.rules
    )


def cmd_run(args: argparse.Namespace) -> int:
    try:
        prompt = sys.stdin.read() if args.prompt == ["-"] else " ".join(args.prompt)
    except (OSError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"gatewright: cannot read the prompt from stdin: {exc}\n")
        return EXIT_USAGE
    if not prompt.strip():
        sys.stderr.write("gatewright: the prompt is empty\n")
        return EXIT_USAGE
    checked = _check_options(args)
    if checked is None:
        return EXIT_USAGE
    _setup_logging(_log_level(args))
    cwd = os.path.abspath(args.cwd or os.getcwd())
    if not os.path.isdir(cwd):
        sys.stderr.write(f"gatewright: --cwd {cwd} is not a directory\n")
        return EXIT_USAGE
    more = _more_roots(args)
    if more is None:
        return EXIT_USAGE
    runtime.sandbox.harden_agent()
    return runtime.run_prompt(
        prompt,
        cwd=cwd,
        factory=checked.factory,
        mode=checked.mode,
        state_dir=args.state_dir,
        record=args.record,
        json_events=args.json,
        rules=checked.rules,
        additional_directories=more,
    )


def cmd_chat(args: argparse.Namespace) -> int:
    checked = _check_options(args)
    if checked is None:
        return EXIT_USAGE
    _setup_logging(_log_level(args))
    more = _more_roots(args)
    if more is None:
        return EXIT_USAGE
    runtime.sandbox.harden_agent()
    return runtime.run_chat(
        cwd=os.getcwd(),
        factory=checked.factory,
        mode=checked.mode,
        state_dir=args.state_dir,
        resume=args.resume,
        continue_latest=args.continue_latest,
        rules=checked.rules,
        model_given=args.model is not None,
        mode_given=args.mode is not None,
        record=args.record,
        additional_directories=more,
    )


def cmd_logout() -> int:
    forgotten = credentials.forget()
    if not forgotten:
        sys.stdout.write("Nothing to forget: no key is stored (keys set in your environment are not touched).\n")
        return EXIT_OK
    sys.stdout.write(f"Signed out: forgot the stored {', '.join(forgotten)} ({credentials.path()} removed).\n")
    set_now = [n for n in forgotten if os.environ.get(n)]
    if set_now:
        sys.stdout.write(f"{', '.join(set_now)} is still set in this environment and is still used.\n")
    return EXIT_OK


def cmd_permissions(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.perm_command not in ("list", "revoke"):
        sys.stderr.write("gatewright: permissions needs an action: `permissions list` or `permissions revoke ID`\n")
        return EXIT_USAGE
    try:
        return _permissions(args)
    except (OSError, lazy.sqlite3.Error) as exc:
        sys.stderr.write(f"gatewright: cannot open the remembered rules in the state dir: {exc}\n")
        return EXIT_USAGE


def _permissions(args: argparse.Namespace) -> int:
    db = permissions.store.rule_database(args.state_dir)
    try:
        if args.perm_command == "list":
            here = os.path.realpath(args.project) if args.project else None
            rules = db.rules_for(here) if here else db.all()
            if args.json:
                for r in rules:
                    sys.stdout.write(
                        json.dumps(
                            {
                                "id": r.id,
                                "action": r.action,
                                "tool": r.tool,
                                "label": r.label,
                                "scope": r.scope,
                                "match": r.match,
                                "project": r.project,
                                "created_at": r.created_at,
                            }
                        )
                        + "\n"
                    )
            else:
                sys.stdout.write(permissions.report.format_rules(rules, here) + "\n")
            return EXIT_OK
        if args.perm_command == "revoke":
            if db.revoke(args.rule_id):
                sys.stdout.write(f"Revoked {args.rule_id}.\n")
                return EXIT_OK
            sys.stderr.write(f"gatewright: no remembered rule {args.rule_id!r} (see `gatewright permissions list`)\n")
            return 1
    except permissions.store.RulesUnreadable as exc:
        sys.stderr.write(
            f"gatewright: the remembered rules cannot be read ({exc.reason}); until they can, every "
            "tool call asks. Repair or remove the file.\n"
        )
        return 1
    return EXIT_USAGE


def cmd_audit(args: argparse.Namespace) -> int:
    log = permissions.audit.audit_log(args.state_dir)
    try:
        entries = log.entries(
            limit=args.limit, session_id=args.session, project=os.path.realpath(args.project) if args.project else None
        )
    except Exception as exc:  # a corrupt or unreadable file: one clear line, not a traceback
        sys.stderr.write(
            f"gatewright: the audit log {log.path} cannot be read ({permissions.shared_sqlite.describe_failure(exc)})\n"
        )
        return 1
    if args.json:
        for e in entries:
            sys.stdout.write(json.dumps(e.as_dict()) + "\n")
    else:
        sys.stdout.write(permissions.report.format_audit(entries) + "\n")
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    if args.check:
        return acp_server.replay.run_check(
            args.file, workspace=args.workspace, model=args.model, trust=args.trust, idle=max(0.1, args.timeout)
        )
    return acp_server.transcript_view.run_render(args.file, color=args.color, full=args.full)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "setup" or args.command == "acp" and args.action == "setup":
        return runtime.run_setup()
    if args.command == "logout":
        return cmd_logout()
    if args.command == "acp":
        return cmd_acp(args)
    if args.command == "run":
        try:
            return cmd_run(args)
        except KeyboardInterrupt:  # Ctrl-C before the turn's own handler is in place
            return EXIT_INTERRUPTED
    if args.command == "chat" or args.command is None and sys.stdin.isatty() and sys.stdout.isatty():
        # `gatewright` alone on a terminal is the chat, with the options' environment defaults.
        try:
            return cmd_chat(args if args.command == "chat" else parser.parse_args(["chat"]))
        except KeyboardInterrupt:  # Ctrl-C before the chat's own handler is in place
            return EXIT_INTERRUPTED
    if args.command == "permissions":
        return cmd_permissions(args, parser)
    if args.command == "audit":
        return cmd_audit(args)
    if args.command == "replay":
        return cmd_replay(args)
    if args.command == "demo":
        return acp_server.demo.run_demo()
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def main_acp() -> int:
    """`python -m acp_server` is `gatewright acp`."""
    return main(["acp", *sys.argv[1:]])
