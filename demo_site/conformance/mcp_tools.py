"""Fixtures of the MCP conformance suite (``@modelcontextprotocol/conformance``).

Names, arguments, descriptions and outputs follow the suite's reference
"everything" server, so the same scenarios pass against this project. The
server speaks both wires: on 2025-11-25 the context's steps (elicitation,
sampling, roots) become server→client requests on the call's stream; on
2026-07-28 they become ``input_required`` results (SEP-2322), with the step
keys below as the ``inputRequests`` keys.

Installed only with ``MCP_CONFORMANCE=1``.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import uuid
from typing import Any, Literal

from mcp_tools.engine import ElicitationCancelled, ElicitationDeclined, ToolContext
from mcp_tools.engine.context import StepRequest
from mcp_tools.registry import make_tool, prompt, registry, resource, tool
from mcp_tools.registry.results import ToolError, ToolResult, audio, embedded_text_resource, image, text
from mcp_tools.registry.schemas import InputSpec

# Constants of the reference fixture: a 1x1 red PNG and a minimal WAV.
TEST_IMAGE_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
TEST_AUDIO_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

LOGGER = "conformance-test-server"


def _js_json(value: Any) -> str:
    """``JSON.stringify(value)``: compact separators, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def _elicit_raw(ctx: ToolContext, message: str, schema: dict[str, Any], key: str) -> tuple[str, dict[str, Any]]:
    """Elicit with a verbatim JSON Schema; return ``(action, content)`` like a raw ``ElicitResult``."""
    try:
        content = await ctx.elicit(message, schema=schema, key=key)
    except ElicitationDeclined:
        return "decline", {}
    except ElicitationCancelled:
        return "cancel", {}
    return "accept", dict(content or {})


def _sampling_step(ctx: ToolContext, prompt_text: str, max_tokens: int, key: str) -> StepRequest[dict[str, Any]]:
    """A single-turn sampling request that can go into ``ctx.gather``."""
    return ctx.sample_step(prompt_text, max_tokens=max_tokens, key=key)


def _sampling_text(answer: dict[str, Any]) -> str:
    content = answer.get("content")
    blocks = content if isinstance(content, list) else [content]
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


# ===========================================================================
# Tools (both wires)
# ===========================================================================


@tool(description="Tests simple text content response")
async def test_simple_text() -> str:
    return "This is a simple text response for testing."


@tool(description="Tests image content response")
async def test_image_content() -> ToolResult:
    return ToolResult(content=[image(TEST_IMAGE_BASE64, "image/png")])


@tool(description="Tests audio content response")
async def test_audio_content() -> ToolResult:
    return ToolResult(content=[audio(TEST_AUDIO_BASE64, "audio/wav")])


@tool(description="Tests embedded resource content response")
async def test_embedded_resource() -> ToolResult:
    return ToolResult(
        content=[embedded_text_resource("test://embedded-resource", "This is an embedded resource content.", "text/plain")]
    )


@tool(description="Tests response with multiple content types (text, image, resource)")
async def test_multiple_content_types() -> ToolResult:
    return ToolResult(
        content=[
            text("Multiple content types test:"),
            image(TEST_IMAGE_BASE64, "image/png"),
            embedded_text_resource("test://mixed-content-resource", _js_json({"test": "data", "value": 123}), "application/json"),
        ]
    )


@tool(description="Tests tool that emits log messages during execution")
async def test_tool_with_logging(ctx: ToolContext) -> str:
    await ctx.log("info", "Tool execution started", logger=LOGGER)
    await asyncio.sleep(0.05)
    await ctx.log("info", "Tool processing data", logger=LOGGER)
    await asyncio.sleep(0.05)
    await ctx.log("info", "Tool execution completed", logger=LOGGER)
    return "Tool with logging executed successfully"


@tool(description="Tests tool that reports progress notifications")
async def test_tool_with_progress(ctx: ToolContext) -> str:
    token = ctx.progress_token
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
    return str(token if token is not None else 0)


@tool(description="Tests error response handling")
async def test_error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@tool(description="Tests server-initiated sampling (LLM completion request)")
async def test_sampling(ctx: ToolContext, prompt: str) -> str:
    """
    Args:
        prompt: The prompt to send to the LLM
    """
    result = await ctx.sample(prompt, max_tokens=100, key="sampling")
    return f"LLM response: {result.text or 'No response'}"


ELICITATION_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


