"""Limits on what one request of a hostile (or buggy) client makes the server keep or do: JSON depth,
initialize's capabilities, progress tokens, and MAX_BODY_BYTES under the URLconf mount. No timing
assertions: rows, bytes and statuses are counted as a function of what the client sent."""
from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_tools import ToolContext
from mcp_tools.models import StreamEvent, ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import (
    FULL_CAPABILITIES, HANDSHAKE, handshake_message, modern_message, post_headers, post_json, request,
)
from tests.test_http_spec_edges import APP, _in_memory_layer, open_session  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def nested(depth: int) -> str:
    """JSON text of an object nested ``depth`` levels (``{"a":{"a":...1}}``), built as text: building it as
    a Python value and dumping it would need a recursion limit the server process shares."""
    return '{"a":' * depth + "1" + "}" * depth


def with_deep(message: dict[str, Any], depth: int) -> bytes:
    """``message`` as JSON with its ``"__DEEP__"`` placeholder replaced by a value nested ``depth`` levels."""
    text = json.dumps(message)
    assert text.count('"__DEEP__"') == 1
    return text.replace('"__DEEP__"', nested(depth)).encode()


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    extra = {"mcp-method": method}
    if name is not None:
        extra["mcp-name"] = name
    return post_headers(extra=extra)


ELICIT_TOOL = "test_input_required_result_elicitation"  # conformance tool: one elicitation, then a result


# -- 1. values nested ~1000 deep pass the parser, then crash the row writes -----------------------------

#: Deep enough to pass parse_body (orjson reads up to 1024 levels) and too deep for the json encoder that
#: Django's JSONField uses under Python's default recursion limit (1000).
DEPTH = 1000


async def test_deep_capabilities_at_initialize_is_not_a_500() -> None:
    """docs/robustness.md: bad input gets a clean refusal, never HTTP 5xx (the fuzzer's 'a value nested 500
    deep'); docs/protocol.md: malformed JSON is -32700, an invalid request 4xx. An initialize whose
    capabilities nest 1,000 levels (a 4 KB body, accepted by parse_body) is answered HTTP 500 "Internal
    error" and logs a RecursionError traceback: McpSession's JSONField cannot encode what the parser let in."""
    message = handshake_message("initialize", {"protocolVersion": HANDSHAKE,
                                               "capabilities": {"experimental": {"x": "__DEEP__"}},
                                               "clientInfo": {"name": "t", "version": "1"}})
    response = await request(APP, "POST", headers=post_headers(version=None), body=with_deep(message, DEPTH))
    assert response.status < 500, (response.status, response.body[:200])


async def test_deep_client_capabilities_of_a_suspending_call_is_not_an_internal_error() -> None:
    """The same through a 2026-07-28 tools/call: a call that suspends writes its row with the request's
    clientCapabilities. Nested 1,000 deep, the answer is -32603 "Internal error" (and a traceback in the log)
    instead of a refusal of the request (-32700 / -32602) or the call's input request."""
    caps = {**FULL_CAPABILITIES, "experimental": {"x": "__DEEP__"}}
    message = modern_message("tools/call", {"name": ELICIT_TOOL, "arguments": {}}, capabilities=caps)
    response = await request(APP, "POST", headers=modern_headers("tools/call", ELICIT_TOOL), body=with_deep(message, DEPTH))
    body = response.json()
    assert response.status < 500, response.status
    assert body.get("error", {}).get("code") != -32603, body


async def test_deep_meta_in_an_elicitation_answer_is_not_an_internal_error() -> None:
    """2026-07-28 MRTR: the answer to an elicitation carries a `_meta` nested 1,000 deep (anything but the
    form's content is journaled as sent). Its round is answered -32603 "Internal error" when the journal
    is written, instead of a -32602 refusal of the answer (or the answer being taken without the `_meta`)."""
    headers = modern_headers("tools/call", ELICIT_TOOL)
    first = await request(APP, "POST", headers=headers,
                          body=json.dumps(modern_message("tools/call", {"name": ELICIT_TOOL, "arguments": {}})).encode())
    state = first.json()["result"]["requestState"]
    answer = {"action": "accept", "content": {"name": "x"}, "_meta": {"x": "__DEEP__"}}
    message = modern_message("tools/call", {"name": ELICIT_TOOL, "arguments": {}, "requestState": state,
                                            "inputResponses": {"user_name": answer}})
    response = await request(APP, "POST", headers=headers, body=with_deep(message, DEPTH))
    body = response.json()
    assert body.get("error", {}).get("code") != -32603, body


# -- 3. a session's capabilities are copied into every call row it makes --------------------------------

async def audited(ctx: ToolContext) -> str:
    """A tool with a side effect journaled by ctx.once: its calls get a row (docs/settings.md RECORD_ALL_CALLS)."""
    await ctx.once("effect", lambda: "done")
    return "ok"


def _row_capability_bytes(session_id: str) -> list[int]:
    return [len(json.dumps(caps)) for caps in ToolCall.objects.filter(session_id=session_id).values_list("client_capabilities", flat=True)]


