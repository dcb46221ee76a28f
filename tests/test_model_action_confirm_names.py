"""A confirmed model action whose method has a parameter named ``default`` or ``template`` asks its question.

The question was formatted with ``confirm_message(template, default, **values)``, the values being the
method's arguments: a method ``make_main(self, default: bool = False)`` ("make it the default address")
made every call a ``TypeError`` (multiple values for argument 'default'), an internal error, before the
user was asked anything. Found by the model review.
"""

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

YES = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def make_main(self: Any, default: bool = False, template: str = "") -> None:
    """Make the address the main one.

    Args:
        default: Also the default for new orders.
        template: A label template.
    """
    self.main = True
    self.save()


@pytest.fixture
def addresses() -> Iterator[Any]:
    with isolate_apps("demo_site.shop"):
        meta = type("Meta", (), {"app_label": "shop"})
        model: Any = type("NamedAddress", (models.Model,), {"__module__": __name__, "Meta": meta, "main": models.BooleanField(default=False),
                                                           "__str__": lambda self: f"address {self.pk}", "make_main": make_main})
        with connection.schema_editor() as editor:
            editor.create_model(model)
        asked = mcp_tools.register_model_action(model, "make_main", name="confirmnames.addresses.make_main", permissions=[],
                                                confirm="Make {obj} the main one (default: {default}, {template})?")
        plain = mcp_tools.register_model_action(model, "make_main", name="confirmnames.addresses.make_main_plain", permissions=[],
                                                confirm=True)
        try:
            yield model
        finally:
            unregister_model_action(asked)
            unregister_model_action(plain)
            with connection.schema_editor() as editor:
                editor.delete_model(model)


async def call(name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    from demo_site.asgi import application

    result: dict[str, Any] = (await call_modern(application, "tools/call", {"name": name, "arguments": arguments, **params})).json()["result"]
    return result


@pytest.mark.parametrize("tool, question", [
    ("confirmnames.addresses.make_main", "Make address {pk} the main one (default: True, t)?"),
    ("confirmnames.addresses.make_main_plain", "Make main named address address {pk}?"),
])
async def test_a_parameter_named_default_or_template_is_asked_about(addresses: Any, tool: str, question: str) -> None:
    pk = (await sync_to_async(addresses.objects.create)()).pk
    arguments = {"id": pk, "default": True, "template": "t"}
    asked = await call(tool, arguments)
    assert asked.get("resultType") == "input_required", asked
    assert asked["inputRequests"]["confirm"]["params"]["message"] == question.format(pk=pk)
    done = await call(tool, arguments, inputResponses=YES, requestState=asked["requestState"])
    assert done.get("isError") is not True, done
    assert await sync_to_async(lambda: addresses.objects.get(pk=pk).main)() is True
