"""JSON-RPC and MCP error codes, and the exception that carries them to the wire."""

from __future__ import annotations

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


def invalid_params(message: str, data: Any = None) -> McpError:
    return McpError(INVALID_PARAMS, message, data)


def method_not_found(method: str, *, http_status: int = 200) -> McpError:
    return McpError(METHOD_NOT_FOUND, f"Method not found: {method}", http_status=http_status)
