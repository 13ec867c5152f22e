"""The chat's input line (prompt_toolkit): history, multi-line editing, command completion, a status toolbar.

Enter sends; Alt-Enter (or Esc then Enter) and a line ending in a backslash start a new line; a paste is taken as
it is, newlines included. Up and Down walk the history, which is kept in the state dir with every registered secret
redacted (it is one more place a prompt is written). Ctrl-C clears what is typed, or leaves when nothing is; Ctrl-D
on an empty line leaves; Ctrl-T shows the last turn's thoughts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings

from runtime import secrets
from runtime.commands import available

if TYPE_CHECKING:
    from prompt_toolkit.history import History
    from prompt_toolkit.key_binding import KeyPressEvent

HISTORY_FILE = "chat_history"
EXIT = object()  # what `read` returns when the user leaves


class RedactedHistory(FileHistory):
    """The prompt history file, without any registered secret value in it."""

    def store_string(self, string: str) -> None:
        super().store_string(secrets.redact_text(string))


class CommandCompleter(Completer):
    """`/name` completion at the start of the input, from the same command list `/help` shows."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text or "\n" in text:
            return
        for c in available(self.cwd):
            if c.name.startswith(text[1:]):
                yield Completion("/" + c.name, start_position=-len(text), display_meta=c.description[:60])


def history_for(state_dir: str | None) -> History:
    """The history file in the state dir, private like everything else there (0600; an older release made it
    0644, and it is made 0600 here); an unwritable state dir keeps the history for this chat only."""
    if state_dir:
        try:
            os.makedirs(state_dir, mode=0o700, exist_ok=True)
            path = os.path.join(state_dir, HISTORY_FILE)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600))
            os.chmod(path, 0o600)
            return RedactedHistory(path)
        except OSError:
            pass
    return InMemoryHistory()


class ChatPrompt:
    """Reads one prompt at a time. `toolbar()` gives the status line under the input; `on_thoughts()` is Ctrl-T."""

    def __init__(
        self, cwd: str, state_dir: str | None, toolbar: Callable[[], str], on_thoughts: Callable[[], None]
    ) -> None:
        kb = KeyBindings()

        @kb.add("enter")
        def submit(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            if buf.document.text_before_cursor.endswith("\\") and buf.document.is_cursor_at_the_end:
                buf.delete_before_cursor(1)
                buf.insert_text("\n")
                return
            buf.validate_and_handle()

        @kb.add("escape", "enter")
        def newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def clear_or_leave(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            if buf.text:
                buf.reset()
            else:
                event.app.exit(exception=EOFError())

        @kb.add("c-t")
        def thoughts(event: KeyPressEvent) -> None:
            run_in_terminal(on_thoughts)

        self._toolbar = toolbar
        self.session: PromptSession[str] = PromptSession(
            history=history_for(state_dir),
            multiline=True,
            key_bindings=kb,
            completer=CommandCompleter(cwd),
            complete_while_typing=True,
            bottom_toolbar=self._bottom,
            prompt_continuation="… ",
            enable_history_search=False,
            reserve_space_for_menu=4,
        )

    def _bottom(self) -> str:
        return " " + self._toolbar()

    async def read(self) -> str | object:
        """The next prompt, or `EXIT` (Ctrl-D, or Ctrl-C on an empty line)."""
        try:
            # The chat's own SIGINT handler stays in place (prompt_toolkit would replace and then remove it).
            return await self.session.prompt_async(HTML("<ansicyan><b>› </b></ansicyan>"), handle_sigint=False)
        except (EOFError, KeyboardInterrupt):
            return EXIT
