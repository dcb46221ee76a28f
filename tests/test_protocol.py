"""The wire layer (mcp_tools.protocol) on its own: no database, no Django settings needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcp_tools.protocol import answers, jsonrpc, versions
from mcp_tools.protocol.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    McpError,
    invalid_params,
    method_not_found,
)

ROOT = Path(__file__).resolve().parent.parent


# -- independence from Django ---------------------------------------------------------------


def test_protocol_package_imports_and_runs_without_django_settings_or_db() -> None:
    """A fresh interpreter without DJANGO_SETTINGS_MODULE imports and uses the protocol layer."""
    code = textwrap.dedent(
        """
        import sys
        import mcp_tools.protocol.jsonrpc as jsonrpc
        import mcp_tools.protocol.answers as answers
        import mcp_tools.protocol.versions as versions
        import mcp_tools.protocol.errors as errors

        message = jsonrpc.parse_body(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
        assert message.kind == "request" and message.method == "tools/list"
        try:
            jsonrpc.parse_body(b"{")
        except errors.McpError as exc:
            assert exc.code == -32700
        else:
            raise AssertionError("malformed JSON parsed")
        answers.check_answer("roots/list", {}, {"roots": [{"uri": "file:///tmp"}]})
        assert versions.negotiate_handshake("2025-06-18") == "2025-06-18"
        loaded = sorted(m for m in sys.modules if m == "django.db" or m.startswith(("django.db.", "channels")))
        assert not loaded, loaded
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# -- parse_body / classify ------------------------------------------------------------------


def _error_of(body: bytes) -> McpError:
    with pytest.raises(McpError) as info:
        jsonrpc.parse_body(body)
    return info.value


@pytest.mark.parametrize(
    "body",
    [b"{", b"", b"not json", b'{"jsonrpc": "2.0", "id": 1,}', b"\xff\xfe\x00", b'{"a": NaN'],
    ids=["unterminated", "empty", "text", "trailing-comma", "bad-utf8", "truncated"],
)
def test_parse_body_malformed_json_is_parse_error_400(body: bytes) -> None:
    error = _error_of(body)
    assert error.code == PARSE_ERROR
    assert error.http_status == 400
    assert error.message.startswith("Parse error")


def test_parse_body_batch_is_invalid_request_400() -> None:
    body = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]).encode()
    error = _error_of(body)
    assert (error.code, error.http_status) == (INVALID_REQUEST, 400)
    assert "batch" in error.message


def test_parse_body_empty_batch_is_invalid_request() -> None:
    assert _error_of(b"[]").code == INVALID_REQUEST


@pytest.mark.parametrize("payload", ['"hello"', "42", "null", "true", "3.5"])
def test_parse_body_non_object_is_invalid_request(payload: str) -> None:
    error = _error_of(payload.encode())
    assert (error.code, error.http_status) == (INVALID_REQUEST, 400)
    assert "object" in error.message


@pytest.mark.parametrize("version", [None, "1.0", "2", 2.0, ""], ids=["missing", "1.0", "2", "float", "empty"])
def test_parse_body_wrong_jsonrpc_version_is_invalid_request(version: object) -> None:
    message: dict[str, object] = {"id": 1, "method": "ping"}
    if version is not None:
        message["jsonrpc"] = version
    error = _error_of(json.dumps(message).encode())
    assert error.code == INVALID_REQUEST
    assert '"jsonrpc"' in error.message


@pytest.mark.parametrize("request_id", [True, False, None, 1.5, 1.0, [1], {"a": 1}], ids=["true", "false", "null", "float", "float-int", "list", "object"])
def test_parse_body_id_of_wrong_type_is_invalid_request(request_id: object) -> None:
    error = _error_of(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode())
    assert error.code == INVALID_REQUEST
    assert '"id"' in error.message


@pytest.mark.parametrize("request_id", [0, -7, 2**40, "", "abc", "ü-id"])
def test_parse_body_string_and_integer_ids_are_kept(request_id: object) -> None:
    message = jsonrpc.parse_body(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode())
    assert message.kind == "request"
    assert message.id == request_id


@pytest.mark.parametrize("params", [[], [1, 2], "x", 3, None, True], ids=["empty-list", "list", "string", "int", "null", "bool"])
def test_parse_body_params_not_object_is_invalid_request(params: object) -> None:
    error = _error_of(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).encode())
    assert error.code == INVALID_REQUEST
    assert '"params"' in error.message