@tool(description="Tests server-initiated elicitation (user input request)")
async def test_elicitation(ctx: ToolContext, message: str) -> str:
    """
    Args:
        message: The message to show the user
    """
    action, content = await _elicit_raw(ctx, message, ELICITATION_SCHEMA, "elicitation")
    return f"User response: action={action}, content={_js_json(content)}"


SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


@tool(description="Tests elicitation with default values per SEP-1034")
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    action, content = await _elicit_raw(
        ctx, "Please review and update the form fields with defaults", SEP1034_SCHEMA, "sep1034_defaults"
    )
    return f"Elicitation completed: action={action}, content={_js_json(content)}"


SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Select one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}


@tool(description="Tests elicitation with enum schema improvements per SEP-1330")
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    action, content = await _elicit_raw(ctx, "Please select options from the enum fields", SEP1330_SCHEMA, "sep1330_enums")
    return f"Elicitation completed: action={action}, content={_js_json(content)}"


# --- json_schema_2020_12_tool: a hand-written inputSchema listed verbatim ----

JSON_SCHEMA_2020_12_INPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: Literal["phone", "email"] | None = None,  # noqa: N803 - the fixture's argument name
    phone: str | None = None,
    email: str | None = None,
) -> str:
    arguments = {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}
    return f"JSON Schema 2020-12 tool called with: {_js_json({k: v for k, v in arguments.items() if v is not None})}"


def _register_json_schema_tool() -> None:
    # The arguments are validated from the signature; tools/list shows the raw 2020-12 schema.
    built = make_tool(
        _json_schema_2020_12_tool,
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
    )
    raw_input = InputSpec(schema=JSON_SCHEMA_2020_12_INPUT_SCHEMA, validate=built.input.validate)
    registry.register_tool(dataclasses.replace(built, input=raw_input, _wire=None))


_register_json_schema_tool()


# ===========================================================================
# Tools of the 2026-07-28 (stateless) scenarios
# ===========================================================================


@tool(description="Test tool requiring sampling")
async def test_missing_capability(ctx: ToolContext) -> str:
    # Without the sampling capability the server answers -32021 (HTTP 400) before asking.
    await ctx.sample("Capability probe: reply with anything.", max_tokens=10, key="probe")
    return "Success"


@tool(description="Diagnostic tool validating response progress streams")
async def test_streaming_elicitation(ctx: ToolContext) -> str:
    await ctx.report_progress(50, 100, "Streaming")
    return "Streaming complete"


@tool(description="Diagnostic logging validator tool")
async def test_logging_tool(ctx: ToolContext) -> str:
    # Sent only if the request allows it (a log level was set).
    await ctx.log("info", "Diagnostic trace logging activated", logger=LOGGER)
    return "Logging evaluated"


def _temporary_tool() -> str:
    """A tool that exists for an instant, to make the tool list change."""
    return "temporary"


def _temporary_prompt() -> str:
    """A prompt that exists for an instant, to make the prompt list change."""
    return "temporary"


@tool(description="Diagnostic hook: adds and removes a tool so tools/list_changed is sent")
async def test_trigger_tool_change() -> str:
    name = f"temporary_tool_{uuid.uuid4().hex[:12]}"  # unique: concurrent calls never collide
    registry.register_tool(make_tool(_temporary_tool, name=name, description="Temporary tool (list_changed probe)"))
    registry.unregister_tool(name)
    return "Mutation triggered"


@tool(description="Diagnostic hook: adds and removes a prompt so prompts/list_changed is sent")
async def test_trigger_prompt_change() -> str:
    name = f"temporary_prompt_{uuid.uuid4().hex[:12]}"
    prompt(name=name, description="Temporary prompt (list_changed probe)")(_temporary_prompt)
    registry.unregister_prompt(name)
    return "Mutation triggered"


# --- SEP-2322 input_required ("MRTR") fixtures -------------------------------

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@tool(description="MRTR: returns InputRequiredResult with elicitation request")
async def test_input_required_result_elicitation(ctx: ToolContext) -> str:
    answer = await ctx.elicit("What is your name?", schema=NAME_SCHEMA, key="user_name")
    return f"Hello, {answer.get('name', 'unknown')}!"


@tool(description="MRTR: returns InputRequiredResult with sampling request")
async def test_input_required_result_sampling(ctx: ToolContext) -> str:
    result = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"Sampling result: {result.text or 'no response'}"


@tool(description="MRTR: returns InputRequiredResult with roots/list request")
async def test_input_required_result_list_roots(ctx: ToolContext) -> str:
    roots = await ctx.list_roots(key="client_roots")
    uris = ", ".join(str(root.get("uri")) for root in roots if isinstance(root, dict))
    return f"Found {len(roots)} root(s)" + (f": {uris}" if uris else "")


