"""``completion/complete`` answers ``total`` and ``hasMore`` truthfully, whether a completer lists every
match (a list) or only some (``mcp_tools.Completions``), as the demo's SKU completer does.

The demo cut its query at 100 SKUs and the answer's ``total`` was the length of what it returned: with
150 matches a client was told ``total: 100, hasMore: false``, that the list was complete."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import Completions, resource
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


async def complete(uri: str, value: str) -> dict[str, Any]:
    params = {"ref": {"type": "ref/resource", "uri": uri}, "argument": {"name": "sku", "value": value}}
    body = (await call_modern(McpEndpoint(), "completion/complete", params)).json()
    assert "error" not in body, body
    completion: dict[str, Any] = body["result"]["completion"]
    return completion


async def test_the_demo_s_sku_completer_says_there_are_more_than_it_sends() -> None:
    from demo_site.inventory.models import Product

    await sync_to_async(Product.objects.bulk_create)(
        [Product(sku=f"ZZ-{i:04d}", name=f"Product {i}", price=Decimal("1.00")) for i in range(150)])
    many = await complete("inventory://products/{sku}", "ZZ-")
    assert many["values"] == [f"ZZ-{i:04d}" for i in range(100)]
    assert many["hasMore"] is True and "total" not in many, many  # not counted: unknown, not 100
    few = await complete("inventory://products/{sku}", "ZZ-014")
    assert few == {"values": [f"ZZ-{i:04d}" for i in range(140, 150)], "hasMore": False}, few


@pytest.mark.parametrize(("found", "expected"), [
    (["a", "b", "c"], {"values": ["a", "b", "c"], "total": 3, "hasMore": False}),
    ([f"v{i}" for i in range(250)], {"values": [f"v{i}" for i in range(100)], "total": 250, "hasMore": True}),
    (Completions(["a", "b"], total=40), {"values": ["a", "b"], "total": 40, "hasMore": True}),
    (Completions(["a", "b"], has_more=True), {"values": ["a", "b"], "hasMore": True}),
    (Completions(["a", "b"]), {"values": ["a", "b"], "hasMore": False}),
    (Completions([f"v{i}" for i in range(120)]), {"values": [f"v{i}" for i in range(100)], "hasMore": True}),
    (Completions(["a"], total=0), {"values": ["a"], "total": 1, "hasMore": False}),  # never fewer than it found
    # One string is one match, not its characters; None is none (it was "None").
    ("abc", {"values": ["abc"], "total": 1, "hasMore": False}),
    (None, {"values": [], "total": 0, "hasMore": False}),
    (["a", None], {"values": ["a"], "total": 1, "hasMore": False}),
    (Completions("abc"), {"values": ["abc"], "hasMore": False}),  # type: ignore[arg-type]
], ids=["every-match", "every-match-past-100", "total-given", "more-without-count", "these-only", "cut-at-100", "total-too-small",
        "one-string", "none", "none-among-them", "completions-of-one-string"])
async def test_a_completer_says_what_it_knows(found: Any, expected: dict[str, Any]) -> None:
    resource("test://completed/{sku}", completions={"sku": lambda value, arguments: found})(lambda sku: sku)
    try:
        assert await complete("test://completed/{sku}", "") == expected
    finally:
        registry.unregister_resource("test://completed/{sku}")


@pytest.mark.parametrize("context", [0, "", [], False, -1, 1.5, {"arguments": 0}, {"arguments": []}, {"arguments": ""}],
                         ids=["zero", "empty-string", "empty-list", "false", "minus-one", "float", "arguments-zero",
                              "arguments-list", "arguments-empty-string"])
async def test_a_context_that_is_not_an_object_is_refused(context: Any) -> None:
    """Found by a review (hostile input): a falsy ``context`` (``0``, ``""``, ``[]``, ``false``) was taken
    as no context while ``-1`` was refused; each is refused alike."""
    params = {"ref": {"type": "ref/resource", "uri": "inventory://products/{sku}"}, "argument": {"name": "sku", "value": ""},
              "context": context}
    body = (await call_modern(McpEndpoint(), "completion/complete", params)).json()
    assert body["error"]["code"] == -32602 and '"context" must be an object' in body["error"]["message"], body


@pytest.mark.parametrize("context", [None, {}, {"arguments": None}, {"arguments": {}}], ids=["null", "empty", "arguments-null", "arguments-empty"])
async def test_an_empty_or_null_context_is_no_context(context: Any) -> None:
    params = {"ref": {"type": "ref/resource", "uri": "inventory://products/{sku}"}, "argument": {"name": "sku", "value": ""},
              "context": context}
    body = (await call_modern(McpEndpoint(), "completion/complete", params)).json()
    assert "completion" in body["result"], body


def complete_value_only(value: str) -> list[str]:
    return [f"{value}-1", f"{value}-2"]


async def complete_value_only_async(value: str) -> list[str]:
    return [f"{value}-a"]


@pytest.mark.parametrize(("completer", "expected"), [(complete_value_only, ["x-1", "x-2"]), (complete_value_only_async, ["x-a"])],
                         ids=["sync", "async"])
async def test_a_completer_written_with_the_value_alone_is_called_with_it(completer: Any, expected: list[str]) -> None:
    """Found by a first-hour review: ``def complete_color(value)`` (the README says only "a completer returns
    its matches") failed every completion with a TypeError, -32603, and nothing said so at registration."""
    resource("test://completed/{sku}", completions={"sku": completer})(lambda sku: sku)
    try:
        assert (await complete("test://completed/{sku}", "x"))["values"] == expected
    finally:
        registry.unregister_resource("test://completed/{sku}")


def test_a_completer_of_neither_form_or_a_template_variable_without_a_parameter_is_refused() -> None:
    """Found by reviews: a completer taking three parameters, and a template ``{ident}`` read by a function of
    ``id``, registered without a word and failed every completion / read with -32603."""
    from django.core.exceptions import ImproperlyConfigured

    from mcp_tools import prompt

    with pytest.raises(ImproperlyConfigured, match=r"the completer of 'sku' must take \(value, arguments\) or \(value\)"):
        resource("test://refused/{sku}", completions={"sku": lambda a, b, c: []})(lambda sku: sku)
    with pytest.raises(ImproperlyConfigured, match=r"Prompt 'refused_prompt': the completer of 'topic'"):
        prompt(name="refused_prompt", completions={"topic": lambda: []})(lambda topic: topic)

    def mismatch(id: str) -> str:
        return id

    with pytest.raises(ImproperlyConfigured, match=r"Resource 'test://mismatch/\{ident\}': its function has no parameter 'ident'"):
        resource("test://mismatch/{ident}")(mismatch)
    assert registry.get_template("test://mismatch/{ident}") is None and registry.get_template("test://refused/{sku}") is None