@pytest.mark.parametrize("method", ["", 5, None, ["tools/list"]], ids=["empty", "int", "null", "list"])
def test_parse_body_method_not_a_non_empty_string_is_invalid_request(method: object) -> None:
    error = _error_of(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode())
    assert error.code == INVALID_REQUEST
    assert '"method"' in error.message


def test_parse_body_request_notification_and_params_default() -> None:
    request = jsonrpc.parse_body(b'{"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "echo"}}')
    assert (request.kind, request.id, request.method, request.params) == ("request", "a", "tools/call", {"name": "echo"})
    notification = jsonrpc.parse_body(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert notification.kind == "notification"
    assert notification.id is None
    assert notification.params == {}


def test_parse_body_accepts_utf8_with_non_ascii_text() -> None:
    message = jsonrpc.parse_body('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "échó"}}'.encode())
    assert message.params["name"] == "échó"


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": "mcp_tools:abc:0", "result": {"action": "accept"}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}},
    ],
    ids=["result", "string-id", "error"],
)
def test_classify_responses(payload: dict[str, object]) -> None:
    message = jsonrpc.classify(payload)
    assert message.kind == "response"
    assert message.id == payload["id"]
    assert message.method == ""


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "result": {}},
        {"jsonrpc": "2.0", "id": 1, "error": "boom"},
        {"jsonrpc": "2.0", "id": None, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "error": {}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": 1.5, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": None}},
    ],
    ids=["result-and-error", "neither", "no-id", "error-not-object", "null-id", "error-empty", "error-code-string",
         "error-code-float", "error-code-bool", "error-no-message", "error-message-null"],
)
def test_classify_malformed_responses_are_invalid_request(payload: dict[str, object]) -> None:
    with pytest.raises(McpError) as info:
        jsonrpc.classify(payload)
    assert info.value.code == INVALID_REQUEST
    assert info.value.http_status == 400


# -- builders and errors --------------------------------------------------------------------


def test_message_builders_shapes() -> None:
    assert jsonrpc.result_message(7, {"a": 1}) == {"jsonrpc": "2.0", "id": 7, "result": {"a": 1}}
    assert jsonrpc.error_message(None, McpError(INVALID_PARAMS, "bad")) == {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "bad"}}
    assert jsonrpc.notification_message("notifications/x") == {"jsonrpc": "2.0", "method": "notifications/x"}
    assert jsonrpc.notification_message("n", {"k": 1})["params"] == {"k": 1}
    assert jsonrpc.request_message("r1", "roots/list", {}) == {"jsonrpc": "2.0", "id": "r1", "method": "roots/list", "params": {}}


def test_dumps_is_compact_utf8_and_round_trips() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "grüße ✓"}}
    encoded = jsonrpc.dumps(message)
    assert encoded == '{"jsonrpc":"2.0","id":1,"result":{"text":"grüße ✓"}}'.encode()
    assert json.loads(encoded) == message