async def test_session_capabilities_are_not_copied_into_every_call_row() -> None:
    """A 2025-11-25 session keeps its capabilities for its life and copies them into the row of each of
    its calls (kept RETAIN_FINISHED_SECONDS): 1 MB of capabilities sent once would make K small calls
    store K MB. initialize refuses capabilities (and clientInfo) larger than 16 KiB as JSON, with
    -32602, and keeps no session; capabilities under it are kept and copied as before."""
    pad = "x" * 1_000_000
    for key, value in (("capabilities", {"elicitation": {"form": {}}, "experimental": {"pad": pad}}),
                       ("clientInfo", {"name": "t", "version": pad})):
        params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}, key: value}
        r = await post_json(APP, handshake_message("initialize", params), post_headers(version=None))
        assert r.status == 400 and r.json()["error"]["code"] == -32602, (r.status, r.body[:200])
        assert key in r.json()["error"]["message"]
        assert r.header("mcp-session-id") is None
    init = handshake_message("initialize", {"protocolVersion": HANDSHAKE,
                                            "capabilities": {"elicitation": {"form": {}}, "experimental": {"pad": "x" * 1000}},
                                            "clientInfo": {"name": "t", "version": "1"}})
    r = await post_json(APP, init, post_headers(version=None))
    assert r.status == 200
    session = r.header("mcp-session-id")
    with registry.registered_temporarily(make_tool(audited, name="dos_audited")):
        message = handshake_message("tools/call", {"name": "dos_audited", "arguments": {}})
        response = await post_json(APP, message, post_headers(version=HANDSHAKE, session=session))
        assert response.json()["result"]["content"][0]["text"] == "ok"
    assert await sync_to_async(_row_capability_bytes)(session) == [len(json.dumps(init["params"]["capabilities"]))]


# -- 4. the progress token is echoed into every progress event, stored for replay -----------------------

def _event_bytes(session_id: str) -> int:
    return sum(len(p) for p in StreamEvent.objects.filter(session_id=session_id).values_list("payload", flat=True))


async def test_progress_token_size_does_not_multiply_stored_events() -> None:
    """A 2025-11-25 request's progressToken (any string: no length limit is checked) is repeated in every
    notifications/progress of the call, and each is stored in StreamEvent for Last-Event-ID replay
    (EVENT_RETENTION: 500 per stream). One tools/call of slow_count (n=100, a demo tool) with a 500 KB token
    (one 500 KB request) writes ~50 MB of events and sends them back. Expected: what one request makes the server
    store stays within a small multiple of the request (e.g. an over-long progressToken is ignored as a
    token of the wrong type is, jsonrpc.progress_token, or refused with -32602)."""
    session = await open_session()
    token = "t" * 500_000
    message = handshake_message("tools/call", {"name": "slow_count", "arguments": {"n": 100}, "_meta": {"progressToken": token}})
    body = json.dumps(message).encode()
    response = await request(APP, "POST", headers=post_headers(version=HANDSHAKE, session=session), body=body, timeout=60)
    assert response.json()["result"]["content"][0]["text"] == "counted to 100"
    stored = await sync_to_async(_event_bytes)(session)
    assert stored < 4 * len(body), f"a {len(body):,}-byte request stored {stored:,} bytes of replay events"


# -- 5. MAX_BODY_BYTES in the URLconf mount ---------------------------------------------------------------

def _echo_body(size: int) -> bytes:
    message = modern_message("tools/call", {"name": "echo", "arguments": {"text": "__PAD__"}})
    text = json.dumps(message)
    return text.replace("__PAD__", "x" * (size - len(text) + len("__PAD__"))).encode()


@pytest.mark.parametrize("size, expected", [(3 * 1024 * 1024, 200), (5 * 1024 * 1024, 413)])
async def test_urlconf_mount_applies_max_body_bytes_as_the_asgi_mount_does(size: int, expected: int) -> None:
    """docs/settings.md: MAX_BODY_BYTES (4 MiB) - "Larger POST bodies get 413"; docs/protocol.md: at most
    MAX_BODY_BYTES (else 413). The ASGI mount does so. Mounted with include("mcp_tools.urls") the view reads
    request.body first, which Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB by default) guards: a 3 MiB
    call the ASGI mount serves, and a 5 MiB one it answers 413, both get Django's HTML 400 page, no JSON-RPC."""
    from django.core.asgi import get_asgi_application

    django_app = get_asgi_application()
    body = _echo_body(size)
    assert len(body) == size
    headers = modern_headers("tools/call", "echo")
    assert (await request(APP, "POST", headers=headers, body=body)).status == expected  # the ASGI mount
    response = await request(django_app, "POST", path="/mcp-via-django", headers=headers, body=body)
    assert response.status == expected, (response.status, response.content_type, response.body[:120])
    assert response.content_type.startswith(("application/json", "text/event-stream")), response.content_type


# -- 6. strict argument validation stays strict whatever the other arguments hold --------------------------

def count_to(n: int, data: Any = None) -> str:
    """Counts."""
    return f"n={n!r} ({type(n).__name__})"


async def test_another_argument_does_not_turn_strict_validation_lax() -> None:
    """Tool arguments are validated strictly, as JSON ("5" is no integer), whatever else they hold (a lone
    surrogate in another argument once made them lax; such strings are now refused as they arrive,
    tests/test_unstorable_strings.py). The call is refused (a tool error naming ``n``)."""
    message = modern_message("tools/call", {"name": "dos_count_to", "arguments": {"n": "5", "data": "__DEEP__"}})
    body = with_deep(message, 10)
    with registry.registered_temporarily(make_tool(count_to, name="dos_count_to")):
        response = await request(APP, "POST", headers=modern_headers("tools/call", "dos_count_to"), body=body)
    result = response.json()["result"]
    assert result.get("isError") is True, result
    assert [e["field"] for e in result["_meta"]["mcp-tools/argumentErrors"]] == ["n"], result
