"""A callable object (an instance of a class with ``__call__``) and a ``functools.partial`` register as a
tool, a prompt or a resource, as a function does: their hints make the schema, their function's docstring
the description, and a call runs them (sync or async).

Found by the author review: each failed at registration with ``AttributeError: 'Greeter' object has no
attribute '__qualname__'`` (or ``__name__``, or ``'functools.partial' object has no attribute ...``),
raised while the registry was building its own error message; no project using one could start.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

import mcp_tools
from mcp_tools import ToolContext
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class Greeter:
    """Greet someone.

    Args:
        name: Who to greet.
    """

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    def __call__(self, name: str) -> str:
        return f"{self.greeting}, {name}"


class AsyncGreeter:
    async def __call__(self, name: str, ctx: ToolContext) -> str:
        """Greet someone, asynchronously."""
        return f"hey {name} {isinstance(ctx, ToolContext)}"


def scaled(factor: int, value: int) -> int:
    """Scale a value.

    Args:
        value: The value to scale.
    """
    return factor * value


async def scaled_async(factor: int, value: int) -> int:
    """Scale a value, asynchronously."""
    return factor * value


CASES: list[tuple[Any, dict[str, Any], str, dict[str, Any], str]] = [
    # callable, options, expected name, arguments, expected text
    (Greeter("Hello"), {}, "Greeter", {"name": "Ada"}, "Hello, Ada"),
    (Greeter("Hi"), {"name": "author_hi"}, "author_hi", {"name": "Ada"}, "Hi, Ada"),
    (AsyncGreeter(), {"name": "author_hey"}, "author_hey", {"name": "Ada"}, "hey Ada True"),
    (functools.partial(scaled, 3), {}, "scaled", {"value": 2}, "6"),
    (functools.partial(scaled, factor=4), {"name": "author_by_four"}, "author_by_four", {"value": 2}, "8"),
    (functools.partial(scaled_async, 5), {"name": "author_by_five"}, "author_by_five", {"value": 2}, "10"),
]


@pytest.mark.parametrize("fn, options, name, arguments, text", CASES)
async def test_a_callable_object_or_a_partial_is_a_tool(fn: Any, options: dict[str, Any], name: str, arguments: dict[str, Any], text: str) -> None:
    tool = make_tool(fn, **options)
    assert tool.name == name
    assert set(tool.input.schema["properties"]) == set(arguments), tool.input.schema
    assert "partial(func" not in tool.description, tool.description  # functools.partial's own docstring is not the tool's
    with registry.registered_temporarily(tool):
        body = (await call_modern(APP, "tools/call", {"name": name, "arguments": arguments})).json()
    assert body["result"]["content"][0]["text"] == text, body


def test_their_docstrings_describe_them() -> None:
    assert make_tool(Greeter("Hello")).description == "Greet someone."
    assert make_tool(Greeter("Hello")).input.schema["properties"]["name"]["description"] == "Who to greet."
    assert make_tool(AsyncGreeter()).description == "Greet someone, asynchronously."
    partial = make_tool(functools.partial(scaled, 3))
    assert partial.description == "Scale a value." and partial.input.schema["properties"]["value"]["description"] == "The value to scale."


def test_a_second_registration_names_the_first_callable() -> None:
    with registry.registered_temporarily(make_tool(Greeter("Hello"), name="author_twice")):
        with pytest.raises(mcp_tools.AlreadyRegistered, match="author_twice"):
            mcp_tools.tool(name="author_twice")(functools.partial(scaled, 2))


def test_a_callable_whose_hints_do_not_resolve_is_refused_naming_it() -> None:
    class Broken:
        def __call__(self, name: "NoSuchType") -> str:  # type: ignore[name-defined]  # noqa: F821
            return ""

    with pytest.raises((TypeError, ImproperlyConfigured), match="NoSuchType"):
        make_tool(Broken(), name="author_broken")


async def test_a_prompt_and_a_resource_may_be_callables_too() -> None:
    class Topic:
        """Talk about a topic."""

        def __call__(self, topic: str) -> str:
            return f"about {topic}"

    mcp_tools.prompt(name="author_topic")(Topic())
    mcp_tools.resource("author-callable://{topic}", mime_type="text/plain")(Topic())
    mcp_tools.prompt(functools.partial(scaled, 2))
    try:
        prompts = {p["name"]: p for p in (await call_modern(APP, "prompts/list", {})).json()["result"]["prompts"]}
        assert prompts["author_topic"]["description"] == "Talk about a topic.", prompts["author_topic"]
        assert [a["name"] for a in prompts["scaled"]["arguments"]] == ["value"], prompts["scaled"]
        got = (await call_modern(APP, "prompts/get", {"name": "author_topic", "arguments": {"topic": "t"}})).json()
        assert got["result"]["messages"][0]["content"]["text"] == "about t", got
        read = (await call_modern(APP, "resources/read", {"uri": "author-callable://t"})).json()
        assert read["result"]["contents"][0]["text"] == "about t", read
    finally:
        registry.unregister_prompt("author_topic")
        registry.unregister_prompt("scaled")
        registry.unregister_resource("author-callable://{topic}")


class MathTools:
    """Tools grouped in a class, each a ``staticmethod`` under the decorator."""

    @staticmethod
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @staticmethod
    def mul(a: int, b: int) -> int:
        return a * b


@pytest.mark.parametrize("method, text", [("add", "5"), ("mul", "6")])
async def test_a_staticmethod_in_a_class_body_is_a_tool_async_or_not(method: str, text: str) -> None:
    # @mcp_tools.tool above @staticmethod: the decorator gets the staticmethod object. An async one was
    # taken for sync: its coroutine, never awaited, was the result ("does not match its output schema").
    tool = make_tool(MathTools.__dict__[method], name=f"author_math_{method}")
    assert tool.is_async is (method == "add")
    with registry.registered_temporarily(tool):
        body = (await call_modern(APP, "tools/call", {"name": tool.name, "arguments": {"a": 2, "b": 3}})).json()
    assert body["result"]["content"][0]["text"] == text, body
    assert not body["result"].get("isError"), body


class audited:  # noqa: N801 - a decorator, named as one
    """A decorator written as a class: the object it makes wraps the function (``functools.update_wrapper``)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


@audited
def audited_total(a: int, b: int = 2) -> dict[str, int]:
    """Add two numbers."""
    return {"total": a + b}


async def test_a_decorator_written_as_a_class_keeps_its_functions_schema() -> None:
    # Its hints were read from the class's __call__ (*args, **kwargs) since callable objects became tools:
    # "a" lost its type (any value went through: "2" too) and the tool its output schema and structuredContent
    # (found by the revB review; before, they were the wrapped function's).
    tool = make_tool(audited_total)
    assert tool.input.schema["properties"]["a"] == {"type": "integer"}, tool.input.schema
    assert tool.output is not None and tool.output.schema is not None
    with registry.registered_temporarily(tool):
        body = (await call_modern(APP, "tools/call", {"name": "audited_total", "arguments": {"a": 1}})).json()
        assert body["result"]["structuredContent"] == {"result": {"total": 3}}, body
        refused = (await call_modern(APP, "tools/call", {"name": "audited_total", "arguments": {"a": "1"}})).json()
        assert "error" in refused or refused["result"].get("isError"), refused