@tool(description="MRTR: returns InputRequiredResult with requestState")
async def test_input_required_result_request_state(ctx: ToolContext) -> str:
    answer = await ctx.elicit("Please confirm", schema=CONFIRM_SCHEMA, key="confirm")
    return f"state-ok: requestState validated (ok={_js_json(answer.get('ok'))})"


@tool(description="MRTR: returns InputRequiredResult with multiple input requests")
async def test_input_required_result_multiple_inputs(ctx: ToolContext) -> str:
    user, greeting, roots = await ctx.gather(
        ctx.elicit("What is your name?", schema=NAME_SCHEMA, key="user_name"),
        _sampling_step(ctx, "Generate a greeting", 50, "greeting"),
        ctx.list_roots(key="client_roots"),
    )
    greeting_text = _sampling_text(greeting) or "Hello there!"
    return f"Name: {user.get('name', 'unknown')}; Greeting: {greeting_text}; Roots: {len(roots)}"


@tool(description="MRTR: multi-round InputRequiredResult workflow")
async def test_input_required_result_multi_round(ctx: ToolContext) -> str:
    first = await ctx.elicit("Step 1: What is your name?", schema=NAME_SCHEMA, key="step1")
    second = await ctx.elicit(
        "Step 2: What is your favorite color?",
        schema={"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"Multi-round complete for {first.get('name', 'friend')} who likes {second.get('color', 'unknown')}"


@tool(description="MRTR: HMAC-signed requestState integrity test")
async def test_input_required_result_tampered_state(ctx: ToolContext) -> str:
    # The server seals requestState; a tampered one is rejected before this runs again.
    await ctx.elicit("Please confirm", schema=CONFIRM_SCHEMA, key="confirm")
    return "integrity-ok: state verified"


@tool(description="MRTR: respects client capabilities in inputRequests")
async def test_input_required_result_capabilities(ctx: ToolContext) -> str:
    capabilities = ctx.client_capabilities
    if "elicitation" in capabilities:
        await ctx.elicit(
            "Elicitation input",
            schema={"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
            key="elicit_input",
        )
        received = "elicit_input"
    elif "sampling" in capabilities:
        await ctx.sample("Sample request", max_tokens=50, key="sample_input")
        received = "sample_input"
    else:
        return "No supported capabilities declared"
    return f"capabilities-ok: received {received}"


# ===========================================================================
# Resources
# ===========================================================================


@resource(
    "test://static-text",
    name="static-text",
    title="Static Text Resource",
    description="A static text resource for testing",
    mime_type="text/plain",
)
async def static_text() -> str:
    return "This is the content of the static text resource."


@resource(
    "test://static-binary",
    name="static-binary",
    title="Static Binary Resource",
    description="A static binary resource (image) for testing",
    mime_type="image/png",
)
async def static_binary() -> bytes:
    return base64.b64decode(TEST_IMAGE_BASE64)


@resource(
    "test://template/{id}/data",
    name="template",
    title="Resource Template",
    description="A resource template with parameter substitution",
    mime_type="application/json",
)
async def template_data(id: str) -> str:  # noqa: A002 - the template variable is called id
    return _js_json({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@resource(
    "test://watched-resource",
    name="watched-resource",
    title="Watched Resource",
    description="A resource that auto-updates every 3 seconds",
    mime_type="text/plain",
)
async def watched_resource() -> str:
    return "Watched resource content"


@resource(
    "test://stateless-static-text",
    name="Stateless Static Text",
    description="A static text resource served on the draft path",
    mime_type="text/plain",
)
async def stateless_static_text() -> str:
    return "Static text content from the stateless draft path."


# ===========================================================================
# Prompts
# ===========================================================================


@prompt(name="test_simple_prompt", title="Simple Test Prompt", description="A simple prompt without arguments")
async def test_simple_prompt() -> list[dict[str, Any]]:
    return [{"role": "user", "content": text("This is a simple prompt for testing.")}]


def _complete_test_argument(value: str, arguments: dict[str, Any] | None = None) -> list[str]:
    return [choice for choice in ("test", "testValue1", "testValue2") if choice.startswith(value or "")]


@prompt(
    name="test_prompt_with_arguments",
    title="Prompt With Arguments",
    description="A prompt with required arguments",
    completions={"arg1": _complete_test_argument, "arg2": _complete_test_argument},
)
async def test_prompt_with_arguments(arg1: str, arg2: str) -> list[dict[str, Any]]:
    """
    Args:
        arg1: First test argument
        arg2: Second test argument
    """
    return [{"role": "user", "content": text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")}]


@prompt(
    name="test_prompt_with_embedded_resource",
    title="Prompt With Embedded Resource",
    description="A prompt that includes an embedded resource",
)
async def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:  # noqa: N803
    """
    Args:
        resourceUri: URI of the resource to embed
    """
    return [
        {"role": "user", "content": embedded_text_resource(resourceUri, "Embedded resource content for testing.", "text/plain")},
        {"role": "user", "content": text("Please process the embedded resource above.")},
    ]


@prompt(name="test_prompt_with_image", title="Prompt With Image", description="A prompt that includes image content")
async def test_prompt_with_image() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": image(TEST_IMAGE_BASE64, "image/png")},
        {"role": "user", "content": text("Please analyze the image above.")},
    ]


@prompt(name="test_input_required_result_prompt", description="MRTR: prompt that requires elicitation input")
async def test_input_required_result_prompt(ctx: ToolContext) -> list[dict[str, Any]]:
    answer = await ctx.elicit(
        "What context should the prompt use?",
        schema={"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return [{"role": "user", "content": text(f"Prompt with context: {answer.get('context', 'unknown')}")}]


# -- SEP-2243: a parameter mirrored into an HTTP header ----------------------------------

from typing import Annotated  # noqa: E402

from pydantic import Field  # noqa: E402


@tool(name="test_header_param", description="Echoes its region argument, which clients mirror into the Mcp-Param-Region header.")
def test_header_param(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    return f"region={region}"


# ---------------------------------------------------------------------------
# Tasks extension (io.modelcontextprotocol/tasks, SEP-2663): the suite's fixtures.
# Task-supporting tools run on a Celery worker (background=True); the suite's
# server test starts one beside the server.
# ---------------------------------------------------------------------------


@tool(description="Tasks: a sync-only tool")
def greet(name: str = "World") -> str:
    return f"Hello, {name}!"


@tool(description="Tasks: sleeps `seconds` seconds on a worker, then answers", background=True)
async def slow_compute(ctx: ToolContext, seconds: float = 1, label: str = "") -> str:
    remaining = max(0.0, float(seconds))
    while remaining > 0:  # short sleeps, so a cancel stops it promptly
        step = min(0.2, remaining)
        await asyncio.sleep(step)
        remaining -= step
    return f"computed {label or 'result'} after {seconds}s"


@tool(description="Tasks: always ends with a tool execution error", background=True, task_support="required")
async def failing_job() -> str:
    await asyncio.sleep(1)
    raise ToolError("failing_job always fails")


@tool(description="Tasks: ends with a protocol-level error", background=True)
async def protocol_error_job() -> str:
    from mcp_tools.protocol.errors import INTERNAL_ERROR, McpError

    raise McpError(INTERNAL_ERROR, "protocol_error_job failed at the protocol level")


TASK_CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@tool(description="Tasks: asks for confirmation (elicitation) and then completes", background=True)
async def confirm_delete(ctx: ToolContext, filename: str = "file.txt") -> str:
    answer = await ctx.elicit(f"Delete {filename}?", schema=TASK_CONFIRM_SCHEMA, key="confirm")
    return f"{'deleted' if answer.get('confirm') else 'kept'} {filename}"


@tool(description="Tasks: asks two questions at once", background=True)
async def multi_input(ctx: ToolContext) -> str:
    name, color = await ctx.gather(
        ctx.elicit("What is your name?", schema=NAME_SCHEMA, key="user_name"),
        ctx.elicit("Proceed?", schema=TASK_CONFIRM_SCHEMA, key="proceed"),
    )
    return f"{name.get('name')}: {'proceeding' if color.get('confirm') else 'stopped'}"


@tool(description="Tasks: gathers input over MRTR, then escalates to a task", task_support="required")
async def test_tool_with_task(ctx: ToolContext) -> str:
    answer = await ctx.elicit("What is your name?", schema=NAME_SCHEMA, key="user_name")
    await ctx.defer()
    return f"Hello, {answer.get('name', 'unknown')}! (from a task)"


@tool(description="Faults: asks for confirmation, then counts slowly (a long round after the answer)")
async def confirm_then_count(ctx: ToolContext, n: int = 20) -> str:
    answer = await ctx.elicit("Start counting?", schema=CONFIRM_SCHEMA, key="confirm")
    if not answer.get("ok"):
        return "not counted"
    for i in range(1, n + 1):
        await asyncio.sleep(0.05)
        await ctx.report_progress(i, n, f"step {i}")
    return f"counted to {n}"