def test_dumps_writes_what_the_standard_encoder_writes() -> None:
    """Values the fast encoder cannot write, or would write differently, come out as json writes them."""
    import datetime
    import decimal
    import uuid

    values = {"big": 2**70, "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), "day": datetime.date(2026, 1, 2),
              "price": decimal.Decimal("1.10"), "id": uuid.UUID(int=5), "tuple": (1, 2), "float": 1e16, "raw": b"x"}
    expected = json.dumps(values, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    assert jsonrpc.dumps(values) == expected
    assert jsonrpc.dumps({1: "int key"}) == b'{"1":"int key"}'
    assert jsonrpc.dumps({"nan": float("nan")}) == b'{"nan":null}'  # json's NaN is not JSON


def test_mcp_error_to_error_includes_data_only_when_set() -> None:
    assert McpError(-1, "m").to_error() == {"code": -1, "message": "m"}
    assert McpError(-1, "m", {"x": 0}).to_error() == {"code": -1, "message": "m", "data": {"x": 0}}
    assert McpError(-1, "m", 0).to_error()["data"] == 0
    error = invalid_params("nope", {"field": "a"})
    assert (error.code, error.http_status, error.data) == (INVALID_PARAMS, 200, {"field": "a"})
    missing = method_not_found("ping", http_status=404)
    assert (missing.code, missing.http_status, missing.message) == (METHOD_NOT_FOUND, 404, "Method not found: ping")


# -- answers.check_answer: elicitation --------------------------------------------------------

FORM = {
    "mode": "form",
    "message": "Where?",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "env": {"type": "string", "enum": ["staging", "production"]},
            "replicas": {"type": "integer"},
            "ratio": {"type": "number"},
            "confirm": {"type": "boolean"},
            "colour": {"type": "string", "oneOf": [{"const": "red", "title": "Red"}, {"const": "blue", "title": "Blue"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        },
        "required": ["env"],
    },
}


def _invalid(method: str, params: dict[str, object], answer: object) -> str:
    with pytest.raises(answers.InvalidAnswer) as info:
        answers.check_answer(method, params, answer)
    return str(info.value)


def test_check_answer_elicitation_accepts_valid_content() -> None:
    answers.check_answer(
        "elicitation/create",
        FORM,
        {"action": "accept", "content": {"env": "staging", "replicas": 3, "ratio": 0.5, "confirm": False, "colour": "blue", "tags": ["a"]}},
    )


def test_check_answer_elicitation_number_accepts_integer() -> None:
    answers.check_answer("elicitation/create", FORM, {"action": "accept", "content": {"env": "staging", "ratio": 2}})


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_check_answer_elicitation_decline_and_cancel_need_no_content(action: str) -> None:
    answers.check_answer("elicitation/create", FORM, {"action": action})


@pytest.mark.parametrize("action", [None, "yes", "ACCEPT", 1])
def test_check_answer_elicitation_unknown_action_is_invalid(action: object) -> None:
    assert '"action"' in _invalid("elicitation/create", FORM, {"action": action, "content": {"env": "staging"}})


def test_check_answer_elicitation_missing_required_field_is_invalid() -> None:
    assert "'env'" in _invalid("elicitation/create", FORM, {"action": "accept", "content": {"replicas": 1}})
    assert "'env'" in _invalid("elicitation/create", FORM, {"action": "accept"})


@pytest.mark.parametrize(
    ("field", "value"),
    [("env", 5), ("replicas", "3"), ("replicas", 2.5), ("replicas", True), ("ratio", "0.5"), ("ratio", False), ("confirm", "yes"), ("confirm", 1), ("tags", "a")],
)
def test_check_answer_elicitation_wrong_type_is_invalid(field: str, value: object) -> None:
    content = {"env": "staging", field: value}
    message = _invalid("elicitation/create", FORM, {"action": "accept", "content": content})
    assert repr(field) in message
    assert "type" in message


def test_check_answer_elicitation_value_outside_enum_is_invalid() -> None:
    message = _invalid("elicitation/create", FORM, {"action": "accept", "content": {"env": "moon"}})
    assert "'env'" in message and "staging" in message


def test_check_answer_elicitation_value_outside_one_of_consts_is_invalid() -> None:
    message = _invalid("elicitation/create", FORM, {"action": "accept", "content": {"env": "staging", "colour": "green"}})
    assert "'colour'" in message and "red" in message


def test_check_answer_elicitation_content_must_be_object() -> None:
    assert '"content"' in _invalid("elicitation/create", FORM, {"action": "accept", "content": ["staging"]})


@pytest.mark.parametrize("answer", [None, "accept", ["accept"], 1])
def test_check_answer_answer_must_be_object(answer: object) -> None:
    assert "object" in _invalid("elicitation/create", FORM, answer)


def test_fields_outside_the_schema_are_dropped_not_refused() -> None:
    """Clients send them (the conformance suite's does); a handler never sees them."""
    answer = {"action": "accept", "content": {"env": "staging", "extra": object()}}
    assert answers.checked_answer("elicitation/create", FORM, answer) == {"action": "accept", "content": {"env": "staging"}}
    assert answer["content"]["extra"] is not None, "the client's own answer is left as it is"


def test_check_answer_elicitation_url_mode_accept_skips_form_checks() -> None:
    params = {"mode": "url", "message": "Log in", "url": "https://example.com", "elicitationId": "e1"}
    answers.check_answer("elicitation/create", params, {"action": "accept"})
    assert '"action"' in _invalid("elicitation/create", params, {"action": "maybe"})


def test_check_answer_elicitation_without_mode_is_form() -> None:
    params = {"message": "x", "requestedSchema": FORM["requestedSchema"]}
    _invalid("elicitation/create", params, {"action": "accept", "content": {}})


# -- answers.check_answer: sampling and roots -------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"role": "assistant", "content": {"type": "text", "text": "yes"}},
        {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m-1", "stopReason": "endTurn"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": "1", "name": "t", "input": {}}]},
    ],
    ids=["single-block", "with-model", "block-list"],
)
def test_check_answer_sampling_valid(answer: dict[str, object]) -> None:
    answers.check_answer("sampling/createMessage", {"messages": [], "maxTokens": 5}, answer)


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        ({"role": "user", "content": {"type": "text", "text": "x"}}, '"role"'),
        ({"content": {"type": "text", "text": "x"}}, '"role"'),
        ({"role": "assistant"}, '"content"'),
        ({"role": "assistant", "content": []}, '"content"'),
        ({"role": "assistant", "content": {"text": "no type"}}, '"content"'),
        ({"role": "assistant", "content": ["text"]}, '"content"'),
        ({"role": "assistant", "content": {"type": "text", "text": "x"}, "model": 5}, '"model"'),
    ],
    ids=["user-role", "no-role", "no-content", "empty-blocks", "block-without-type", "block-not-object", "model-not-string"],
)
def test_check_answer_sampling_invalid(answer: dict[str, object], fragment: str) -> None:
    assert fragment in _invalid("sampling/createMessage", {}, answer)


