"""The terminal's permission gateway for `gatewright chat`: the same question and the same options as in an editor,
each answered with one key.

The options are the decorator's (`permissions.options`: at most five, each label naming its scope); this module only
gives each a key: `y` allow once, `a` always allow, `n` reject and stop, `t` reject and let the agent try another
way, `d` always reject (and the digits 1–5, in the order shown). Nothing is chosen by default: Enter alone and every
other key do nothing, so a stray key never approves. Ctrl-C cancels the turn (the question's answer is `cancelled`,
as when an editor cancels). A diff is shown, coloured, before the question.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from rich.text import Text

from permissions.gateway import PermissionOutcome, PermissionRequest
from runtime.chat.view import ChatView, diffs_of, texts_of

if TYPE_CHECKING:
    from prompt_toolkit.key_binding import KeyPressEvent

    from permissions.gateway import PermissionOption

CANCEL = "\x03"


def option_keys(options: tuple[PermissionOption, ...]) -> list[tuple[str, PermissionOption]]:
    """The key of each option: by kind (the second `reject_once` is "try another way"), else its position."""
    by_kind = {"allow_once": "y", "allow_always": "a", "reject_always": "d"}
    keys: list[tuple[str, PermissionOption]] = []
    rejects = 0
    used: set[str] = set()
    for i, o in enumerate(options):
        key = by_kind.get(o.kind)
        if o.kind == "reject_once":
            key = "n" if rejects == 0 else "t" if rejects == 1 else None
            rejects += 1
        if key is None or key in used:
            key = str(i + 1)
        used.add(key)
        keys.append((key, o))
    return keys


class TerminalChooser:
    """`PermissionGateway` for the chat: asks on the terminal with prompt_toolkit, one key per option.

    `read_key(message, keys)` returns the key pressed (one of `keys`, or `CANCEL`); the default reads the terminal;
    `on_cancel` is called when the user cancels (the chat cancels the turn)."""

    def __init__(
        self,
        view: ChatView,
        on_cancel: Callable[[], None],
        read_key: Callable[[str, list[str]], Awaitable[str]] | None = None,
    ) -> None:
        self.view = view
        self.on_cancel = on_cancel
        self.read_key = read_key or read_terminal_key

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        keys = option_keys(request.options)
        self.view.hold()
        try:
            console = self.view.console
            console.print(
                Text.assemble(
                    ("? ", "bold yellow"), ("Allow ", "bold"), (request.title, "bold"), (f"  ({request.tool})", "dim")
                )
            )
            if request.reason:
                console.print(Text(f"  {request.reason}", style="dim"))
            for text in texts_of(request.content):  # e.g. the whole command, when the title cannot show all of it
                console.print(Text(text, style="cyan"))
            diffs = diffs_of(request.content)
            for d in diffs:
                console.print(d)
            if diffs:
                self.view.diff_shown(request.call_id)
            for key, o in keys:
                style = "green" if o.kind.startswith("allow") else "red"
                console.print(Text.assemble("  ", (f"[{key}]", f"bold {style}"), f" {o.name}"))
            pressed = await self.read_key(
                f"  {'/'.join(k for k, _ in keys)} (ctrl-c cancels the turn) › ", [k for k, _ in keys]
            )
            if pressed == CANCEL:
                console.print(Text("  Cancelled.", style="yellow"))
                self.on_cancel()
                return PermissionOutcome.cancel()
            chosen = next(o for k, o in keys if k == pressed)
            console.print(Text(f"  → {chosen.name}", style="green" if chosen.kind.startswith("allow") else "red"))
            return PermissionOutcome.selected(chosen.option_id)
        finally:
            self.view.release()


async def read_terminal_key(message: str, keys: list[str]) -> str:
    """One key from `keys` (or `CANCEL` for Ctrl-C), read with prompt_toolkit; every other key is ignored."""
    kb = KeyBindings()
    for key in keys:

        def choose(event: KeyPressEvent, key: str = key) -> None:
            event.app.exit(result=key)

        kb.add(key, eager=True)(choose)

    @kb.add("c-c", eager=True)
    @kb.add("c-d", eager=True)
    def cancel(event: KeyPressEvent) -> None:
        event.app.exit(result=CANCEL)

    @kb.add(Keys.Any)
    @kb.add("enter")
    def ignore(event: KeyPressEvent) -> None:
        pass

    session: PromptSession[str] = PromptSession(key_bindings=kb)
    # The chat's own SIGINT handler stays in place (prompt_toolkit would replace and then remove it).
    return await session.prompt_async(message, handle_sigint=False)
