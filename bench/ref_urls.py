"""URLconf of the benchmark settings: the demo site's URLs plus a plain Django async view at ``/mcp``.

Under ``demo_site.asgi`` the MCP endpoint is routed before Django, so ``/mcp``
here is only reached through ``bench.ref_apps:django_app``.
"""

import os

from django.http import HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from demo_site.urls import urlpatterns as demo_urlpatterns

ECHO_TEXT = os.environ.get("BENCH_ECHO_TEXT", "bench-echo-7f3a")
BODY = ('{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"%s"}]}}' % ECHO_TEXT).encode()


@csrf_exempt
async def fixed_json_view(request):
    """What any Django view costs: the demo's middleware stack, read the body, answer fixed JSON."""
    request.body  # noqa: B018 - read it, like an MCP endpoint must
    return HttpResponse(BODY, content_type="application/json")


urlpatterns = [path("mcp", fixed_json_view), *demo_urlpatterns]
