"""Pure permission decisions for gatewright.

This package imports neither `runtime` nor `acp_server`: it works on a small structural view of a tool call
(`CallFacts`) and returns frozen decisions. The approval decorator and the gateway protocol live here too, because
they are the seam every host plugs into. Names are re-exported lazily (`permissions.lazy`, the one deferral mechanism)
so that importing `permissions.modes` on the start-up path does not pull in anyio; the submodules a host defers are
lazy attributes too (`import permissions` … `permissions.store.rule_database(...)`).
"""

from __future__ import annotations

from permissions.lazy import deferred

# typing.TYPE_CHECKING without importing typing: the sandbox helper (`python -S`) imports this package.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from permissions import audit as audit
    from permissions import report as report
    from permissions import rules as rules
    from permissions import shared_sqlite as shared_sqlite
    from permissions import shell as shell
    from permissions import store as store
    from permissions.decorator import (
        ApprovalCancelled,
        ApprovalDenied,
        ApprovalRejected,
        ApprovalSubject,
        ToolApprovalDecorator,
    )
    from permissions.gateway import PermissionGateway, PermissionOption, PermissionOutcome, PermissionRequest
    from permissions.modes import DEFAULT_MODE, MODES, ApprovalMode, parse_mode
    from permissions.policy import CallFacts, Decision, PathClass, decide
    from permissions.rules import RuleStore

_EXPORTS = {
    "ApprovalCancelled": "permissions.decorator",
    "ApprovalDenied": "permissions.decorator",
    "ApprovalRejected": "permissions.decorator",
    "ApprovalSubject": "permissions.decorator",
    "ToolApprovalDecorator": "permissions.decorator",
    "PermissionGateway": "permissions.gateway",
    "PermissionOption": "permissions.gateway",
    "PermissionOutcome": "permissions.gateway",
    "PermissionRequest": "permissions.gateway",
    "DEFAULT_MODE": "permissions.modes",
    "MODES": "permissions.modes",
    "ApprovalMode": "permissions.modes",
    "parse_mode": "permissions.modes",
    "CallFacts": "permissions.policy",
    "Decision": "permissions.policy",
    "PathClass": "permissions.policy",
    "decide": "permissions.policy",
    "RuleStore": "permissions.rules",
}

# A literal list, so that tools see the re-exports (tests/test_import_contract.py checks it matches _EXPORTS).
__all__ = [
    "ApprovalCancelled",
    "ApprovalDenied",
    "ApprovalMode",
    "ApprovalRejected",
    "ApprovalSubject",
    "CallFacts",
    "DEFAULT_MODE",
    "Decision",
    "MODES",
    "PathClass",
    "PermissionGateway",
    "PermissionOption",
    "PermissionOutcome",
    "PermissionRequest",
    "RuleStore",
    "ToolApprovalDecorator",
    "decide",
    "parse_mode",
]

# Submodules loaded on first use by the modules that defer them (not re-exported names).
_SUBMODULES = ("audit", "report", "rules", "shared_sqlite", "shell", "store")

_LAZY: dict[str, str | tuple[str, str]] = {
    **{name: (module, name) for name, module in _EXPORTS.items()},
    **{name: f"permissions.{name}" for name in _SUBMODULES},
}

if not TYPE_CHECKING:
    __getattr__ = deferred(globals(), _LAZY)