def test_check_answer_roots_valid_and_empty() -> None:
    answers.check_answer("roots/list", {}, {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]})
    answers.check_answer("roots/list", {}, {"roots": []})


@pytest.mark.parametrize(
    "answer",
    [{}, {"roots": "file:///a"}, {"roots": [{"name": "no uri"}]}, {"roots": [{"uri": 5}]}, {"roots": ["file:///a"]}],
    ids=["missing", "not-list", "no-uri", "uri-not-string", "root-not-object"],
)
def test_check_answer_roots_invalid(answer: dict[str, object]) -> None:
    assert '"roots"' in _invalid("roots/list", {}, answer)


def test_check_answer_unknown_method_is_invalid() -> None:
    assert "tools/call" in _invalid("tools/call", {}, {"content": []})


def test_step_type_maps_client_request_methods() -> None:
    assert answers.step_type("elicitation/create") == "elicitation"
    assert answers.step_type("sampling/createMessage") == "sampling"
    assert answers.step_type("roots/list") == "roots"
    with pytest.raises(KeyError):
        answers.step_type("tools/call")


# -- versions ------------------------------------------------------------------------------


def test_versions_tables_are_disjoint_and_ordered() -> None:
    assert versions.HANDSHAKE_VERSIONS == tuple(sorted(versions.HANDSHAKE_VERSIONS))
    assert not set(versions.HANDSHAKE_VERSIONS) & set(versions.MODERN_VERSIONS)
    assert versions.LATEST_HANDSHAKE == "2025-11-25"
    assert versions.LATEST_MODERN == "2026-07-28"
    assert versions.SUPPORTED_VERSIONS == versions.HANDSHAKE_VERSIONS + versions.MODERN_VERSIONS
    assert versions.DEFAULT_HEADERLESS_VERSION in versions.HANDSHAKE_VERSIONS


