"""Tool arguments mirrored in ``Mcp-Param-*`` headers (``x-mcp-header``, 2026-07-28).

The spec allows the annotation only on a property reached through ``properties`` alone whose ``type``
is string, integer or boolean, named by an RFC 9110 token unique (case-insensitively) in the tool;
clients MUST drop a tool that breaks these from ``tools/list``, and the official ones do, silently
(Python SDK: ``mcp.shared.inbound.find_invalid_x_mcp_header``; TS SDK: ``scanXMcpHeaderDeclarations``).
A spec review found such tools registered and listed: the natural ``Optional[str]`` argument
(pydantic's ``anyOf`` has no ``type``), a float (``number``), two annotations naming one header, a
name with a space. An ``Optional`` of a string, integer or boolean (and an enum, a ``Literal``, a
nested model) now gets a schema the clients accept; the rest is refused when the tool is built.
The server also checks the headers of nested annotated properties, as the spec requires.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from mcp.shared.inbound import find_invalid_x_mcp_header
from pydantic import BaseModel, Field

from mcp_tools.protocol.errors import HEADER_MISMATCH
from mcp_tools.registry import make_tool, registry
from mcp_tools.transports.http import McpEndpoint
from tests.asgi_client import call_modern
from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)
APP = McpEndpoint()


def header(name: str, **field: Any) -> Any:
    return Field(json_schema_extra={"x-mcp-header": name}, **field)


class Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class Target(BaseModel):
    region: Annotated[str, header("Region")]
    replicas: int = 1


# -- tools the official clients list ------------------------------------------------------------


def zoned(zone: Annotated[str | None, header("Zone")] = None) -> str:
    return f"zone={zone}"


def optional_int(count: Annotated[Optional[int], header("Count", ge=0)] = None) -> str:  # noqa: UP045 - the spelling users write
    return f"count={count}"


def optional_bool(dry: Annotated[bool | None, header("Dry-Run")] = None) -> str:
    return f"dry={dry}"


def optional_literal(tier: Annotated[Literal["gold", "silver"] | None, header("Tier")] = None) -> str:
    return f"tier={tier}"


def colored(color: Annotated[Color, header("Color")], shade: Annotated[Color | None, header("Shade")] = None) -> str:
    return f"{color.value}/{shade.value if shade else None}"


def deploy_to(target: Target, note: str = "") -> str:
    return f"{target.region}x{target.replicas}"


LISTED = [zoned, optional_int, optional_bool, optional_literal, colored, deploy_to]


@pytest.mark.parametrize("fn", LISTED, ids=[fn.__name__ for fn in LISTED])
async def test_tools_with_header_arguments_are_valid_for_the_official_clients(fn: Any) -> None:
    tool = make_tool(fn, name=f"zz_{fn.__name__}")
    with registry.registered_temporarily(tool):
        r = await call_modern(APP, "tools/list")
    listed = next(t for t in r.json()["result"]["tools"] if t["name"] == f"zz_{fn.__name__}")
    assert find_invalid_x_mcp_header(listed["inputSchema"]) is None, listed["inputSchema"]


def test_an_optional_header_argument_stays_optional_with_its_constraints() -> None:
    schema = make_tool(optional_int).input.schema
    assert schema["properties"]["count"] == {"type": "integer", "minimum": 0, "x-mcp-header": "Count"}
    assert "count" not in schema.get("required", [])
    enum_schema = make_tool(colored).input.schema
    assert enum_schema["properties"]["shade"] == {"type": "string", "enum": ["red", "blue"], "x-mcp-header": "Shade"}
    assert "$defs" not in enum_schema  # inlined: left there, a definition's annotation is off the properties chain
    nested = make_tool(deploy_to).input.schema
    assert nested["properties"]["target"]["properties"]["region"] == {"type": "string", "x-mcp-header": "Region"}
    assert "$defs" not in nested


@pytest.mark.parametrize(("arguments", "headers", "text"), [
    ({"zone": "eu-west"}, {"mcp-param-zone": "eu-west"}, "zone=eu-west"),
    ({"zone": None}, {}, "zone=None"),  # null: the client omits the header (2026-07-28), and null is still taken
    ({}, {}, "zone=None"),
])
async def test_an_optional_header_argument_is_called_with_a_value_null_or_nothing(
        arguments: dict[str, Any], headers: dict[str, str], text: str) -> None:
    with registry.registered_temporarily(make_tool(zoned)):
        r = await call_modern(APP, "tools/call", {"name": "zoned", "arguments": arguments}, headers=headers)
    assert r.status == 200, r.body
    assert r.json()["result"]["content"] == [{"type": "text", "text": text}]


async def test_a_value_without_its_header_is_still_refused() -> None:
    with registry.registered_temporarily(make_tool(zoned)):
        r = await call_modern(APP, "tools/call", {"name": "zoned", "arguments": {"zone": "eu-west"}})
    assert (r.status, r.json()["error"]["code"]) == (400, HEADER_MISMATCH), r.body


# -- nested annotated properties: the server checks their headers too ------------------------------


@pytest.mark.parametrize(("headers", "status"), [
    ({"mcp-param-region": "eu-west"}, 200),
    ({}, 400),  # the value is in the body: a client that omits the header does not conform
    ({"mcp-param-region": "us-east"}, 400),
])
async def test_a_nested_annotated_property_is_checked_against_its_header(headers: dict[str, str], status: int) -> None:
    """2026-07-28 streamable-http, Custom Headers: an annotated property may be nested (a chain of
    ``properties``); its value is read at that exact path, and servers MUST reject a missing or
    mismatched header with 400 / -32020."""
    tool = make_tool(deploy_to)
    assert tool.param_headers == ((("target", "region"), "Region"),)
    arguments = {"target": {"region": "eu-west", "replicas": 2}}
    with registry.registered_temporarily(tool):
        r = await call_modern(APP, "tools/call", {"name": "deploy_to", "arguments": arguments}, headers=headers)
    assert r.status == status, r.body
    if status == 200:
        assert r.json()["result"]["content"] == [{"type": "text", "text": "eu-westx2"}]
    else:
        assert r.json()["error"]["code"] == HEADER_MISMATCH


# -- a tool the caller may not use: its headers are not checked, nor named ---------------------------


def zz_gated_region(region: Annotated[str, header("Region")]) -> str:
    return f"ran in {region}"


def _answer(r: Any) -> tuple[int, Any]:
    """What a caller learns: the HTTP status and the JSON-RPC error (code and message), else the result's text."""
    body = r.json()
    if "error" in body:
        return r.status, (body["error"]["code"], body["error"]["message"])
    return r.status, body["result"]["content"][0]["text"]


