"""Reference ceilings: a bare Channels ``AsyncHttpConsumer`` and a plain Django async view.

Both read the POST body and answer a fixed JSON-RPC echo result (no MCP work):

* ``bench.ref_apps:consumer_app``: ``/mcp`` served by :class:`FixedJsonConsumer` (run under daphne);
* ``bench.ref_apps:django_app``: Django's ASGI handler, ``/mcp`` served by :func:`fixed_json_view`
  through the demo project's middleware stack (run under uvicorn).

This module is also the URLconf of ``bench.bench_settings`` (``urlpatterns``).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.bench_settings")

import django  # noqa: E402

django.setup()

from channels.generic.http import AsyncHttpConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

from demo_site.urls import urlpatterns as demo_urlpatterns  # noqa: E402

ECHO_TEXT = os.environ.get("BENCH_ECHO_TEXT", "bench-echo-7f3a")
BODY = (
    '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"%s"}]}}' % ECHO_TEXT
).encode()


class FixedJsonConsumer(AsyncHttpConsumer):
    async def handle(self, body: bytes) -> None:
        await self.send_response(200, BODY, headers=[(b"content-type", b"application/json")])


@csrf_exempt
async def fixed_json_view(request):
    request.body  # noqa: B018 - read it, like an MCP endpoint must
    return HttpResponse(BODY, content_type="application/json")


urlpatterns = [path("mcp", fixed_json_view), *demo_urlpatterns]

consumer_app = ProtocolTypeRouter({"http": URLRouter([path("mcp", FixedJsonConsumer.as_asgi())])})
django_app = get_asgi_application()
