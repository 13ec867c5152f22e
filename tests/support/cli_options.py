"""The command-line options as `gatewright … --help` shows them: the rows of docs/configuration.md's table of options
(tests/test_docs.py holds the two together)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from acp_server.cli import build_parser


def _walk(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, sp in action.choices.items():
                yield from _walk(sp, f"{name} {sub}")
        elif action.option_strings and "--help" not in action.option_strings:
            yield name, action


def options() -> set[str]:
    """Every option of every command."""
    return {o for _, action in _walk(build_parser(), "gatewright") for o in action.option_strings}


def option_rows() -> list[str]:
    rows = []
    for command, action in _walk(build_parser(), "gatewright"):
        option = "/".join(action.option_strings)
        if action.nargs != 0:
            option += f" {action.metavar or action.dest.upper()}" if not action.choices else ""
        if action.choices and action.nargs != 0:
            option += " " + "|".join(str(c) for c in action.choices)
        text = (action.help or "").replace("|", "\\|")
        rows.append(f"| `{command}` | `{option.replace('|', chr(92) + '|')}` | {text} |")
    return rows