@pytest.mark.parametrize(("sent", "permitted_answer"), [
    ({}, (400, (HEADER_MISMATCH, "Missing Mcp-Param-Region header"))),
    ({"mcp-param-region": "us-east"}, (400, (HEADER_MISMATCH, "Mcp-Param-Region header does not match the argument"))),
    ({"mcp-param-region": "eu-west"}, (200, "ran in eu-west")),
], ids=["no-header", "wrong-header", "right-header"])
async def test_a_hidden_tools_headers_are_checked_only_for_a_caller_who_may_use_it(
        sent: dict[str, str], permitted_answer: tuple[int, Any]) -> None:
    """A security review found the ``Mcp-Param-*`` check run before authentication and the
    permission check: with no credentials, a permission-gated tool answered 400 "Missing
    Mcp-Param-Region header" where an unknown tool answered 401, and a user without the permission
    got -32020 where an unknown tool is -32602, naming the hidden tool and its header. Now the caller
    is authenticated first, and one who may not use the tool gets exactly an unknown tool's answer
    (docs/protocol.md: tools with ``permissions`` are hidden from callers without them); one who may
    still has the headers checked before the call runs (2026-07-28, Custom Headers)."""
    tool = make_tool(zz_gated_region, permissions=["inventory.change_product"])
    arguments = {"region": "eu-west"}
    viewer = await sync_to_async(create_user_with_token)("zz-viewer")
    clerk = await sync_to_async(create_user_with_token)("zz-clerk", ("inventory.change_product",))

    async def answers(token: str | None) -> tuple[tuple[int, Any], tuple[int, Any]]:
        """The answers to a call of the hidden tool and of one that does not exist, by the same caller."""
        gated = await call_modern(APP, "tools/call", {"name": "zz_gated_region", "arguments": arguments}, token=token, headers=sent)
        unknown = await call_modern(APP, "tools/call", {"name": "zz_no_such_tool", "arguments": arguments}, token=token, headers=sent)
        return _answer(gated), _answer(unknown)

    with registry.registered_temporarily(tool):
        with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "ALLOW_ANONYMOUS": False}):
            anonymous_where_credentials_are_needed = await answers(None)
        anonymous, without_permission, with_permission = await answers(None), await answers(viewer), await answers(clerk)

    gated, unknown = anonymous_where_credentials_are_needed
    assert gated[0] == unknown[0] == 401, anonymous_where_credentials_are_needed
    for caller in (anonymous, without_permission):
        gated, unknown = caller
        assert gated == (200, (-32602, "Unknown tool: zz_gated_region")), caller
        assert unknown == (200, (-32602, "Unknown tool: zz_no_such_tool")), caller
    assert with_permission[0] == permitted_answer, with_permission


