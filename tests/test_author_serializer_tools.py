"""A tool whose arguments a DRF serializer validates (``@mcp_tools.tool(serializer=...)``) validates them
as a DRF view would: in a thread (a relational field's queryset, a ``UniqueValidator``, query the
database) and with the caller in the serializer's context (``context["request"].user``, which
``HiddenField(default=CurrentUserDefault())`` reads, and ``context["user"]``).

Found by the author review: the serializer ran on the event loop without a context, so a
``PrimaryKeyRelatedField(queryset=...)`` failed every call with ``SynchronousOnlyOperation``, and a
``CurrentUserDefault`` with ``KeyError: 'request'``: each a JSON-RPC ``-32603 Internal error`` (not
even a tool error), in both eras.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, User
from rest_framework import serializers
from rest_framework.authtoken.models import Token

from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import argument_errors, call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class AssignSerializer(serializers.Serializer):
    group = serializers.PrimaryKeyRelatedField(queryset=Group.objects.all())
    owner = serializers.HiddenField(default=serializers.CurrentUserDefault())
    note = serializers.CharField(required=False, default="")

    def validate_note(self, value: str) -> str:
        return f"{value} (by {self.context['request'].user.username}, {self.context['user'].username})"


def assign(group: Group, owner: User, note: str) -> str:
    return f"{owner.username} -> {group.name}: {note}"


@pytest.fixture(autouse=True)
def assign_tool() -> Iterator[None]:
    with registry.registered_temporarily(make_tool(assign, serializer=AssignSerializer)):
        yield


def _user_group_token() -> tuple[int, str]:
    user = User.objects.create_user("author_ser", password="x")
    return Group.objects.create(name="author-admins").pk, Token.objects.create(user=user).key


async def call(arguments: dict[str, Any], token: str) -> dict[str, Any]:
    return (await call_modern(APP, "tools/call", {"name": "assign", "arguments": arguments}, token=token)).json()


async def test_a_serializer_with_a_relation_and_the_current_user_validates_the_call() -> None:
    group_pk, token = await sync_to_async(_user_group_token)()
    body = await call({"group": group_pk, "note": "hi"}, token)
    assert body.get("result", {}).get("content") == [
        {"type": "text", "text": "author_ser -> author-admins: hi (by author_ser, author_ser)"}], body


async def test_a_row_the_relation_does_not_find_is_an_argument_error() -> None:
    _, token = await sync_to_async(_user_group_token)()
    errors = argument_errors(await call({"group": 999999}, token))
    assert [(error["field"], error["type"]) for error in errors] == [("group", "does_not_exist")], errors


async def test_the_model_may_call_such_a_tool_inside_sampling() -> None:
    group_pk, token = await sync_to_async(_user_group_token)()

    async def delegate(ctx: ToolContext) -> str:
        answer = await ctx.sample("assign", tools=["assign"])
        return answer.text

    asked: list[Any] = []
    with registry.registered_temporarily(make_tool(delegate)):
        params: dict[str, Any] = {"name": "delegate", "arguments": {}}
        for turn in range(3):
            body = (await call_modern(APP, "tools/call", params, token=token, capabilities={"sampling": {"tools": {}}})).json()
            result = body["result"]
            if result.get("resultType") != "input_required":
                break
            key, request = next(iter(result["inputRequests"].items()))
            asked.append(request["params"]["messages"][-1])
            content: Any = ([{"type": "tool_use", "id": "u1", "name": "assign", "input": {"group": group_pk}}] if turn == 0
                            else {"type": "text", "text": "done"})
            answer = {"role": "assistant", "model": "m", "content": content, "stopReason": "toolUse" if turn == 0 else "endTurn"}
            params = {**params, "inputResponses": {key: answer}, "requestState": result["requestState"]}
    assert result["content"] == [{"type": "text", "text": "done"}], body
    tool_result = asked[1]["content"][0]
    assert tool_result["content"][0]["text"].startswith("author_ser -> author-admins"), tool_result
    assert not tool_result.get("isError"), tool_result




# -- a serializer whose validated data the function cannot take is refused when the tool is made
class NoteSerializer(serializers.Serializer):
    name = serializers.CharField()
    note = serializers.CharField(required=False)
    title = serializers.CharField(source="heading", required=False)
    shown = serializers.CharField(read_only=True)


def greet_all(name: str, note: str = "", heading: str = "") -> str:
    return f"{name} {note} {heading}"


def greet_any(name: str, **rest: Any) -> str:
    return name


def greet_without_note(name: str, heading: str = "") -> str:
    return name


def greet_needing_more(name: str, note: str, heading: str, extra: int) -> str:
    return name


def test_a_function_that_takes_the_serializers_data_is_a_tool() -> None:
    for fn in (greet_all, greet_any):
        assert set(make_tool(fn, serializer=NoteSerializer).input.schema["properties"]) == {"name", "note", "title"}


@pytest.mark.parametrize("fn, missing", [(greet_without_note, "'note'"), (greet_needing_more, "'extra'")])
def test_a_function_that_cannot_take_the_serializers_data_is_refused(fn: Any, missing: str) -> None:
    # It registered; then every call that sent the optional "note" (or every call at all, for a
    # required parameter no field gives) was "Internal error" (an unexpected or missing keyword argument).
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=missing):
        make_tool(fn, serializer=NoteSerializer)


# -- a serializer whose validate() reshapes its data: the function takes what validate() returns
class SignupSerializer(serializers.Serializer):
    password = serializers.CharField()
    password2 = serializers.CharField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["password"] != attrs.pop("password2"):  # DRF's usual confirmation field: not the function's
            raise serializers.ValidationError("The passwords differ.")
        attrs["strength"] = len(attrs["password"])  # and one it adds
        return attrs


def signup(password: str, strength: int) -> str:
    return f"signed up, strength {strength}"


async def test_a_serializer_whose_validate_pops_and_adds_keys_is_a_tool_whose_calls_work() -> None:
    # The parameter check stopped the project with ImproperlyConfigured ("no parameter for 'password2'"):
    # the function takes validate()'s result, which has no password2 and has a strength (found by the revB review).
    with registry.registered_temporarily(make_tool(signup, serializer=SignupSerializer)):
        answer = (await call_modern(APP, "tools/call", {"name": "signup", "arguments": {"password": "abc", "password2": "abc"}})).json()
        assert answer["result"]["content"][0]["text"] == "signed up, strength 3"
        refused = (await call_modern(APP, "tools/call", {"name": "signup", "arguments": {"password": "abc", "password2": "x"}})).json()
        assert "The passwords differ." in str(refused)
