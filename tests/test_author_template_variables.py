"""A resource template's variables are read as their parameters' hints say, as a prompt's arguments are:
``def product(pk: int)`` under ``"shop://products/{pk}"`` gets the integer 5 for ``shop://products/5``.

Found by the author review: the function got the string "5" whatever its hint said (``pk + 1`` was a
TypeError, -32603 "Internal error" to the client; a ``date`` variable was a str). A URI whose variable
the hint refuses (``shop://products/abc``) names no resource of that template: "Resource not found",
and a later template may serve it, as a Django path converter lets a later pattern match.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterator
from typing import Literal

import pytest
from django.core.exceptions import ImproperlyConfigured

import mcp_tools
from mcp_tools.registry import registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


class Shelf(enum.Enum):
    TOP = "top"
    LOW = "low"


def product(pk: int, day: datetime.date) -> str:
    return f"{pk + 1} {day.isoformat()}"


def shelf(shelf: Shelf, kind: Literal["a", "b"], ctx: mcp_tools.ToolContext | None = None) -> str:
    return f"{shelf.name} {kind}"


def product_by_slug(slug: str, rest: str) -> str:
    return f"slug {slug}"


#: In registration order: the typed template first, the untyped one for what it refuses.
TEMPLATES = {"author-shop://products/{pk}/{day}": product, "author-shop://shelves/{shelf}/{kind}": shelf,
             "author-shop://products/{slug}/{rest}": product_by_slug}


@pytest.fixture(autouse=True)
def typed_templates() -> Iterator[None]:
    for uri, fn in TEMPLATES.items():
        mcp_tools.resource(uri, mime_type="text/plain")(fn)
    try:
        yield
    finally:
        for uri in TEMPLATES:
            registry.unregister_resource(uri)


async def read(uri: str) -> dict:
    return (await call_modern(APP, "resources/read", {"uri": uri})).json()


async def test_a_template_variable_is_read_as_its_hint_says() -> None:
    got = await read("author-shop://products/5/2024-02-03")
    assert got["result"]["contents"][0]["text"] == "6 2024-02-03", got
    got = await read("author-shop://shelves/top/b")
    assert got["result"]["contents"][0]["text"] == "TOP b", got


async def test_a_value_the_hint_refuses_names_no_resource_of_that_template() -> None:
    got = await read("author-shop://shelves/middle/a")
    assert got.get("error", {}).get("message") == "Resource not found", got
    got = await read("author-shop://products/1700000000/1700000000")  # a number is no date here either
    assert got["result"]["contents"][0]["text"] == "slug 1700000000", got
    got = await read("author-shop://products/abc/2024-02-03")  # the later, untyped template serves it
    assert got["result"]["contents"][0]["text"] == "slug abc", got


def test_a_hint_no_uri_variable_can_be_read_as_is_refused_at_registration() -> None:
    with pytest.raises(ImproperlyConfigured, match="'ids'"):
        @mcp_tools.resource("author-shop://bulk/{ids}")
        def bulk(ids: list[int]) -> str:
            return ""
    assert registry.get_template("author-shop://bulk/{ids}") is None


class Slug(str):
    """A slug, as a project's own code may type one: a class pydantic has no schema for."""


def article(slug: Slug) -> str:
    return f"article {slug.upper()}"


async def test_a_variable_hinted_by_a_class_pydantic_cannot_read_stays_the_string_it_was() -> None:
    # Since variables were converted, such a template stopped the project (ImproperlyConfigured, "cannot be
    # read from the string a URI variable is"); it served its reads before, with the string (the revB review).
    mcp_tools.resource("author-blog://articles/{slug}", mime_type="text/plain")(article)
    try:
        got = await read("author-blog://articles/hello")
        assert got["result"]["contents"][0]["text"] == "article HELLO", got
    finally:
        registry.unregister_resource("author-blog://articles/{slug}")