# -- tools the official clients would drop: refused when built ---------------------------------------


class Node(BaseModel):
    name: Annotated[str, header("Name")]
    children: list[Node] = []


def ratio(value: Annotated[float, header("Ratio")]) -> str:
    return str(value)


def twice(a: Annotated[str, header("Region")], b: Annotated[str, header("region")]) -> str:
    return a + b


def spaced(a: Annotated[str, header("My Region")]) -> str:
    return a


def empty(a: Annotated[str, header("")]) -> str:
    return a


def listed(regions: list[Annotated[str, header("Region")]]) -> str:
    return ",".join(regions)


def either(key: Annotated[str | int, header("Key")]) -> str:
    return str(key)


def maybe_target(target: Target | None = None) -> str:
    return str(target)


def tree(root: Node) -> str:
    return root.name


@pytest.mark.parametrize(("fn", "reason"), [
    (ratio, "on property 'value': only a string, integer or boolean property may be mirrored in a header, and its type is 'number'"),
    (twice, "'region' on property 'b': property 'a' has the same header name"),
    (spaced, "'My Region' on property 'a': the header name must be an RFC 9110 token"),
    (empty, "'' on property 'a': the header name must be an RFC 9110 token"),
    (listed, "'Region' at '/properties/regions/items': only a property reached through 'properties' alone"),
    (either, "'Key' on property 'key': only a string, integer or boolean property may be mirrored in a header, and its type is missing"),
    (maybe_target, "'Region' at '/$defs/Target/properties/region': only a property reached through 'properties' alone"),
    (tree, "'Name' at '/$defs/Node/properties/name': only a property reached through 'properties' alone"),
], ids=["float", "duplicate", "not-a-token", "empty", "in-a-list", "union", "optional-model", "recursive-model"])
def test_a_tool_the_clients_would_drop_is_refused_naming_tool_property_and_reason(fn: Any, reason: str) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        make_tool(fn, name=f"zz_{fn.__name__}")
    message = str(refused.value)
    assert message.startswith(f"Tool 'zz_{fn.__name__}' cannot be listed to 2026-07-28 clients: x-mcp-header "), message
    assert reason in message, message


def test_a_refused_tool_is_not_registered_by_the_decorator() -> None:
    from mcp_tools.registry import tool

    with pytest.raises(ImproperlyConfigured):
        tool(name="zz_decorated_ratio")(ratio)
    assert registry.get_tool("zz_decorated_ratio") is None


# -- what a header may carry, and a header for an argument the request does not set -------------------
# Found by two reviews (2026-07-28 era, hostile input): a header sent for an absent argument was not
# checked at all (a gateway routed on it while the tool ran on its default), a raw byte outside
# visible ASCII was read as latin-1 and matched, and numbers were read by Python's int() ("4_2").


def counted(count: Annotated[Optional[int], header("Count")] = None) -> str:  # noqa: UP045 - the spelling users write
    return f"count={count}"


