import json, pytest
from tests.asgi_client import call_modern
from mcp_tools.transports.http import McpEndpoint

@pytest.mark.django_db(transaction=True)
async def test_scratch():
    app = McpEndpoint()
    r = await call_modern(app, "tools/call", {"name": "deploy", "arguments": {"service": "x"}})
    print(r.status, r.headers, json.dumps(r.json(), indent=1))
    state = r.json()["result"]["requestState"]
    r = await call_modern(app, "tools/call", {"name": "deploy", "arguments": {"service": "x"}, "requestState": state,
        "inputResponses": {"target": {"action": "accept", "content": {"env": "staging"}}}})
    print(r.status, json.dumps(r.json(), indent=1))
    state = r.json()["result"]["requestState"]
    r = await call_modern(app, "tools/call", {"name": "deploy", "arguments": {"service": "x"}, "requestState": state,
        "inputResponses": {"verdict": {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}}})
    print(r.status, json.dumps(r.json(), indent=1))
