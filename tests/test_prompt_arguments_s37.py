"""A prompt's parameters are read as their type hints say. Prompt arguments are strings on the wire
(``prompts/get``): a prompt's ``n: int`` got ``"5"``, ``"abc"`` reached it too, a ``Literal["py",
"js"]`` took ``"rust"``, and ``f"{n + 1}"`` ended in -32603. Found by a review."""

from __future__ import annotations

import datetime
import enum
from typing import Any, Literal

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_tools import prompt
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class Lang(enum.Enum):
    PY = "py"
    JS = "js"


@pytest.fixture
def typed_prompt() -> Any:
    @prompt(name="s37_typed")
    def s37_typed(n: int, flag: bool = False, lang: Literal["py", "js"] = "py", ratio: float | None = None,
                  kind: Lang = Lang.PY, text: str = "") -> str:
        return repr((n + 1, flag, lang, ratio, kind, text))

    yield
    registry.unregister_prompt("s37_typed")


async def get(arguments: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = (await call_modern(APP, "prompts/get", {"name": "s37_typed", "arguments": arguments})).json()
    return body


async def test_a_prompts_arguments_are_read_as_their_hints_say(typed_prompt: Any) -> None:
    body = await get({"n": "5", "flag": "true", "lang": "js", "ratio": "0.5", "kind": "js", "text": "7"})
    text = body["result"]["messages"][0]["content"]["text"]
    assert text == repr((6, True, "js", 0.5, Lang.JS, "7")), body


async def test_defaults_stay_the_functions_own(typed_prompt: Any) -> None:
    body = await get({"n": "1"})
    assert body["result"]["messages"][0]["content"]["text"] == repr((2, False, "py", None, Lang.PY, "")), body


@pytest.mark.parametrize(("arguments", "field"), [
    ({"n": "abc"}, "n"),
    ({"n": "1", "flag": "maybe"}, "flag"),
    ({"n": "1", "lang": "rust"}, "lang"),
    ({"n": "1", "kind": "rust"}, "kind"),
    ({"n": "1", "ratio": "x"}, "ratio"),
])
async def test_a_value_its_hint_refuses_is_invalid_params_naming_the_argument(typed_prompt: Any, arguments: dict[str, str],
                                                                              field: str) -> None:
    body = await get(arguments)
    assert body["error"]["code"] == -32602, body
    assert f"{field}:" in body["error"]["message"], body
    assert [error["field"] for error in body["error"]["data"]["errors"]] == [field], body


@pytest.mark.parametrize("annotation", [list[str], dict[str, int], Literal[1, 2], Literal[True], tuple[int, int]])
def test_a_hint_no_string_can_be_read_as_is_refused_at_registration(annotation: Any) -> None:
    def s37_bad(value: Any) -> str:
        return "x"

    s37_bad.__annotations__ = {"value": annotation, "return": str}
    with pytest.raises(ImproperlyConfigured, match=r"Prompt 's37_bad'.*'value'"):
        prompt(s37_bad)
    assert registry.get_prompt("s37_bad") is None


class IntLevel(enum.IntEnum):
    LOW = 1
    HIGH = 2


async def test_an_int_enum_and_optional_text_are_read() -> None:
    @prompt(name="s37_levels")
    def s37_levels(level: IntLevel, note: str | None = None, free=None) -> str:  # type: ignore[no-untyped-def]
        return repr((level, note, free))

    try:
        body = (await call_modern(APP, "prompts/get", {"name": "s37_levels", "arguments": {
            "level": "2", "note": "n", "free": "f"}})).json()
    finally:
        registry.unregister_prompt("s37_levels")
    assert body["result"]["messages"][0]["content"]["text"] == repr((IntLevel.HIGH, "n", "f")), body


# -- a review of prompts and resources ----------------------------------------------------------------


async def test_a_number_is_no_date_and_a_blank_optional_argument_is_none() -> None:
    """pydantic read "1700000000" as a Unix timestamp for ``when: datetime | None`` and "0" as 1970-01-01 for a
    date (a prompt's date is ISO text, docs/protocol.md); "" for ``n: int | None`` (what a form client sends for a
    field the user cleared) was -32602 instead of the default None."""
    @prompt(name="s37_dates")
    def s37_dates(when: datetime.datetime | None = None, day: datetime.date | None = None, n: int | None = None) -> str:
        return repr((when, day, n))

    try:
        refused = (await call_modern(APP, "prompts/get", {"name": "s37_dates", "arguments": {"when": "1700000000"}})).json()
        refused_day = (await call_modern(APP, "prompts/get", {"name": "s37_dates", "arguments": {"day": "0"}})).json()
        blank = (await call_modern(APP, "prompts/get", {"name": "s37_dates", "arguments": {"n": "", "day": "2026-11-27"}})).json()
    finally:
        registry.unregister_prompt("s37_dates")
    assert refused["error"]["code"] == -32602 and "ISO" in refused["error"]["message"], refused
    assert refused_day["error"]["code"] == -32602, refused_day
    assert blank["result"]["messages"][0]["content"]["text"] == repr((None, datetime.date(2026, 11, 27), None)), blank


def _positional(a: str, /) -> str:
    return a


def _generated(a: str) -> Any:
    yield a


@pytest.mark.parametrize(("register", "why"), [
    (lambda: prompt(name="s37_bad")(_positional), "positional-only"),
    (lambda: prompt(name="s37_bad")(_generated), "generator"),
    (lambda: prompt(name="s37_bad", title=5)(lambda: "x"), "title must be a string"),
    (lambda: __import__("mcp_tools").resource("s37://bad", annotations={"priority": "high"})(lambda: "x"), "annotations"),
    (lambda: __import__("mcp_tools").resource("s37://bad", mime_type=5)(lambda: "x"), "mime_type must be a string"),
    (lambda: __import__("mcp_tools").resource("s37://bad", title=5)(lambda: "x"), "title must be a string"),
    (lambda: __import__("mcp_tools").resource("s37://bad/{a}")(_positional), "positional-only"),
], ids=["prompt-positional-only", "prompt-generator", "prompt-title", "resource-annotations", "resource-mime-type",
        "resource-title", "template-positional-only"])
def test_what_the_clients_refuse_or_every_call_would_fail_is_refused_at_registration(register: Any, why: str) -> None:
    """Found by a review of prompts and resources: each registered, and ``manage.py check`` said nothing; the
    official client then failed every prompts/list or resources/list page holding it, or every prompts/get
    was -32603 (positional-only). Tools refuse the same (registry._check_tool_options)."""
    with pytest.raises(ImproperlyConfigured, match=why):
        register()
    assert registry.get_prompt("s37_bad") is None



async def test_a_number_still_reads_as_the_other_branch_of_a_union_with_a_date() -> None:
    """The fix above refused "5" for ``since: int | date`` (it looked for a date anywhere in the type, and built the
    argument's JSON schema on every call; a review of the fix): only a number that became a date is refused."""

    @prompt(name="s37_since")
    def s37_since(since: int | datetime.date, tag: Literal["1", "2"] | datetime.date = "1") -> str:
        return repr((since, tag))

    try:
        body = (await call_modern(APP, "prompts/get", {"name": "s37_since", "arguments": {"since": "5", "tag": "2"}})).json()
        dated = (await call_modern(APP, "prompts/get", {"name": "s37_since", "arguments": {"since": "2026-11-27"}})).json()
    finally:
        registry.unregister_prompt("s37_since")
    assert body["result"]["messages"][0]["content"]["text"] == repr((5, "2")), body
    assert dated["result"]["messages"][0]["content"]["text"] == repr((datetime.date(2026, 11, 27), "1")), dated


def test_resource_annotations_are_checked_as_the_json_they_go_out_as() -> None:
    """``audience`` as a tuple went out as a JSON list, which clients read; the check above refused it, and the
    project no longer started (a review of the fix)."""
    import mcp_tools

    mcp_tools.resource("s37://tuple", annotations={"audience": ("user", "assistant"), "priority": 1})(lambda: "x")
    try:
        found = registry.find_resource("s37://tuple")
        assert found is not None
    finally:
        registry.unregister_resource("s37://tuple")
