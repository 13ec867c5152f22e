"""`ask_user`: the model asks the user a question and gets the answer as its result.

The question goes through the session's `UserAsker` (`runtime.elicitation`) as a small form: an open question is one
text field; with `options` it is a single choice, plus a text field for an answer in the user's own words unless
`allowFreeText` is false. The host exposes the tool only when it can show forms (an ACP editor that advertises
`elicitation.form`); without one the call is a `TOOL_ERROR` saying so. It changes nothing, so approval treats it as
a read: it runs without a question in every mode but `manual`, where every call asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.elicitation import Answer, CannotAsk
from runtime.tools.base import Effect, Tool, ToolContext, ToolFailure, ToolResult
from runtime.workspace import Workspace

TITLE_CHARS = 80
ANSWER_CHARS = 4000


def question_form(args: Mapping[str, Any]) -> dict[str, Any]:
    """The form for one call's question (an ACP/MCP restricted object schema)."""
    options = [str(o) for o in args.get("options") or ()]
    if not options:
        return {
            "type": "object",
            "properties": {"answer": {"type": "string", "title": "Your answer"}},
            "required": ["answer"],
        }
    props: dict[str, Any] = {"choice": {"type": "string", "title": "Choose one", "enum": options}}
    if args.get("allowFreeText", True):
        props["other"] = {"type": "string", "title": "Or answer in your own words"}
        return {"type": "object", "properties": props}
    return {"type": "object", "properties": props, "required": ["choice"]}


def answer_text(answer: Answer) -> str:
    """What the model reads."""
    if answer.action == "decline":
        return (
            "The user declined to answer. Do not ask the same question again; go on with what you know, or stop "
            "and say what you need."
        )
    if answer.action == "cancel":
        return "The user dismissed the question without answering."
    content = answer.content or {}
    said = [
        str(content[k]).strip()[:ANSWER_CHARS]
        for k in ("choice", "answer", "other")
        if isinstance(content.get(k), str) and content[k].strip()
    ]
    if not said:
        return "The user sent the form without an answer."
    if len(said) == 1:
        return f"The user answered: {said[0]}"
    return f"The user chose: {said[0]}\nand added: {said[1]}"


class AskUserTool(Tool):
    name = "ask_user"
    kind = "other"
    read_only_hint = True
    description = (
        "Ask the user a question and wait for the answer. Use it only when you cannot go on well without a decision "
        "or a fact only the user has (which of two approaches, a missing requirement, a value you cannot find). Ask "
        "one short, self-contained question; give `options` when the answer is one of a few choices. Not for "
        "permission to run a tool (approvals are asked by themselves), and not for what the other tools can find."
    )

    def effect(self, args: Mapping[str, Any]) -> Effect:
        return "read"

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        question = " ".join(str(args.get("question", "")).split())
        if len(question) > TITLE_CHARS:
            question = question[: TITLE_CHARS - 1] + "…"
        return f"Ask the user: {question}" if question else "Ask the user"

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        return "questions to the user"

    def rule_key(self, args: Mapping[str, Any], ws: Workspace) -> str:
        # Asking is not what a user approves case by case: one rule covers every question.
        return "ask_user"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        asker = ctx.asker
        if asker is None or not asker.form:
            raise ToolFailure(
                "the editor cannot show questions (it does not support ACP elicitation forms); go on "
                "without asking, or say in your reply what you need from the user",
                "CannotAsk",
            )
        question = str(args["question"]).strip()
        try:
            answer = await asker.ask_form(question, question_form(args), ctx.call_id)
        except CannotAsk as exc:
            raise ToolFailure(f"the question could not be shown: {exc.reason}", "CannotAsk") from None
        text = answer_text(answer)
        return ToolResult(
            text,
            content=({"type": "content", "content": {"type": "text", "text": text}},),
            raw_output={"action": answer.action, "content": dict(answer.content or {})},
        )
