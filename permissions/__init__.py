"""Pure permission decisions for gatewright.

This package imports neither `runtime` nor `acp_server`: it works on a small structural view of a tool call
(`CallFacts`) and returns frozen decisions. The approval decorator and the gateway protocol live here too, because
they are the seam every host plugs into. Names are re-exported lazily so that importing `permissions.modes` on the
start-up path does not pull in anyio.
"""

from __future__ import annotations

import importlib
from typing import Any

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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'permissions' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