@pytest.mark.parametrize("headers", [
    {"mcp-param-zone": "eu-west"},
    {"mcp-param-zone": "=?base64?!!!?="},
], ids=["plain", "broken-encoding"])
@pytest.mark.parametrize("arguments", [{}, {"zone": None}], ids=["absent", "null"])
async def test_a_header_for_an_argument_the_request_does_not_set_is_refused(
        arguments: dict[str, Any], headers: dict[str, str]) -> None:
    with registry.registered_temporarily(make_tool(zoned)):
        r = await call_modern(APP, "tools/call", {"name": "zoned", "arguments": arguments}, headers=headers)
    assert (r.status, r.json()["error"]["code"]) == (400, HEADER_MISMATCH), r.body


@pytest.mark.parametrize(("argument", "value", "status"), [
    ("caf\u00e9", "caf\u00e9", 400),  # the raw byte 0xE9: not what a header carries as it is
    ("caf\u00e9", "=?base64?Y2Fmw6k=?=", 200),  # "café" as the spec encodes it
    ("a\x01b", "a\x01b", 400),
    ("eu-west", "eu-west\xa0", 400),  # found by a diff review: str.strip() took a trailing 0xA0 byte off
    ("eu-west", "\x85eu-west", 400),
    ("eu-west", " eu-west\t", 200),  # RFC 9110 whitespace around a value is not part of it
], ids=["raw-latin-1-byte", "base64", "control-byte", "trailing-nbsp", "leading-nel", "ows"])
async def test_a_param_header_outside_visible_ascii_must_be_encoded(argument: str, value: str, status: int) -> None:
    with registry.registered_temporarily(make_tool(zoned)):
        r = await call_modern(APP, "tools/call", {"name": "zoned", "arguments": {"zone": argument}},
                              headers={"mcp-param-zone": value})
    assert r.status == status, r.body
    if status == 400:
        assert r.json()["error"]["code"] == HEADER_MISMATCH


@pytest.mark.parametrize(("value", "status"), [
    ("42", 200), ("42.0", 200), ("4.2e1", 200),  # the same number as JSON writes it (the spec: compare numerically)
    ("4_2", 400), ("=?base64?IDQy?=", 400), ("=?base64?2aTZog==?=", 400), ("042", 400), ("+42", 400), ("0x2a", 400),
], ids=["42", "42.0", "4.2e1", "underscore", "padded", "arabic-digits", "leading-zero", "plus", "hex"])
async def test_a_number_header_is_read_as_json_writes_numbers(value: str, status: int) -> None:
    with registry.registered_temporarily(make_tool(counted)):
        r = await call_modern(APP, "tools/call", {"name": "counted", "arguments": {"count": 42}}, headers={"mcp-param-count": value})
    assert r.status == status, (value, r.body)
    if status == 200:
        assert r.json()["result"]["content"] == [{"type": "text", "text": "count=42"}]


@pytest.mark.parametrize(("headers", "status"), [
    ({"mcp-param-zone": "eu-west"}, 200),
    ({"mcp-name": "zoned", "mcp-param-zone": "eu-west"}, 200),
    ({}, 200),  # what a client following the spec sends with an extension's request (the official SDK)
    ({"mcp-param-zone": "us-east"}, 400),
    ({"mcp-name": "echo", "mcp-param-zone": "eu-west"}, 400),
    ({"mcp-name": "echo"}, 400),
])
async def test_a_saga_s_routing_headers_must_not_lie(headers: dict[str, str], status: int) -> None:
    """``tools/callSaga`` starts a tool call as ``tools/call`` does, but skipped its ``Mcp-Name`` and
    ``Mcp-Param-*`` checks (found by a review of the 2026-07-28 era): a saga ran ``zoned`` for ``eu-west``
    under ``Mcp-Param-Zone: us-east``, or with ``Mcp-Name: echo``, past any gateway rule on them. Headers a
    saga sends are checked; none is required (the spec requires them of tools/call, prompts/get and
    resources/read only, and the official SDK sends none with another method: a review of the fix)."""
    with registry.registered_temporarily(make_tool(zoned)):
        r = await call_modern(APP, "tools/callSaga", {"name": "zoned", "arguments": {"zone": "eu-west"}}, headers=headers)
    assert r.status == status, r.body
    if status == 400:
        assert r.json()["error"]["code"] == HEADER_MISMATCH, r.body
    else:
        assert r.json()["result"]["content"] == [{"type": "text", "text": "zone=eu-west"}], r.body


