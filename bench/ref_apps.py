"""Reference ceilings (no MCP work): a bare Channels consumer and a plain Django async view.

Both read the POST body and answer a fixed JSON-RPC echo result:

* ``bench.ref_apps:consumer_app``: ``/mcp`` served by :class:`FixedJsonConsumer`, an
  ``AsyncHttpConsumer`` behind Channels' ``URLRouter`` (run under daphne);
* ``bench.ref_apps:django_app``: Django's ASGI handler; ``/mcp`` is
  :func:`bench.ref_urls.fixed_json_view` behind the demo's middleware stack (run under uvicorn).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.bench_settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()  # sets Django up

from channels.generic.http import AsyncHttpConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from bench.ref_urls import BODY  # noqa: E402


class FixedJsonConsumer(AsyncHttpConsumer):
    async def handle(self, body: bytes) -> None:
        await self.send_response(200, BODY, headers=[(b"content-type", b"application/json")])


consumer_app = ProtocolTypeRouter({"http": URLRouter([path("mcp", FixedJsonConsumer.as_asgi())])})
