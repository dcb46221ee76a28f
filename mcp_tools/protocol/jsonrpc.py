"""JSON-RPC 2.0 envelopes: parsing a POST body and building answers.

Parsing uses a JSON decoder plus a few shape checks instead of pydantic models:
this runs on every request and the shapes are tiny. The models of ``mcp-types``
are used where a message carries real structure (results, capabilities,
sampling messages).

Bodies are read and answers written by ``orjson`` (an echo request's body in ~1.7 µs
instead of ~2.3 µs, its answer in ~0.3 µs instead of ~2.7 µs), with the standard
library's ``json`` behind it for whatever ``orjson`` refuses or would read otherwise,
so that what is accepted, how it reads and what is written stay ``json``'s
(:func:`parse_body`, :func:`dumps`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Literal

import orjson

from .errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, McpError

RequestId = str | int

Kind = Literal["request", "notification", "response"]


class Message:
    """One incoming JSON-RPC message, classified.

    ``id``, ``method`` and ``params`` are read out of ``raw`` once, by :func:`classify` (which
    reads them to check them): the transport asks for them several times per request.
    """

    __slots__ = ("kind", "raw", "id", "method", "params")

    def __init__(self, kind: Kind, raw: dict[str, Any], request_id: RequestId | None, method: str, params: dict[str, Any]) -> None:
        self.kind: Kind = kind
        self.raw = raw
        self.id: RequestId | None = request_id
        self.method: str = method
        #: The params object ({} when absent).
        self.params: dict[str, Any] = params

    def __repr__(self) -> str:
        return f"Message(kind={self.kind!r}, raw={self.raw!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self.kind == other.kind and self.raw == other.raw

    __hash__ = None  # type: ignore[assignment]


class InvalidMessage(McpError):
    """A message that is not one JSON-RPC 2.0 message (-32600), or not JSON at all (-32700); HTTP 400.

    ``request_id`` is the id its error answer carries: the request's, when it could be read
    (JSON-RPC 2.0 section 5), else None.
    """

    def __init__(self, message: str, request_id: RequestId | None = None, *, code: int = INVALID_REQUEST) -> None:
        super().__init__(code, message, http_status=400)
        self.request_id = request_id


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: JSON's grammar allows it, no double holds it (RFC 8259 section 6)
        raise ValueError(f"the number {text} is out of range")
    return value


#: json's decoder without its extensions: NaN, Infinity and numbers past a double's range are
#: refused as orjson refuses them (-32700), never read into values no JSON column can store.
_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)
_scan_once = _DECODER.scan_once  # type: ignore[attr-defined]  # set in JSONDecoder.__init__, not in the stubs
_whitespace = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]


def loads_text(text: str) -> Any:
    """JSON text read as a message's JSON is (``ValueError`` else): NaN, Infinity and numbers past a
    double's range are refused, as they are on the wire (-32700), never read into values no JSON
    column can store."""
    return _DECODER.decode(text)


def _loads_object_text(text: str) -> Any:
    """``json.loads(text)`` for a text that starts with ``{``: the same decoder and errors,
    without the BOM and leading-whitespace checks that such a text cannot need."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    if end != len(text):
        end = _whitespace(text, end).end()
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    return value


#: ``bytes.translate`` table: each ASCII digit becomes ``0``, every other byte a space.
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
#: 19 digits in a row: a number that may not fit in 64 bits (or a string holding one, which json reads just as well).
_LONG_NUMBER = b"0" * 19


def may_hold_long_number(data: bytes) -> bool:
    """Whether JSON text ``data`` may hold an integer past 64 bits, which orjson reads as a rounded
    float (json reads it exactly): 19 or more digits in a row."""
    # find, not ``in``: ``bytes in bytes`` first tries the operand as an integer (a byte value)
    # and raises and clears a TypeError for any other, which costs as much as the scan itself.
    return data.translate(_DIGITS_AS_ZEROS).find(_LONG_NUMBER) >= 0


def parse_body(body: bytes) -> Message:
    """Parse one POST body into a :class:`Message`.

    Raises :class:`InvalidMessage` with -32700 for malformed JSON, -32600 for
    anything that is not a single JSON-RPC 2.0 message (batches included: the
    2025-06-18 and later revisions removed them; refusing them under 2025-03-26
    is a known deviation, docs/protocol.md), and -32602 for a request with a
    string no database here can store (:data:`UNSTORABLE_MESSAGE`).
    """
    # orjson reads RFC 8259 UTF-8 only (no NaN, no lone surrogates, at most 1024 levels): whatever it
    # refuses is decided by json (_json_value), with json's errors; so are long numbers, which it
    # would read as rounded floats. What orjson read holds no lone surrogate ("checked").
    checked = not may_hold_long_number(body)
    if checked:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            checked = False
    if not checked:
        payload = _json_value(body)
    # Only a body with more than MAX_DEPTH "{" / "[" can nest that deep, and, being JSON, it closes
    # each: a shorter one is not scanned. Then a C scan, and the walk only past it.
    if len(body) > 2 * MAX_DEPTH and body.count(b"{") + body.count(b"[") > MAX_DEPTH:
        _within_depth(payload)
    message = classify(payload)
    # Requests only: a response answers a step, which the session flavor fails with the refusal
    # (a refused response would leave its call waiting for an answer no client sends again), and
    # a notification's params are not stored (a cancel must not be lost for its reason's text).
    # A response that is no JSON-RPC response at all (classify: an ``error`` that is no error object)
    # is refused like any malformed message, changing nothing: it answers no step.
    if message.kind == "request" and (not checked or body.find(b"\\u0000") >= 0):  # an escaped NUL (or "\\u0000" as text)
        if unstorable_string(payload) is not None:
            raise InvalidMessage(UNSTORABLE_MESSAGE, _readable_id(payload), code=INVALID_PARAMS)
    return message


#: A character no string of a request may hold: U+0000, which PostgreSQL's ``text`` columns refuse
#: (a request id, a resource URI, a message), and a lone surrogate (``"\\ud800"``: valid JSON, no
#: Unicode text), which has no UTF-8 (no text column of any database holds it). Neither survives
#: ``jsonb`` either (the JSON columns are ``json`` since migration 0007, whose reverse turns them
#: back). Arguments, answers and client details are stored with a call or a session: refused as
#: they arrive, on every database alike, they change nothing (accepted, a call could fail on one
#: database and not the other, and only once it first wrote its row).
UNSTORABLE_CHARACTER = re.compile("[\x00\ud800-\udfff]")
UNSTORABLE_TEXT = "a string holds U+0000 or a lone surrogate, which this server does not accept"
UNSTORABLE_MESSAGE = f"Invalid params: {UNSTORABLE_TEXT}"


def unstorable_string(value: Any) -> str | None:
    """The first string (object key or value) in JSON value ``value`` that holds U+0000 or a lone
    surrogate, else None. A valid surrogate pair is one code point in a ``str``: never matched."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if UNSTORABLE_CHARACTER.search(item) is not None:
                return item
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return None


#: How deep a message's JSON may nest. Deeper values pass the parsers (orjson reads 1,024 levels,
#: json more) but not what stores and digests them (the json encoder recurses per level and stops
#: at the interpreter's recursion limit): refused as they arrive, they change nothing. MCP's own
#: messages nest a dozen levels; tool arguments as deep as this are validated too (registry: past the
#: JSON reader's own limit of about 200, as the parsed objects).
MAX_DEPTH = 256


def _within_depth(payload: Any) -> Any:
    """``payload`` if it nests no deeper than :data:`MAX_DEPTH`, else :class:`InvalidMessage` (-32600)."""
    pending: list[tuple[Any, int]] = [(payload, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise InvalidMessage(f"Invalid request: the JSON nests deeper than {MAX_DEPTH} levels")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return payload


def _json_value(body: bytes) -> Any:
    """The JSON value of a body as json reads it (:class:`InvalidMessage` -32700 if it is not JSON):
    for what orjson refuses or would read otherwise (:func:`parse_body`)."""
    try:
        if body[:1] == b"{":
            # UTF-8 (surrogatepass, as json.loads(bytes) reads UTF-8), without the leading checks
            # that such a text cannot need: the same text, decoder and errors.
            payload = _loads_object_text(body.decode("utf-8", "surrogatepass"))
        else:
            # UTF-8 alone, a leading byte order mark ignored (RFC 8259 8.1 allows that much): MCP's
            # messages are UTF-8, and json.loads(bytes) would also read UTF-16 and UTF-32 text.
            payload = json.loads(body.decode("utf-8-sig", "surrogatepass"), parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidMessage(f"Parse error: {exc}", code=PARSE_ERROR) from None
    except RecursionError:  # "[[[[..." deeper than the interpreter's stack: the decoder recurses per level
        raise InvalidMessage("Parse error: the JSON nests too deeply", code=PARSE_ERROR) from None
    return payload


#: A member that is not there (``dict.get``'s default where ``None`` is a value: ``"id": null``).
_ABSENT: Any = object()


def classify(payload: Any) -> Message:
    """Check the JSON-RPC shape of a decoded message and say what it is.

    Raises :class:`InvalidMessage`, which carries the request's id when that could be read
    (:func:`_readable_id`): the error answer repeats it.
    """
    if not isinstance(payload, dict):
        if isinstance(payload, list):
            raise InvalidMessage("Invalid request: batch requests are not supported")
        raise InvalidMessage("Invalid request: a JSON-RPC message must be an object")
    if payload.get("jsonrpc") != "2.0":
        raise InvalidMessage('Invalid request: "jsonrpc" must be "2.0"', _readable_id(payload))
    # Each member read once (_ABSENT: not there), and handed to the Message.
    request_id = payload.get("id", _ABSENT)
    if request_id is not _ABSENT and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
        raise InvalidMessage('Invalid request: "id" must be a string or an integer')
    method = payload.get("method", _ABSENT)
    if method is not _ABSENT:
        if not isinstance(method, str) or not method:
            raise InvalidMessage('Invalid request: "method" must be a non-empty string', _readable_id(payload))
        params = payload.get("params", _ABSENT)
        if params is _ABSENT:
            params = {}
        elif not isinstance(params, dict):
            raise InvalidMessage('Invalid request: "params" must be an object', _readable_id(payload))
        if request_id is _ABSENT:
            return Message("notification", payload, None, method, params)
        return Message("request", payload, request_id, method, params)
    if request_id is not _ABSENT and (("result" in payload) != ("error" in payload)):
        if "error" in payload and not _is_error_object(payload["error"]):
            raise InvalidMessage('Invalid response: "error" must be an object with an integer "code" and a string "message"')
        params = payload.get("params")  # (a response has none: read as for any message)
        return Message("response", payload, request_id, "", params if isinstance(params, dict) else {})
    raise InvalidMessage("Invalid request: not a JSON-RPC request, notification or response")


def _is_error_object(error: Any) -> bool:
    """Whether a response's ``error`` is a JSON-RPC 2.0 error object (section 5.1): ``code`` an integer
    (a JSON true is no number, 1.5 no integer), ``message`` a string, ``data`` anything. Anything else
    is refused as it arrives, so it cannot fail the step that waits for a real answer."""
    if not isinstance(error, dict):
        return False
    code = error.get("code")
    return isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("message"), str)


def _readable_id(payload: dict[str, Any]) -> RequestId | None:
    """The id an Invalid Request's error answers with: JSON-RPC 2.0 section 5 (and MCP) has it null only
    when the id "could not be read". A request's (a message with ``method``) valid id is repeated; a
    response's id is the server's own request's, not one to answer (null here, as for any invalid message; a
    well-formed response's refusal has no ``id`` member: transports/http.py)."""
    request_id = payload.get("id")
    if "method" in payload and isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
        return request_id
    return None


_ascii_json_string = json.encoder.encode_basestring_ascii


def id_text(request_id: RequestId | None) -> str:
    """A request id as the call row keeps it: its JSON ("" for none), so ``"42"`` and ``42`` stay apart."""
    if request_id is None:
        return ""
    # json.dumps's text without its per-call encoder (~5 µs a round): an integer id as its digits,
    # a string as json.dumps writes one (ASCII, escaped), so rows keep the same text as before.
    if type(request_id) is int:
        return str(request_id)
    if type(request_id) is str:
        return _ascii_json_string(request_id)
    return json.dumps(request_id)


def id_from_text(text: str | None) -> RequestId | None:
    """The request id :func:`id_text` kept (None for none).

    Rows written before ids were kept as JSON hold ``str(id)``: text that is not a JSON
    string or integer is such a string id, read as it is.
    """
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else text


def progress_token(meta: Any) -> str | int | float | None:
    """A request's ``_meta.progressToken`` if it is one (a string or a number: ``ProgressToken`` in
    the schema), else None: a token of another type is ignored, and the request gets no progress
    notifications (a receiver MAY send none) rather than an echo of what no client can match."""
    if not isinstance(meta, dict):
        return None
    token = meta.get("progressToken")
    if isinstance(token, str):
        # Each notification repeats the token (and a session's stream stores each one for resumption):
        # a token of megabytes would make every progress report that large. Real ones are ids.
        return token if len(token) <= MAX_PROGRESS_TOKEN_CHARS else None
    return token if isinstance(token, (int, float)) and not isinstance(token, bool) else None


#: The longest string ``progressToken`` honoured (a longer one is ignored as a token of another type is).
MAX_PROGRESS_TOKEN_CHARS = 1024
#: The most JSON an ``initialize``'s ``capabilities`` or ``clientInfo`` may take: a 2025-11-25 session
#: keeps them for its life and copies the capabilities into the row of each of its calls, so they
#: must not let one request make the server store megabytes per call. Real clients send under 1 KiB.
MAX_HANDSHAKE_OBJECT_BYTES = 16 * 1024


def handshake_object(params: dict[str, Any], key: str) -> dict[str, Any]:
    """``params[key]`` of an ``initialize`` (``capabilities``, ``clientInfo``): {} if it is not an object,
    -32602 if it is larger than :data:`MAX_HANDSHAKE_OBJECT_BYTES` as JSON."""
    value = params.get(key)
    if not isinstance(value, dict):
        return {}
    if len(dumps(value)) > MAX_HANDSHAKE_OBJECT_BYTES:
        raise McpError(INVALID_PARAMS, f"initialize {key} is larger than {MAX_HANDSHAKE_OBJECT_BYTES} bytes")
    return value


def result_message(request_id: RequestId | None, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: McpError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def notification_message(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def request_message(request_id: RequestId, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def json_encoder(
    *, ensure_ascii: bool = False, separators: tuple[str, str] = (",", ":"),
    default: Callable[[Any], Any] | None = str, sort_keys: bool = False,
) -> Callable[[Any], str]:
    """``json.JSONEncoder(ensure_ascii=..., separators=..., default=..., sort_keys=...).encode``, faster.

    Calls json's C encoder built once with those options, minus its Python layers and,
    first, its circular-reference guard (a dict insert and delete per container; without
    it the encoder keeps no state between calls, so one serves every call and thread). A
    value that overflows the stack without the guard (a cycle, or nesting too deep) is
    encoded again with it, which raises what ``JSONEncoder.encode`` raises:
    ``ValueError("Circular reference detected")`` or ``RecursionError``. Same text; with
    ``default=None``, what cannot be written raises json's own ``TypeError``.
    """
    guarded = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators, default=default, sort_keys=sort_keys)
    make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if make_encoder is None:
        return guarded.encode
    quote = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    key_separator, item_separator = separators[1], separators[0]
    unguarded = make_encoder(None, guarded.default, quote, None, key_separator, item_separator, sort_keys, False, True)

    def encode(value: Any) -> str:
        try:
            return "".join(unguarded(value, 0))
        except RecursionError:
            return guarded.encode(value)

    return encode


def compact_json(*, sort_keys: bool = False) -> Callable[[Any], str]:
    """``JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, sort_keys=...).encode``, faster
    (:func:`json_encoder`)."""
    return json_encoder(sort_keys=sort_keys)


_encode = compact_json()
#: Values orjson would write differently from ``json`` with ``default=str`` go to ``default``
#: (``str``) as they do there: dates and times, and dataclasses. Subclasses of ``str``, ``int``,
#: ``dict`` and ``list`` (``IntEnum``, ``OrderedDict``) are written as their base type, as json does.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps(message: dict[str, Any]) -> bytes:
    """Serialise a message compactly: no indentation, UTF-8.

    Written by orjson; what it cannot write (integers past 64 bits, keys that are not
    strings, lone surrogates, a cycle, nesting past 254 levels) is written as before
    by json (:func:`compact_json`), which also raises what it raises. Two knowing
    differences from ``json``: a float NaN or infinity becomes ``null`` (json's ``NaN``
    is not JSON, and clients refuse it), and an :class:`~enum.Enum` that is neither a
    ``str`` nor an ``int`` is written as its value instead of ``str(member)``.
    """
    try:
        return orjson.dumps(message, default=str, option=_ORJSON_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        text = _encode(message)
    try:
        return text.encode()
    except UnicodeEncodeError:
        # A lone surrogate (a client may send "\\ud800", and have it echoed): valid as a JSON
        # escape, not as UTF-8. Written escaped, it reads back as the same string.
        return json.dumps(message, ensure_ascii=True, separators=(",", ":"), default=str).encode()
