"""What a tool is registered with is checked when it is made, not when it is listed or called.

Found by reviews of the tool author's API and of the first hour: ``retry_on="ConnectionError"`` was taken
as the tuple of its characters (the worker's ``isinstance`` raised, the call stayed working and its
handler ran again at every takeover, 5 times); ``time_limit="10"`` failed every queueing (the client's
request held for good); ``description=5``, an icon without ``src`` or ``readOnlyHint: "yes"`` made the
official client refuse every ``tools/list``, so every call; ``permissions="app.perm"`` was 14 permissions of
one character; a positional-only parameter and a generator function registered, then every call was an
internal error. Each is ``ImproperlyConfigured`` naming the tool and what is wrong.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_tools.registry import make_tool


def plain(x: int = 1) -> int:
    return x


def positional(x: int, /) -> int:
    return x


def pages() -> Iterator[int]:
    yield 1


async def async_pages() -> AsyncIterator[int]:
    yield 1


@pytest.mark.parametrize(("fn", "options", "says"), [
    (plain, {"retry_on": "ConnectionError", "background": True}, "retry_on must be exception classes"),
    (plain, {"retry_on": (int,), "background": True}, "retry_on must be exception classes"),
    (plain, {"time_limit": "10", "background": True}, "time_limit must be a number of seconds above 0"),
    (plain, {"time_limit": -5, "background": True}, "time_limit must be a number of seconds above 0"),
    (plain, {"max_retries": -1}, "max_retries must be an integer >= 0"),
    (plain, {"max_retries": True}, "max_retries must be an integer >= 0"),
    (plain, {"retry_backoff": -1}, "retry_backoff must be a number of seconds >= 0"),
    (plain, {"description": 5}, "description must be a string"),
    (plain, {"title": ["x"]}, "title must be a string"),
    (plain, {"icons": [{"nosrc": 1}]}, "its icons are not what clients read"),
    (plain, {"icons": {"src": "x"}}, "icons must be a list of dicts"),
    (plain, {"icons": [{"src": "x", "sizes": "48x48"}]}, "its icons are not what clients read"),
    (plain, {"icons": [{"src": "x", "mimeType": 5}]}, "its icons are not what clients read"),
    (plain, {"annotations": {"readOnlyHint": "yes"}}, "its annotations readOnlyHint must be true or false"),
    (plain, {"annotations": ["readOnlyHint"]}, "annotations must be a dict"),
    (plain, {"meta": "x"}, "meta must be a dict"),
    (plain, {"permissions": "shop.view_order"}, "permissions must be a list of strings"),
    (plain, {"scopes": "mcp"}, "scopes must be a list of strings"),
    (positional, {}, "parameter 'x' is positional-only"),
    (pages, {"paginate": True}, "a generator function is no tool"),
    (async_pages, {}, "a generator function is no tool"),
], ids=["retry-on-string", "retry-on-not-exception", "time-limit-string", "time-limit-negative", "max-retries-negative",
        "max-retries-bool", "backoff-negative", "description-int", "title-list", "icon-without-src", "icons-not-list", "icon-sizes-not-list", "icon-mime-not-string",
        "hint-not-bool", "annotations-not-dict", "meta-not-dict", "permissions-string", "scopes-string", "positional-only",
        "generator", "async-generator"])
def test_a_mistake_is_refused_when_the_tool_is_made(fn: Any, options: dict[str, Any], says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=f"Tool {fn.__name__!r} .*{says}"):
        make_tool(fn, **options)


def test_what_is_right_is_taken_as_given() -> None:
    """Found by a diff review of the checks: permissions given as a generator were used up by the check and
    the tool was made with none (open to everyone); a lazy translation for the title stopped the project
    from starting; retry_backoff=True, icons as a tuple and an mcp_types.ToolAnnotations were refused."""
    import mcp_types
    from django.utils.translation import gettext_lazy

    tool = make_tool(plain, permissions=(name for name in ["shop.view_order"]), scopes=map(str, ["mcp"]),
                     title=gettext_lazy("Plain"), description=gettext_lazy("Says it plainly."), retry_backoff=True,
                     icons=({"src": "https://example.com/i.png"},), annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    assert tool.permissions == ("shop.view_order", "oauth-scope:mcp"), tool.permissions
    assert tool.scopes == ("mcp",)
    # A second diff review: the models went out as their text, and the official client refused every tools/list.
    assert tool.annotations == {"readOnlyHint": True} and tool.icons == [{"src": "https://example.com/i.png"}]
    modelled = make_tool(plain, icons=[mcp_types.Icon(src="https://example.com/j.png", mime_type="image/png")],
                         annotations={"readOnlyHint": True, "destructiveHint": None})
    assert modelled.icons == [{"src": "https://example.com/j.png", "mimeType": "image/png"}], modelled.icons
    assert modelled.annotations == {"readOnlyHint": True}  # a hint given as None is left out, not sent as null


def test_a_resource_or_prompt_given_one_string_for_its_permissions_is_refused() -> None:
    from mcp_tools import prompt, resource

    with pytest.raises(ImproperlyConfigured, match=r"Resource 'test://perm': permissions must be a list of strings"):
        resource("test://perm", permissions="shop.view_order")(lambda: "x")
    with pytest.raises(ImproperlyConfigured, match=r"Prompt 'perm_prompt': permissions must be a list of strings"):
        prompt(name="perm_prompt", permissions="shop.view_order")(lambda: "x")


def test_what_is_right_is_taken() -> None:
    tool = make_tool(plain, background=True, retry_on=ConnectionError, time_limit=10, max_retries=2, retry_backoff=0.5,
                     annotations={"readOnlyHint": True, "title": "Plain"}, icons=[{"src": "https://example.com/i.png", "sizes": ["48x48"]}],
                     permissions=["shop.view_order"], scopes=["mcp"], meta={"k": 1}, description="d", title="t")
    assert tool.retry_on == (ConnectionError,) and tool.time_limit == 10 and tool.scopes == ("mcp",)


def test_a_page_whose_cursor_is_no_json_value_says_so_where_it_is_made() -> None:
    """Found by a review of the tool author's API: a Page whose next_cursor was a datetime failed where the
    resume token was sealed, and the client was told the result "does not match its output schema"."""
    import datetime

    from mcp_tools import Page

    with pytest.raises(TypeError, match="Page.next_cursor must be a JSON value"):
        Page([1], next_cursor=datetime.datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="Page.next_cursor must be a JSON value"):
        Page([1], next_cursor={"after": float("nan")})
    assert Page([1], next_cursor={"after": "2026-01-01T00:00:00", "id": 7}).next_cursor["id"] == 7