@pytest.mark.parametrize("requested", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_negotiate_handshake_keeps_a_version_we_speak(requested: str) -> None:
    assert versions.negotiate_handshake(requested) == requested


@pytest.mark.parametrize("requested", ["2099-01-01", "2026-07-28", "", None, 20250618, ["2025-06-18"], "2025-06-18 "])
def test_negotiate_handshake_otherwise_answers_latest_handshake_version(requested: object) -> None:
    assert versions.negotiate_handshake(requested) == versions.LATEST_HANDSHAKE


def test_is_modern() -> None:
    assert versions.is_modern("2026-07-28")
    assert not versions.is_modern("2025-11-25")
    assert not versions.is_modern(None)
    assert not versions.is_modern("2099-01-01")


@pytest.mark.parametrize(
    "value",
    [12345678901234567890123, -98765432109876543210, 9223372036854775807, 2**64, 1.2345678901234567e-300],
    ids=["big", "big-negative", "int64-max", "2**64", "float"],
)
def test_parse_body_reads_long_numbers_exactly(value: object) -> None:
    """Numbers past 64 bits stay exact integers (a fast decoder would round them to floats)."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"n":%s}}}' % repr(value).encode()
    assert jsonrpc.parse_body(body).params["arguments"]["n"] == json.loads(body)["params"]["arguments"]["n"]
    assert type(jsonrpc.parse_body(body).params["arguments"]["n"]) is type(value)


def test_parse_body_refuses_the_shortest_body_nesting_one_level_too_deep() -> None:
    """parse_body scans only a body longer than 2 × MAX_DEPTH for its depth: the shortest JSON that nests
    MAX_DEPTH + 1 levels (that many "[" and as many "]") is just past it, and is refused; one level
    less passes the depth check (and is refused as the batch it is)."""
    depth = jsonrpc.MAX_DEPTH + 1
    with pytest.raises(McpError, match="nests deeper than"):
        jsonrpc.parse_body(b"[" * depth + b"]" * depth)
    with pytest.raises(McpError, match="batch requests are not supported"):
        jsonrpc.parse_body(b"[" * (depth - 1) + b"]" * (depth - 1))
    inside = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":%s}}' % (b"[" * (depth - 2) + b"]" * (depth - 2))
    with pytest.raises(McpError, match="nests deeper than"):  # the message object and params: two levels more
        jsonrpc.parse_body(inside)


@pytest.mark.parametrize(
    "body",
    [b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":"1234567890123456789 \xc3\xa9"}}', b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"m"}',
     b' \n{"jsonrpc":"2.0","id":1,"method":"m"}'],
    ids=["digits-in-a-string", "bom", "leading-whitespace"],
)
def test_parse_body_reads_what_the_standard_decoder_reads(body: bytes) -> None:
    """What the fast decoder refuses, the standard one decides: the same message as json.loads gives."""
    assert jsonrpc.parse_body(body).raw.keys() == json.loads(body).keys()
    assert repr(jsonrpc.parse_body(body).raw) == repr(json.loads(body))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
def test_a_body_that_is_not_utf_8_is_a_parse_error(encoding: str) -> None:
    """MCP's messages are UTF-8. json.loads(bytes) reads UTF-16 and UTF-32 too, and a body the fast
    decoder refused went to it: a UTF-16 line over stdio was answered, where docs/protocol.md says
    -32700. With or without a byte order mark, it is a parse error now."""
    body = '{"jsonrpc":"2.0","id":1,"method":"m"}'.encode(encoding)
    assert json.loads(body) == {"jsonrpc": "2.0", "id": 1, "method": "m"}  # what json alone would have read
    with pytest.raises(McpError) as caught:
        jsonrpc.parse_body(body)
    assert caught.value.code == PARSE_ERROR and caught.value.http_status == 400


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
@pytest.mark.parametrize("long_number", [False, True], ids=["fast", "standard"])
def test_numbers_no_json_column_can_store_are_a_parse_error(number: bytes, long_number: bool) -> None:
    """json reads NaN, Infinity and 1e400 (as inf), which no JSON column stores (SQLite's JSON_VALID
    check, PostgreSQL's jsonb): such a body is refused at the door, whichever decoder reads it."""
    filler = b',"n":12345678901234567890' if long_number else b""  # a long number sends the body to json
    body = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":%s%s}}' % (number, filler)
    with pytest.raises(McpError) as caught:
        jsonrpc.parse_body(body)
    assert caught.value.code == PARSE_ERROR and caught.value.http_status == 400
    fine = jsonrpc.parse_body(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":-1.5e308%s}}' % filler)
    assert fine.params["x"] == -1.5e308


def test_a_request_id_is_kept_as_json_dumps_wrote_it() -> None:
    """``jsonrpc.id_text`` writes ids without ``json.dumps``'s per-call encoder: rows must keep the same text
    (``"42"`` and ``42`` apart, a string id escaped to ASCII as before), for ids of every earlier row."""
    import json
    import random

    from mcp_tools.protocol.jsonrpc import id_from_text, id_text

    rng = random.Random(7)
    ids: list[object] = [0, 7, -3, 2**70, "", "42", "é\u2028\"\\\n\x00", "\ud800", "日本"]
    ids += ["".join(chr(rng.randrange(0x3000)) for _ in range(rng.randrange(10))) for _ in range(2_000)]
    for request_id in ids:
        assert id_text(request_id) == json.dumps(request_id), request_id
        assert id_from_text(id_text(request_id)) == request_id
