"""Pure permission decisions for gatewright.

This package imports neither `runtime` nor `acp_server`: it works on a small structural view of a tool call
(`CallFacts`) and returns frozen decisions. The approval decorator and the gateway protocol live here too, because
they are the seam every host plugs into.
"""

from permissions.decorator import ApprovalCancelled, ApprovalRejected, ToolApprovalDecorator
from permissions.gateway import (
    PermissionGateway,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
)
from permissions.modes import DEFAULT_MODE, MODES, ApprovalMode, parse_mode
from permissions.policy import CallFacts, Decision, PathClass, decide
from permissions.rules import RuleStore

__all__ = [
    "DEFAULT_MODE",
    "MODES",
    "ApprovalCancelled",
    "ApprovalMode",
    "ApprovalRejected",
    "CallFacts",
    "Decision",
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
