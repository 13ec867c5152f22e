"""What may be asked, and how answers are read: ACP forms (`runtime.elicitation`), the ACP asker's capabilities and
answers (`acp_server.elicitation`), `ask_user`'s forms and results, and an MCP server's question whose call ends.

Provenance: ACP `ElicitationSchema` / `ElicitationPropertySchema` (flat object; string with enum/oneOf/format, number,
integer, boolean, multi-select array of strings), `ElicitationContentValue`, `ClientCapabilities.elicitation` (a mode
is advertised only by a non-null object); MCP 2025-06-18 `enumNames`; the reject-and-continue option's reason.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_server.elicitation import AcpElicitor, read_answer
from acp_server.protocol.schema import ClientCapabilities
from runtime.elicitation import Answer, CannotAsk, clean_content, clean_form_schema, url_problem
from runtime.tools.builtin.ask_user import answer_text, question_form
from tests.support.acp_schema import _check
from tests.support.mcp_helpers import harness, stdio_entry
from tests.support.sandbox_helpers import eventually

pytestmark = [pytest.mark.timeout(60)]
async_test = pytest.mark.anyio


def form(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


# ---- requested schemas ----------------------------------------------------------------------------------------------
ACCEPTED = [
    form(name={"type": "string", "title": "Name", "minLength": 1, "maxLength": 50, "pattern": "^[a-z]+$"}),
    form(mail={"type": "string", "format": "email", "default": "a@b.c"}),
    form(color={"type": "string", "enum": ["red", "green"]}),
    form(color={"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]}),
    form(n={"type": "integer", "minimum": 0, "maximum": 9, "default": 3}, x={"type": "number", "minimum": 0.5}),
    form(ok={"type": "boolean", "default": False, "description": "Sure?"}),
    form(tags={"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "default": ["a"]}),
    form(tags={"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}}),
    {"type": "object", "title": "T", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"properties": {}},
]


@pytest.mark.parametrize("schema", ACCEPTED, ids=range(len(ACCEPTED)))
def test_a_flat_form_of_acp_kinds_passes_and_what_is_sent_is_a_valid_acp_schema(schema):
    cleaned = clean_form_schema(schema)
    assert cleaned["type"] == "object" and set(cleaned["properties"]) == set(schema["properties"])
    assert _check("ElicitationSchema", cleaned) == []


REFUSED = [
    ("not an object", ["a"]),
    ("an array schema", {"type": "array"}),
    ("nested object", form(address={"type": "object", "properties": {"street": {"type": "string"}}})),
    ("free list", form(tags={"type": "array", "items": {"type": "string"}})),
    ("untyped field", form(a={"description": "what"})),
    ("union type", form(a={"type": ["string", "null"]})),
    ("required unknown field", {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
    ("bad enum", form(a={"type": "string", "enum": [1, 2]})),
    ("negative length", form(a={"type": "string", "maxLength": -1})),
    ("boolean as number", form(a={"type": "number", "minimum": True})),
    ("float for integer", form(a={"type": "integer", "maximum": 1.5})),
    ("too many fields", form(**{f"f{i}": {"type": "string"} for i in range(40)})),
]


@pytest.mark.parametrize(("why", "schema"), REFUSED, ids=[w for w, _ in REFUSED])
def test_a_form_acp_cannot_hold_is_refused_with_a_reason(why, schema):
    with pytest.raises(CannotAsk) as err:
        clean_form_schema(schema)
    assert err.value.reason


def test_unknown_keywords_are_dropped_and_mcp_enum_names_become_titled_choices():
    cleaned = clean_form_schema(
        {
            "$schema": "x",
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"], "x-ui": "radio"},
                "host": {"type": "string", "format": "hostname"},
            },
        }
    )
    assert cleaned == {
        "type": "object",
        "properties": {
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            "host": {"type": "string"},
        },
    }


def test_a_format_that_is_not_a_name_is_dropped_like_an_unknown_one_instead_of_crashing_the_question():
    """An MCP server's `"format": []` raised TypeError (a list is no key of the known formats) out of the cleaner."""
    for odd in ([], {}, 3, None):
        cleaned = clean_form_schema(form(a={"type": "string", "format": odd}))
        assert cleaned["properties"]["a"] == {"type": "string"}


# ---- answers ---------------------------------------------------------------------------------------------------------
SCHEMA = form(
    name={"type": "string"},
    n={"type": "integer"},
    x={"type": "number"},
    ok={"type": "boolean"},
    tags={"type": "array", "items": {"type": "string", "enum": ["a"]}},
)


def test_accepted_content_keeps_the_forms_fields_of_the_right_kind_and_drops_the_rest():
    content = {"name": "Ada", "n": 3, "x": 1.5, "ok": True, "tags": ["a"], "extra": "dropped", "name2": 1}
    assert clean_content(content, SCHEMA) == {"name": "Ada", "n": 3, "x": 1.5, "ok": True, "tags": ["a"]}
    assert clean_content(None, SCHEMA) == {}


@pytest.mark.parametrize(
    "content", [{"n": True}, {"n": "3"}, {"ok": 1}, {"tags": [1]}, {"name": ["a"]}, ["Ada"], "Ada"]
)
def test_content_of_the_wrong_kind_is_not_used(content):
    assert clean_content(content, SCHEMA) is None


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "approve"},
        {"action": "ACCEPT"},
        {},
        None,
        [],
        "accept",
        {"action": "accept", "content": {"n": "three"}},
        {"action": "accept", "content": "Ada"},
    ],
)
def test_an_unusable_answer_is_taken_as_cancelled_never_as_accepted(answer):
    assert read_answer(answer, SCHEMA) == Answer("cancel")