async def test_the_test_client_sends_the_headers_a_conforming_client_sends() -> None:
    """``McpTestClient`` sent no ``Mcp-Param-*`` headers, so a project's test of any tool with an
    ``x-mcp-header`` argument got 400 / -32020 (noticed while fixing the saga's checks)."""
    from mcp_tools.testing import McpTestClient

    client = McpTestClient(APP)
    with registry.registered_temporarily(make_tool(zoned), make_tool(deploy_to), make_tool(colored)):
        assert (await client.call_tool("zoned", {"zone": " eu west ünï "}))["content"][0]["text"] == "zone= eu west ünï "
        assert (await client.call_tool("zoned", {}))["content"][0]["text"] == "zone=None"
        assert (await client.call_tool("deploy_to", {"target": {"region": "eu"}}))["content"][0]["text"] == "eux1"
        assert (await client.call_tool("colored", {"color": "red"}))["content"][0]["text"] == "red/None"
        assert (await client.request("tools/callSaga", {"name": "zoned", "arguments": {"zone": "eu"}}))["content"][0]["text"] == "zone=eu"
        # A plain value that looks like the encoded form is sent encoded (2026-07-28: clients MUST).
        for tricky in ("=?base64?ZXU=?=", "=?base64?not base64?="):
            assert (await client.call_tool("zoned", {"zone": tricky}))["content"][0]["text"] == f"zone={tricky}"


class AliasedTarget(BaseModel):
    model_config = {"populate_by_name": True}
    region: str = Field(alias="Region", json_schema_extra={"x-mcp-header": "Region"})


def routed(target: AliasedTarget) -> str:
    return f"routed to {target.region}"


@pytest.mark.parametrize(("arguments", "headers", "status"), [
    ({"target": {"Region": "prod"}}, {"mcp-param-region": "prod"}, 200),
    ({"target": {"region": "prod"}}, {}, 200),  # an argument error (a tool error), never the tool run
])
async def test_a_model_that_populates_by_name_is_called_by_its_advertised_alias_only(
        arguments: dict[str, Any], headers: dict[str, str], status: int) -> None:
    """Found by a review of the 2026-07-28 era: ``{"target": {"region": "prod"}}`` (the field's Python name, which a
    model with ``populate_by_name`` takes) reached the tool with no ``Mcp-Param-Region`` header, though the schema
    advertises ``Region`` (required, mirrored in the header)."""
    with registry.registered_temporarily(make_tool(routed)):
        r = await call_modern(APP, "tools/call", {"name": "routed", "arguments": arguments}, headers=headers)
    assert r.status == status, r.body
    result = r.json()["result"]
    if "Region" in arguments["target"]:
        assert result["content"] == [{"type": "text", "text": "routed to prod"}], result
    else:
        assert result["isError"] is True and "routed to" not in result["content"][0]["text"], result


class ByNameOnly(BaseModel):
    model_config = {"validate_by_name": True, "validate_by_alias": False}
    region: str = Field(alias="Region")


def by_name_only(target: ByNameOnly) -> str:
    return target.region


async def test_a_model_that_validates_by_name_only_is_still_called() -> None:
    """``by_name=False`` made pydantic refuse such a model outright ("validate_by_name and validate_by_alias cannot
    both be set to False"): every call was an internal error (a review of the fix). It is validated as its
    configuration says, by the name its schema advertises."""
    tool = make_tool(by_name_only)
    with registry.registered_temporarily(tool):
        r = await call_modern(APP, "tools/call", {"name": "by_name_only", "arguments": {"target": {"region": "eu"}}})
    assert r.json()["result"]["content"] == [{"type": "text", "text": "eu"}], r.body
