"""The `PermissionGateway` protocol: how the approval decorator asks a human.

The ACP host implements it with `session/request_permission`; the terminal host with `Approve? [y/N]`. A gateway
never decides policy: it shows a question and reports which option was picked, or that the turn is being cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

OptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]

# Who could not ask (`PermissionOutcome.could_not_ask`), as the user is told: "… about Write a.txt, so it was not run".
EDITOR_COULD_NOT_ASK = "the editor could not ask you"  # it does not answer session/request_permission
NO_TERMINAL_TO_ASK = "there was no terminal to ask you"  # `gatewright run` without a terminal


@dataclass(frozen=True, slots=True)
class PermissionOption:
    option_id: str
    name: str
    kind: OptionKind


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    """What the human is asked about: the tool call as the editor shows it, and the options on offer."""

    call_id: str
    tool: str
    title: str
    kind: str
    raw_input: Any
    options: tuple[PermissionOption, ...]
    reason: str
    content: tuple[dict[str, Any], ...] = ()
    locations: tuple[dict[str, Any], ...] = ()
    details: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class PermissionOutcome:
    """`cancelled` means the turn is being cancelled (not a rejection); `unasked` that the human could not be asked
    at all (the editor does not answer permission questions, there is no terminal): nobody rejected anything, and
    the call is not run all the same. Otherwise the picked option."""

    cancelled: bool
    option_id: str | None = None
    unasked: str | None = None  # who could not ask, in words: "the editor could not ask you"

    @staticmethod
    def selected(option_id: str) -> PermissionOutcome:
        return PermissionOutcome(False, option_id)

    @staticmethod
    def cancel() -> PermissionOutcome:
        return PermissionOutcome(True, None)

    @staticmethod
    def could_not_ask(who: str) -> PermissionOutcome:
        return PermissionOutcome(False, None, who)


class PermissionGateway(Protocol):
    async def request(self, request: PermissionRequest) -> PermissionOutcome: ...


@runtime_checkable
class ReasonGateway(Protocol):
    """A gateway that can also ask why a call was declined (optional: gateways without it are never asked)."""

    async def ask_reason(self, request: PermissionRequest) -> str | None:
        """The user's reason for declining `request` ("reject, and let the agent try another way"), or None when
        they gave none or it cannot be asked."""
        ...