def test_the_three_actions_are_read_as_they_are():
    assert read_answer({"action": "accept", "content": {"name": "Ada"}}, SCHEMA) == Answer("accept", {"name": "Ada"})
    assert read_answer({"action": "decline"}, SCHEMA) == Answer("decline")
    assert read_answer({"action": "cancel", "content": {"name": "x"}}, SCHEMA) == Answer("cancel")
    assert read_answer({"action": "accept"}, None) == Answer("accept")


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "file:///etc/passwd",
        "https://github.com@evil.example/",
        "https://user:pw@host/",
        "https:///nohost",
        "https://a b",
        "",
        "ftp://x/",
        "https://x/\x00",
    ],
)
def test_only_plain_web_addresses_are_put_in_front_of_the_user(url):
    assert url_problem(url) is not None


def test_a_plain_web_address_is_fine():
    assert url_problem("https://login.example.com/device?code=1") is None
    assert url_problem("http://127.0.0.1:8080/cb") is None


# ---- what the client advertised -------------------------------------------------------------------------------------
@pytest.mark.req("acp:elicitation:only-if-advertised")
@pytest.mark.parametrize(
    ("caps", "modes"),
    [
        ({}, None),
        ({"elicitation": None}, None),
        ({"elicitation": {}}, None),
        ({"elicitation": True}, None),
        ({"elicitation": {"form": None, "url": None}}, None),
        ({"elicitation": {"form": True}}, None),
        ({"elicitation": {"form": {}}}, (True, False)),
        ({"elicitation": {"url": {}}}, (False, True)),
        ({"elicitation": {"form": {}, "url": {"_meta": {}}}}, (True, True)),
    ],
)
def test_an_asker_exists_only_for_the_modes_the_client_advertised_as_objects(caps, modes):
    asker = AcpElicitor.from_capabilities(None, "s", ClientCapabilities.from_wire(caps))  # type: ignore[arg-type]
    assert (None if asker is None else (asker.form, asker.url)) == modes


@async_test
@pytest.mark.req("acp:elicitation:only-if-advertised")
async def test_an_asker_never_sends_a_mode_the_client_did_not_advertise():
    class NoConnection:
        async def request(self, method: str, params: Any) -> Any:
            raise AssertionError(f"sent {method}")

    asker = AcpElicitor(NoConnection(), "s", form=False, url=True)  # type: ignore[arg-type]
    with pytest.raises(CannotAsk):
        await asker.ask_form("q", form(a={"type": "string"}))
    asker = AcpElicitor(NoConnection(), "s", form=True, url=False)  # type: ignore[arg-type]
    with pytest.raises(CannotAsk):
        await asker.ask_url("q", "https://x.example/", "e1")
    with pytest.raises(CannotAsk):  # a form ACP cannot hold is never sent either
        await asker.ask_form("q", form(a={"type": "object"}))


# ---- ask_user --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        {"question": "Why?"},
        {"question": "Which?", "options": ["a", "b"]},
        {"question": "Which?", "options": ["a"], "allowFreeText": False},
    ],
)
def test_ask_users_forms_are_valid_acp_forms(args):
    assert _check("ElicitationSchema", clean_form_schema(question_form(args))) == []


def test_ask_user_tells_the_model_plainly_what_the_user_did():
    assert answer_text(Answer("accept", {"answer": " use tabs "})) == "The user answered: use tabs"
    assert answer_text(Answer("accept", {"choice": "a", "other": "and b"})) == "The user chose: a\nand added: and b"
    assert answer_text(Answer("accept", {})) == "The user sent the form without an answer."
    assert answer_text(Answer("decline")).startswith("The user declined to answer.")
    assert answer_text(Answer("cancel")) == "The user dismissed the question without answering."


# ---- an MCP server's question whose call ends ------------------------------------------------------------------------
class WaitingAsker:
    """Shows nothing and never answers: records each question and whether it was withdrawn."""

    form = True
    url = False

    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []
        self.withdrawn = 0

    async def ask_form(self, message: str, schema: Any, call_id: str | None = None) -> Answer:
        self.asked.append((message, call_id))
        try:
            await anyio.sleep_forever()
        finally:
            self.withdrawn += 1
        raise AssertionError("unreachable")

    async def ask_url(self, *a: Any, **kw: Any) -> Answer:
        raise CannotAsk("no")

    async def complete_url(self, elicitation_id: str) -> None:
        pass


@async_test
@pytest.mark.req("acp:elicitation:cancelled-with-the-turn")
async def test_a_question_still_open_when_its_mcp_call_ends_is_withdrawn_and_answered_cancel(tmp_path):
    asker = WaitingAsker()
    marker = tmp_path / "outcome"
    async with harness(str(tmp_path), asker=asker) as h:
        h.start([stdio_entry("t", env={"MCP_TEST_ERA": "legacy"})])
        await h.ready()
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(h.call, "mcp__t__ask", {"question": "Name?", "marker": str(marker)})
                assert await eventually(lambda: bool(asker.asked))
                tg.cancel_scope.cancel()  # the call ends (a timeout, a cancelled turn) while the question is open
        assert not scope.cancelled_caught
        assert await eventually(marker.exists)
    assert asker.asked == [("t (MCP server) asks: Name?", "call_1")]
    assert asker.withdrawn == 1
    assert marker.read_text() == "cancel"
