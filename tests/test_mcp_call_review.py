"""``manage.py mcp_call``: arguments, form prompts and paged results as a terminal user meets them."""

from __future__ import annotations

import io
from typing import Literal

import pytest
from django.core.management import call_command
from django.utils import timezone
from pydantic import BaseModel, Field

import mcp_tools
from mcp_tools.registry import make_tool, registry

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str, typed: str = "") -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdin=io.StringIO(typed), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def take_note(note: str | None = None) -> str:
    """Echo an optional note."""
    return f"note={note!r}"


def test_an_optional_string_field_takes_the_text_as_typed() -> None:
    # --help: "VALUE is parsed as JSON unless the field is a string". `str | None` is a string
    # field (schema anyOf [string, null]); "123" must be sent as the text "123", not the number 123.
    with registry.registered_temporarily(make_tool(take_note)):
        out, _ = run("mcp_call", "take_note", "--arg", "note=123")
    assert out.strip() == "note='123'"


class Handle(BaseModel):
    handle: str = Field(min_length=3, description="Your handle")


async def ask_handle(ctx: mcp_tools.ToolContext) -> str:
    form = await ctx.elicit("Who are you?", schema=Handle, key="who")
    return f"hello {form.handle}"


def test_a_form_field_too_short_is_asked_again() -> None:
    # TerminalAnswerer.ask_field: "Prompt one form field until the typed text fits its schema".
    # "ab" breaks minLength 3: the operator should be asked again, not have the whole call end
    # with the server's -32602 "Invalid input response".
    with registry.registered_temporarily(make_tool(ask_handle)):
        out, _ = run("mcp_call", "ask_handle", typed="accept\nab\nabcd\n")
    assert out.rstrip().endswith("hello abcd")


class Slug(BaseModel):
    slug: str = Field(pattern="^[a-z]+$", description="Lower-case letters")


async def ask_slug(ctx: mcp_tools.ToolContext) -> str:
    form = await ctx.elicit("Which slug?", schema=Slug, key="slug")
    return f"slug {form.slug}"


def test_an_answer_the_server_refuses_is_asked_again() -> None:
    """Found by a first-hour review: a model's ``pattern`` is not in the form the command reads (the
    spec's forms have none), so "ABC" went to the server, whose -32602 ended the command and cancelled
    the call, though the round still waits for an answer (README: "A form answer the field's schema
    refuses (... no match for its pattern ...) is asked again")."""
    with registry.registered_temporarily(make_tool(ask_slug)):
        out, _ = run("mcp_call", "ask_slug", typed="accept\nABC\naccept\nabc\n")
    assert "The tool refused that answer" in out and out.rstrip().endswith("slug abc"), out


@pytest.fixture
def eight_events() -> None:
    from demo_site.operations.models import Event

    Event.objects.bulk_create(Event(kind="alert", message=f"event {i}", created_at=timezone.now()) for i in range(8))


def test_a_paged_result_does_not_end_silently_after_its_first_page(eight_events: None) -> None:
    out, err = run("mcp_call", "list_events", "--arg", "page_size=3")
    # Either every page is printed, or the operator is told there is more (and how to get it):
    # printing events 0-2 as if they were the whole answer misleads.
    assert "event 7" in out or "resumeToken" in out + err or "more" in err.lower(), (out, err)
    # Every page is followed and printed, in order (three pages of 3, 3 and 2 events).
    printed = [out.index(f'"event {i}"') for i in range(8)]
    assert printed == sorted(printed) and err == ""


def test_max_pages_stops_sooner_and_says_so(eight_events: None) -> None:
    out, err = run("mcp_call", "list_events", "--arg", "page_size=3", "--max-pages", "2")
    assert '"event 5"' in out and '"event 6"' not in out
    assert "list_events has more pages; printed 2" in err


def pick_size(size: Literal["1", "2"] | None = None) -> str:
    """Echo an optional choice of strings."""
    return f"size={size!r}"


def test_an_optional_choice_of_strings_takes_the_text_as_typed() -> None:
    # anyOf [{enum: ["1", "2"]}, null]: "1" is the choice "1", not the number 1 (which the server refuses).
    with registry.registered_temporarily(make_tool(pick_size)):
        out, _ = run("mcp_call", "pick_size", "--arg", "size=1")
    assert out.strip() == "size='1'"


class Toppings(BaseModel):
    toppings: list[Literal["cheese", "ham", "olives"]] = Field(min_length=2, description="Pick two or more")


async def ask_toppings(ctx: mcp_tools.ToolContext) -> str:
    form = await ctx.elicit("What on it?", schema=Toppings, key="toppings")
    return "+".join(form.toppings)


def test_a_form_array_with_too_few_items_is_asked_again() -> None:
    with registry.registered_temporarily(make_tool(ask_toppings)):
        out, _ = run("mcp_call", "ask_toppings", typed="accept\ncheese\ncheese,olives\n")
    assert "field 'toppings': ['cheese'] is too short" in out, out
    assert out.rstrip().endswith("cheese+olives")


def halve(x: float) -> float:
    """Half of x."""
    return x / 2


@pytest.mark.parametrize("typed", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_number_json_does_not_have_is_refused_not_a_database_traceback(typed: str) -> None:
    """Found by the stdio review: ``mcp_call halve --arg x=NaN`` (or ``--json-args '{"x": Infinity}'``)
    read the value with json.loads, which takes NaN, Infinity and 1e400 (the wire refuses them, -32700);
    a call that writes a row (RECORD_ALL_CALLS, a slow or suspending call) then failed with the
    database's IntegrityError traceback (SQLite: CHECK constraint failed: JSON_VALID("arguments"))."""
    from django.conf import settings
    from django.core.management.base import CommandError
    from django.test import override_settings

    with registry.registered_temporarily(make_tool(halve)):
        with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "RECORD_ALL_CALLS": True}):
            with pytest.raises(CommandError, match="valid number"):
                run("mcp_call", "halve", "--arg", f"x={typed}")
            with pytest.raises(CommandError, match="--json-args is not valid JSON"):
                run("mcp_call", "halve", "--json-args", f'{{"x": {typed}}}')
