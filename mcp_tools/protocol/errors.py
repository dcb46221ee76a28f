"""JSON-RPC and MCP error codes, and the exception that carries them to the wire."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# 2026-07-28
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
# 2025-11-25 elicitation URL mode
URL_ELICITATION_REQUIRED = -32042
RESOURCE_NOT_FOUND = -32002


class McpError(Exception):
    """An error that is answered as a JSON-RPC error object.

    ``http_status`` is the status the Streamable HTTP transport uses when the
    error answers a whole POST (the body is still a JSON-RPC error).
    """

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        http_status: int = 200,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"McpError({self.code}, {self.message!r})"


class ResourceNotFound(McpError):
    """No resource the caller may read answers to ``uri``.

    -32602 from 2026-07-28 on (SEP-2164: servers MUST), -32002 for earlier versions, whose spec
    has servers SHOULD answer that code (server/resources, Error Handling); the dispatcher,
    which knows the request's era, turns it into the latter (:meth:`for_handshake_era`).
    """

    def __init__(self, uri: str) -> None:
        super().__init__(INVALID_PARAMS, "Resource not found", {"uri": uri})

    def for_handshake_era(self) -> ResourceNotFound:
        self.code = RESOURCE_NOT_FOUND
        return self


#: At most this many argument errors are listed (text, ``_meta``, ``data``); the rest are counted.
#: One call with a few MB of unknown keys (under ``MAX_BODY_BYTES``) was answered with each of
#: them: a response twelve times its size, built in hundreds of MB. A model corrects its call
#: from the first ones as well.
MAX_ARGUMENT_ERRORS = 50


class InvalidArguments(McpError):
    """A tool's arguments that fail its validation; ``errors`` says why, field by field
    (``[{field, message, type}]``, also the ``data.errors`` of the -32602 it is).

    On ``tools/call`` the spec makes input validation errors tool execution errors, which the
    model can read and correct (server/tools, Error Handling): the call answers
    :meth:`to_result`. Where a tool's arguments are checked for something else (a
    ``_meta.nextTool`` hint, a ``ctx.sample`` tool use) the caller reads ``errors``.

    ``errors`` keeps the first :data:`MAX_ARGUMENT_ERRORS`; ``omitted`` counts the rest, those
    given past them plus ``more`` (errors a validator counted without listing them).
    """

    def __init__(self, tool: str, errors: list[dict[str, Any]], *, more: int = 0) -> None:
        listed = errors[:MAX_ARGUMENT_ERRORS]
        self.omitted = len(errors) - len(listed) + more
        data: dict[str, Any] = {"errors": listed}
        if self.omitted:
            data["omitted"] = self.omitted
        super().__init__(INVALID_PARAMS, f"Invalid arguments for tool {tool!r}", data)
        self.errors = listed

    @classmethod
    def unknown(cls, tool: str, names: Iterable[str], count: int) -> InvalidArguments:
        """Arguments ``tool`` does not take (``count`` of them, ``names`` in the order to list them):
        pydantic's ``extra_forbidden`` errors, only the listed ones made."""
        listed = [{"field": name, "message": "Extra inputs are not permitted", "type": "extra_forbidden"}
                  for name in itertools.islice(names, MAX_ARGUMENT_ERRORS)]
        return cls(tool, listed, more=count - len(listed))

    def describe(self) -> str:
        """The message and one line per listed field error, then how many more there are, for a model to read."""
        lines = [f"{self.message}:", *(f"- {e.get('field')}: {e.get('message')}" for e in self.errors)]
        if self.omitted:
            lines.append(f"(and {self.omitted} more)")
        return "\n".join(lines)

    def to_result(self) -> dict[str, Any]:
        """The ``CallToolResult`` (``isError``) that reports the errors: :meth:`describe` as its text,
        the errors themselves in ``_meta`` (:data:`ARGUMENT_ERRORS_META`) for a program to read, and
        how many were left out (:data:`ARGUMENT_ERRORS_OMITTED_META`) when some were."""
        meta: dict[str, Any] = {ARGUMENT_ERRORS_META: self.errors}
        if self.omitted:
            meta[ARGUMENT_ERRORS_OMITTED_META] = self.omitted
        return {"content": [{"type": "text", "text": self.describe()}], "isError": True, "_meta": meta}


#: The ``_meta`` key of a tool result that reports invalid arguments: ``[{field, message, type}]``.
ARGUMENT_ERRORS_META = "mcp-tools/argumentErrors"
#: The ``_meta`` key that counts the argument errors past the :data:`MAX_ARGUMENT_ERRORS` listed (absent when none were left out).
ARGUMENT_ERRORS_OMITTED_META = "mcp-tools/argumentErrorsOmitted"


def invalid_params(message: str, data: Any = None) -> McpError:
    return McpError(INVALID_PARAMS, message, data)


def method_not_found(method: str, *, http_status: int = 200) -> McpError:
    return McpError(METHOD_NOT_FOUND, f"Method not found: {method}", http_status=http_status)
