"""A model action whose write the database refuses as a value its column cannot hold answers a tool
error, as a toolset's create or update does (docs/model-tools.md: "A model action's write the database
refuses answers the same way"). Found by a review: ``bump(by=1099511627776)`` on an integer column was
PostgreSQL's DataError ("integer out of range"), and a value past 64 bits SQLite's driver's
OverflowError ("Python int too large to convert to SQLite INTEGER"): an internal error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, models
from django.test.utils import isolate_apps

import mcp_tools
from mcp_tools.modeltools.actions import unregister_model_action
from tests.asgi_client import call_modern

pytestmark = pytest.mark.django_db(transaction=True)


def bump(self: Any, by: int) -> None:
    """Raise the score."""
    self.score += by
    self.save()


def explode(self: Any, factor: float) -> int:
    """A bug of the method's own: float arithmetic that overflows in Python."""
    return int(factor ** 5000)


@pytest.fixture
def scored() -> Iterator[Any]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("ScoredRow", (models.Model,), {"__module__": __name__, "Meta": meta,
                                                         "score": models.IntegerField(default=0), "bump": bump,
                                                         "explode": explode})
        with connection.schema_editor() as editor:
            editor.create_model(model)
        action = mcp_tools.register_model_action(model, "bump", name="writerange.scored.bump", permissions=[])
        exploding = mcp_tools.register_model_action(model, "explode", name="writerange.scored.explode", permissions=[])
        try:
            yield model
        finally:
            unregister_model_action(action)
            unregister_model_action(exploding)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from demo_site.asgi import application

    body: dict[str, Any] = (await call_modern(application, "tools/call", {"name": name, "arguments": arguments})).json()
    return body


async def test_a_model_action_s_write_past_its_column_is_a_refused_write(scored: Any) -> None:
    pk = await sync_to_async(lambda: scored.objects.create(score=1).pk)()
    done = await call("writerange.scored.bump", {"id": pk, "by": 1})
    assert done["result"].get("isError") is not True, done
    answer = await call("writerange.scored.bump", {"id": pk, "by": 2**70})  # past every database's integer
    assert "error" not in answer, answer  # not an internal error
    result = answer["result"]
    assert result.get("isError") is True, result
    assert "outside what its column holds" in str(result["structuredContent"]), result
    assert await sync_to_async(lambda: scored.objects.get(pk=pk).score)() == 2  # nothing written


async def test_an_overflow_of_the_method_s_own_code_is_its_bug_not_a_refused_write(scored: Any) -> None:
    """The fix above answered an OverflowError of the method's own arithmetic "refused by the database: a value
    is outside what its column holds", blaming the caller's values, with nothing logged (a review of the fix)."""
    pk = await sync_to_async(lambda: scored.objects.create(score=1).pk)()
    answer = await call("writerange.scored.explode", {"id": pk, "factor": 10.0})
    text = answer["result"]["content"][0]["text"] if "result" in answer else answer["error"]["message"]
    assert "refused by the database" not in text and "Internal error" in text, answer
