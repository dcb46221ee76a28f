"""Streamable HTTP for both protocol eras on one URL.

A lean ASGI application (mounted through Channels' ``URLRouter``) rather than
a full Django view or an ``AsyncHttpConsumer``: it pays for no middleware
stack and no per-request channel-layer channel, which is most of the cost of
a small call. It parses, checks headers, authenticates and streams; the
method table (:mod:`mcp_tools.server`) answers.

The response to a request is JSON unless the handler emits something
(progress, a log message, a request to the client) before it finishes; then
it switches to SSE on the fly. Fast calls stay plain JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import SynchronousOnlyOperation
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http.request import split_domain_port, validate_host

from .. import store
from ..conf import RELOAD_ON, mcp_settings
from ..interprocess import broadcast, cancellation, notifications
from ..protocol import jsonrpc, versions
from ..protocol.levels import LOG_LEVELS
from ..protocol.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
)
from ..registry import Tool, registry
from ..registry.registry import SCOPE_PERMISSION_PREFIX
from ..server import RequestContext, dispatch, initialize_result, sessions
from ..server.context import StreamPaused
from ..server import oauth
from ..server.auth import (
    ANONYMOUS,
    AuthenticationFailed,
    Principal,
    anonymous_from_secret,
    authenticate_scope,
    authentication_classes,
    credential_headers,
)
from ..server.core import CLIENT_CANCELLED, Awaiting, end_call, kept_calls_written, may_use, permitted
from ..server.flavors import saga as saga_flavor, session as session_flavor
from ..server.flavors import tasks as tasks_flavor
from ..server.threads import RequestThread, release_request_thread, run_sync

logger = logging.getLogger("mcp_tools.http")

JSON_CONTENT_TYPE = (b"content-type", b"application/json")
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
NAME_PARAM = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    # The tasks extension routes by task id (SEP-2663 "Streamable HTTP: Routing Headers").
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}


#: Starts the id of a session's standalone (GET) stream: a resumed one goes on as that stream.
STANDALONE_STREAM_PREFIX = "get-"


class HttpError(Exception):
    """An answer to the whole HTTP request (status + JSON-RPC error body)."""

    def __init__(self, status: int, error: McpError, request_id: Any = None, extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error
        self.request_id = request_id
        self.extra_headers = extra_headers or []
        #: The error refuses a notification or a response the client POSTed: its body has no ``id``
        #: (the transport: "a JSON-RPC error response that has no id"; the schema's RequestId is a
        #: string or an integer, never null), where one that names no request it read has ``null``.
        self.answers_no_request = False

    def body(self) -> dict[str, Any]:
        """The JSON-RPC error this answers with."""
        if self.answers_no_request:
            return {"jsonrpc": "2.0", "error": self.error.to_error()}
        return jsonrpc.error_message(self.request_id, self.error)


#: The SSE ``retry`` of a stream ended by a failure of the server's own (:meth:`McpEndpoint.__call__`).
FAILED_STREAM_RETRY_MS = 1000


class ClientGone(Exception):
    """The client closed its connection before its request's body arrived (``http.disconnect``
    while reading it): nobody is left to answer, and nothing went wrong on our side.

    Not a ``CancelledError``: that one means the server cancels the request's task, and it must
    go on propagating; a client that leaves mid-upload is ordinary and ends the request quietly.
    """


#: Seconds a client is told to wait before trying again (``Retry-After``) when the database is unavailable.
DATABASE_RETRY_AFTER_SECONDS = 5
#: How long the 400 for ``?access_token=`` waits for a POST's body to name the request it refuses
#: (:meth:`McpEndpoint.name_the_request`); past that it answers ``"id": null``, not waiting on.
QUERY_TOKEN_BODY_SECONDS = 5.0


def database_unavailable(request_id: Any) -> HttpError:
    """503 with ``Retry-After`` and a JSON-RPC error carrying the request's id (None for what has
    none: a notification, a GET stream, a DELETE): what a client can retry, unlike a 500."""
    return HttpError(503, McpError(INTERNAL_ERROR, "Service unavailable: the database cannot be reached; try again later"),
                     request_id, extra_headers=[(b"retry-after", b"%d" % DATABASE_RETRY_AFTER_SECONDS)])


#: Header names as received -> their lower-cased text (at most MAX_HEADER_NAMES remembered).
_header_names: dict[bytes, str] = {}
MAX_HEADER_NAMES = 256


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers by lower-cased name.

    Repeated field lines are one value, joined with ", " as RFC 9110 (5.3) combines them
    ("; " for ``Cookie``, RFC 9113 8.2.3), never the last line alone: a request whose two
    ``Mcp-Name`` lines differ must not pass the check that the body's name matches, while an
    intermediary routes on the first.
    """
    raw = scope.get("headers", ())
    if not isinstance(raw, (list, tuple)):
        raw = list(raw)  # an iterable (ASGI allows one): read once
    headers: dict[str, str] = {}
    names = _header_names
    # Each line stored as it comes, without asking whether its name came before (most requests
    # repeat none): fewer names than lines tells that one did, and the lines are read again, joined.
    for raw_name, value in raw:
        headers[names.get(raw_name) or _header_name(raw_name)] = value.decode("latin-1")
    if len(headers) != len(raw):
        return _joined_headers(raw)
    return headers


def _header_name(raw_name: bytes) -> str:
    """A header name as received, as its lower-cased text (remembered, up to :data:`MAX_HEADER_NAMES`)."""
    name = raw_name.decode("latin-1").lower()
    if len(_header_names) < MAX_HEADER_NAMES:
        _header_names[raw_name] = name
    return name


def _joined_headers(raw: list[Any] | tuple[Any, ...]) -> dict[str, str]:
    """:func:`_headers` of a request that repeats a header name: its lines joined in one value."""
    headers: dict[str, str] = {}
    for raw_name, value in raw:
        name = _header_names.get(raw_name) or _header_name(raw_name)
        text = value.decode("latin-1")
        if name in headers:
            text = headers[name] + ("; " if name == "cookie" else ", ") + text
        headers[name] = text
    return headers


def ascii_number(value: str | None) -> int | None:
    """A header's non-negative decimal integer (ASCII digits, at most 18 of them), else None.

    ``str.isdigit`` alone accepts other scripts' digits ("²"), which ``int`` refuses.
    """
    if value is None or not (0 < len(value) <= 18 and value.isascii() and value.isdigit()):
        return None
    return int(value)


BASE64_PREFIX, BASE64_SUFFIX = "=?base64?", "?="


#: What a routing header may carry as it is (RFC 9110 field values: visible ASCII, space, tab); a value
#: beyond it comes base64-encoded (2026-07-28 "Value Encoding"). Headers are read as latin-1, byte for byte.
_HEADER_SAFE = re.compile(r"[\x20-\x7e\t]*")


def header_text(value: str) -> str | None:
    """A routing header's value: stripped, and decoded when it is ``=?base64?…?=`` (2026-07-28's
    encoding for values outside what a header can carry); None when that encoding is broken or
    the value holds a byte a header may not carry (the spec: such a header MUST be rejected, and
    two intermediaries may read the byte as two different characters)."""
    value = value.strip(" \t")  # RFC 9110's whitespace only: str.strip() also took \xa0, \x85 and \x1c-\x1f off the ends
    if value.startswith(BASE64_PREFIX) and value.endswith(BASE64_SUFFIX) and len(value) >= len(BASE64_PREFIX) + len(BASE64_SUFFIX):
        import base64

        try:
            return base64.b64decode(value[len(BASE64_PREFIX):-len(BASE64_SUFFIX)], validate=True).decode()
        except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
            return None
    # Printable ASCII is the common case, told by C-level checks; only a value with a tab needs the pattern.
    return value if value.isascii() and (value.isprintable() or _HEADER_SAFE.fullmatch(value)) else None


class _Hot:
    """What every request reads from the settings, derived once per configuration.

    Reading ``mcp_settings`` costs a method call per name, and the carriers of
    credentials walk the authentication classes: each request would pay for that
    again. Dropped on ``setting_changed`` (``override_settings``), like the
    caches of :mod:`mcp_tools.conf`.
    """

    __slots__ = ("max_body", "allow_anonymous", "oauth", "carriers", "hosts", "forwarded_host", "origins")

    def __init__(self) -> None:
        self.max_body = int(mcp_settings.MAX_BODY_BYTES)
        self.allow_anonymous = bool(mcp_settings.ALLOW_ANONYMOUS)
        self.oauth = oauth.enabled()
        carriers = credential_headers()
        if self.oauth and carriers is not None:
            carriers = (*carriers, "authorization")
        #: Headers that can carry credentials for the configured authenticators (None: unknown).
        self.carriers = carriers
        #: Host header values already checked against ALLOWED_HOSTS, and the verdict.
        self.hosts: dict[str, bool] = {}
        #: Django's ``USE_X_FORWARDED_HOST``: ``X-Forwarded-Host``, when sent, is the host checked.
        self.forwarded_host = bool(settings.USE_X_FORWARDED_HOST)
        origins = mcp_settings.ALLOWED_ORIGINS  # a list of origins or None (conf.ACCEPTS), so never a str
        #: ALLOWED_ORIGINS, lowercased as browsers send them (None: derived from ALLOWED_HOSTS).
        self.origins: frozenset[str] | None = None if origins is None else frozenset(origin.lower() for origin in origins)


_hot_settings: _Hot | None = None
#: Distinct Host values remembered (a client can send any; past this the memo starts over).
MAX_REMEMBERED_HOSTS = 256


def _hot() -> _Hot:
    global _hot_settings
    hot = _hot_settings
    if hot is None:
        hot = _hot_settings = _Hot()
    return hot


@receiver(setting_changed)
def _reset_hot(*, setting: str, **kwargs: Any) -> None:
    global _hot_settings
    if setting in RELOAD_ON or setting in ("DEBUG", "USE_X_FORWARDED_HOST"):
        _hot_settings = None


def _allowed_hosts() -> list[str]:
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def _host_allowed(host: str) -> bool:
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, _allowed_hosts())


def check_origin(headers: dict[str, str]) -> str | None:
    """DNS-rebinding protection: the Host and any Origin must be ours (403 otherwise).

    Returns the request's ``Origin`` once allowed (None without one): the origin a browser
    client's CORS answer names (:func:`cors_headers`).

    The host checked is the one Django's ``HttpRequest.get_host`` checks: ``X-Forwarded-Host``
    when ``USE_X_FORWARDED_HOST`` is on and the request has one (a reverse proxy that sends the
    backend's address as ``Host``), else ``Host``; its port does not count. A request with neither
    (no browser sends one) is not checked.
    """
    hot = _hot()
    host = headers.get("x-forwarded-host") if hot.forwarded_host else None
    if host is None:
        host = headers.get("host")
    if host is not None:
        known = hot.hosts
        allowed = known.get(host)
        if allowed is None:
            allowed = _host_allowed(host)
            if len(known) >= MAX_REMEMBERED_HOSTS:
                known.clear()
            known[host] = allowed
        if not allowed:
            # Named, with the fix, as Django's DisallowedHost says it (%r in the log: the client's text).
            raise HttpError(403, McpError(INVALID_REQUEST, f"Forbidden: invalid Host header {host!r}: add it to ALLOWED_HOSTS"))
    origin = headers.get("origin")
    if origin is None:
        return None
    origins = hot.origins
    if origins is not None:
        if origin.lower() in origins or "*" in origins:
            return origin
    else:
        parts = urlsplit(origin)
        if parts.hostname and validate_host(parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]", _allowed_hosts()):
            return origin
    raise HttpError(403, McpError(INVALID_REQUEST, "Forbidden: invalid Origin header"))


#: Response headers a browser script may read (CORS hides all but a few by default): the session id,
#: the protocol version, and the challenge of a 401 / 403 (MCP authorization starts from it).
CORS_EXPOSED = b"Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
CORS_METHODS = b"GET, POST, DELETE"
#: Seconds a browser may reuse a preflight's answer (Chromium caps it at 7200).
CORS_MAX_AGE = b"7200"
#: Request headers a preflight allows when it names none it can be answered with (see :func:`preflight_headers`).
CORS_REQUEST_HEADERS = ("content-type", "accept", "authorization", "mcp-protocol-version", "mcp-session-id",
                        "last-event-id", "mcp-method", "mcp-name")
#: RFC 9110 5.6.2 tchar: what a header name is made of.
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")


def cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """The CORS headers of every answer to an allowed browser origin (errors and SSE streams included).

    No ``Access-Control-Allow-Credentials``: a cross-origin page sends its credentials in a header
    (``Authorization``); with cookies allowed, any page at an allowed origin could act with the user's
    Django session.
    """
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin"),
            (b"access-control-expose-headers", CORS_EXPOSED)]


def preflight_headers(origin: str, headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """The answer to an allowed origin's CORS preflight (``OPTIONS`` with ``Access-Control-Request-Method``).

    It allows the request headers the browser asks for: the origin is trusted, and what a request may
    carry is not a fixed list (``Mcp-Param-*`` headers are per tool, authenticators read headers of
    their own). When it asks for none, or names something that is no header name, the answer lists the
    headers this transport reads.
    """
    requested = [name.strip().lower() for name in headers.get("access-control-request-headers", "").split(",")]
    if not all(name and _TOKEN_CHARS.issuperset(name) for name in requested):
        secret = str(mcp_settings.ANONYMOUS_SECRET_HEADER or "").lower()
        carriers = [name for name in _hot().carriers or () if name != "cookie"]  # no script sets a Cookie header
        requested = [*CORS_REQUEST_HEADERS, *((secret,) if secret else ()), *carriers]
    return [(b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-methods", CORS_METHODS),
            (b"access-control-allow-headers", ", ".join(dict.fromkeys(requested)).encode("latin-1")),
            (b"access-control-max-age", CORS_MAX_AGE),
            # The allowed headers echo the request's: a cache must tell preflights apart by them too.
            (b"vary", b"Origin, Access-Control-Request-Headers")]


def media_type(value: str) -> str:
    """A ``Content-Type`` value's ``type/subtype``: parameters dropped, lower-cased (RFC 9110 8.3.1: the
    tokens are case-insensitive), so ``Application/JSON; charset=utf-8`` is ``application/json`` and
    ``application/jsonx`` is not."""
    return value.partition(";")[0].strip().lower()


def media_ranges(accept: str) -> set[str]:
    """The media ranges an ``Accept`` value lists (RFC 9110 12.5.1), each as :func:`media_type` reads it."""
    return {media_type(item) for item in accept.split(",")}


def _accepts_json_and_sse(headers: dict[str, str]) -> bool:
    return _accept_lists_json_and_sse(headers.get("accept", ""))


@functools.lru_cache(maxsize=256)  # a client sends the same Accept with every request: parsed once
def _accept_lists_json_and_sse(accept: str) -> bool:
    ranges = media_ranges(accept)
    return "*/*" in ranges or (
        ("application/json" in ranges or "application/*" in ranges) and ("text/event-stream" in ranges or "text/*" in ranges))


def _accepts_sse(headers: dict[str, str]) -> bool:
    ranges = media_ranges(headers.get("accept", ""))
    return "text/event-stream" in ranges or "text/*" in ranges or "*/*" in ranges


def _unauthorized(scope: dict[str, Any], headers: dict[str, str], message: str, drf_header: str | None) -> HttpError:
    """A 401; with OAuth on, its challenge points at the protected resource metadata (RFC 9728 5.1)."""
    header = oauth.challenge(oauth.resource_of(scope, headers)) if oauth.enabled() else drf_header
    extra = [(b"www-authenticate", header.encode())] if header else []
    return HttpError(401, McpError(INVALID_REQUEST, f"Unauthorized: {message}"), extra_headers=extra)


def _token_refused(resource: str, exc: oauth.TokenRefused) -> HttpError:
    """The answer to a refused bearer token: its status and a challenge naming the error (RFC 6750 3)."""
    logger.info("Refused a bearer token: %s", exc)
    header = oauth.challenge(resource, error=exc.error, description=str(exc), scope=exc.scope)
    label = {400: "Bad Request", 403: "Forbidden"}.get(exc.status, "Unauthorized")
    return HttpError(exc.status, McpError(INVALID_REQUEST, f"{label}: {exc}"), extra_headers=[(b"www-authenticate", header.encode())])


async def authenticate_bearer(scope: dict[str, Any], headers: dict[str, str], token: str) -> Principal:
    """An OAuth bearer token, checked by the configured verifier (401 invalid_token / 403 insufficient_scope)."""
    # The URL this request reached: an include() under another path is a resource of its own.
    resource = oauth.resource_of(scope, headers)
    try:
        principal: Principal = await sync_to_async(oauth.authenticate_bearer, thread_sensitive=True)(token, resource)
    except oauth.TokenRefused as exc:
        raise _token_refused(resource, exc) from None
    return principal


#: The name RFC 6750 (2.2, 2.3) gives an access token in a form body or a query string.
ACCESS_TOKEN_PARAMETER = "access_token"


def refuse_query_token(scope: dict[str, Any], headers: dict[str, str]) -> None:
    """With OAuth on, 400 ``invalid_request`` for a request whose query string has an ``access_token``.

    The MCP authorization spec ("Access Token Usage"): access tokens MUST NOT be in the query
    string. Nor may they reach the DRF authenticators that way: django-oauth-toolkit's
    ``OAuth2Authentication`` (oauthlib) reads ``access_token`` from the query and would accept a
    token without the verifier's audience and scope checks. (A form body never reaches them: the
    body is JSON, and the DRF request is built without it.)
    """
    query = scope.get("query_string")
    if not query or not _hot().oauth:
        return
    # Parsed as oauthlib parses it (percent-decoded names, blank values kept).
    names = {name for name, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)}
    if ACCESS_TOKEN_PARAMETER in names:
        raise _token_refused(oauth.resource_of(scope, headers), oauth.TokenRefused(
            "Access tokens must be sent in the Authorization header, never in the query string",
            status=400, error="invalid_request"))


def anonymous_at_once(headers: dict[str, str]) -> bool:
    """Whether :func:`authenticate` would answer ``ANONYMOUS`` without trying anything: anonymous
    callers are allowed and no header carries credentials for the configured authenticators
    (``Authorization`` among them when OAuth is on). Spares a fast request the coroutine."""
    hot = _hot()
    return hot.allow_anonymous and hot.carriers is not None and headers.keys().isdisjoint(hot.carriers)


async def authenticate(scope: dict[str, Any], headers: dict[str, str]) -> Principal:
    """The caller of a request: its bearer token with OAuth on, else the DRF authenticators (or anonymous).

    With OAuth on, a bearer token, well formed or not, never reaches the DRF authenticators
    (:func:`oauth.bearer_token`), nor does an ``access_token`` in the query string: every request
    reaches this through :meth:`McpEndpoint.__call__`, which refused it (:func:`refuse_query_token`).
    """
    hot = _hot()
    if hot.oauth and "authorization" in headers:
        try:
            token = oauth.bearer_token(headers)
        except oauth.TokenRefused as exc:
            raise _token_refused(oauth.resource_of(scope, headers), exc) from None
        if token is not None:
            return await authenticate_bearer(scope, headers, token)
    carriers = hot.carriers
    if carriers is not None and headers.keys().isdisjoint(carriers):
        # No credentials where the configured authenticators look for them.
        if hot.allow_anonymous:
            return ANONYMOUS
        header = None
        for cls in authentication_classes():
            header = cls().authenticate_header(None)
            if header:
                break
        raise _unauthorized(scope, headers, "Authentication credentials were not provided.", header)
    try:
        try:
            # Without credentials most authenticators answer without I/O: try inline first,
            # and hop to a thread only when one of them needs the database.
            if "authorization" in headers or "cookie" in headers:
                raise SynchronousOnlyOperation
            return authenticate_scope(scope)
        except SynchronousOnlyOperation:
            return await sync_to_async(authenticate_scope, thread_sensitive=True)(scope)
    except AuthenticationFailed as exc:
        raise _unauthorized(scope, headers, str(exc), exc.www_authenticate) from None


def bind_anonymous(principal: Principal, headers: dict[str, str], request_id: Any = None) -> Principal:
    """A 2026-07-28 anonymous caller becomes the principal of the client secret it sends (if any)."""
    if principal is not ANONYMOUS:
        return principal
    try:
        return anonymous_from_secret(headers)
    except ValueError as exc:
        raise HttpError(400, McpError(INVALID_REQUEST, str(exc)), request_id) from None


async def reauthenticate(scope: dict[str, Any], headers: dict[str, str], principal: Principal,
                         session: sessions.SessionInfo | None = None) -> Principal | None:
    """The caller of a long-lived request as it is now, from the request's credentials; None when they
    no longer authenticate the same caller (what a new request with them would be refused or be).

    As a new request is authenticated: a bearer token is looked up again by the verifier (revoked,
    expired, its user made inactive: refused), DRF credentials go through the DRF authenticators
    again. The principal returned is new, so its permissions are read again (:func:`core.may_use`).
    An anonymous caller is bound as the request was: to its 2025-11-25 ``session``'s id, else
    (2026-07-28) to the client secret it sends. For the streams of :class:`StreamCaller`.
    """
    try:
        fresh = ANONYMOUS if anonymous_at_once(headers) else await authenticate(scope, headers)
        if session is None:
            fresh = bind_anonymous(fresh, headers)
        elif fresh.is_anonymous and fresh.scopes is None:  # as McpEndpoint.session_for binds it
            fresh = session.anonymous_principal
    except HttpError as exc:
        logger.info("The credentials of a long-lived request no longer authenticate its caller: %s", exc.error.message)
        return None
    except Exception:
        # The verifier's or the authenticators' database down, an introspection endpoint failing:
        # not vouched for now. The client can reconnect (and be told 503 or 401 then).
        logger.warning("Could not authenticate the caller of a long-lived request again", exc_info=True)
        return None
    if fresh.id != principal.id:
        return None
    if "user" in scope and fresh.id.startswith("user:"):
        # A Channels AuthMiddlewareStack's user was read when the connection opened: read it again.
        users = await store.active_users_of([fresh.id])
        if fresh.id not in users:
            return None
        fresh = Principal(user=users[fresh.id], id=fresh.id, auth=fresh.auth, scopes=fresh.scopes, stored=True)
    return fresh


#: Seconds for which one look-up of a stream's caller (:meth:`StreamCaller.vouch`) also vouches for
#: the notifications that were already waiting when it began: a burst costs one verifier call per
#: wave, not one per notification, and nothing queued after the look-up began goes out without one.
REVERIFY_SECONDS = 1.0


class StreamCaller:
    """The caller of a long-lived stream (2026-07-28 ``subscriptions/listen``, a 2025-11-25 session's
    GET stream) as it is now: authenticated when the stream opened, and again before notifications
    go out (:meth:`vouch`), as a new request with the stream's credentials would be.
    """

    __slots__ = ("scope", "headers", "principal", "session", "_covered", "_checked_at")

    def __init__(self, scope: dict[str, Any], headers: dict[str, str], principal: Principal,
                 session: sessions.SessionInfo | None = None) -> None:
        self.scope = scope
        self.headers = headers
        #: As last authenticated: its token's expiry is what :meth:`expired` reads.
        self.principal = principal
        #: The 2025-11-25 session of a GET stream (an anonymous caller is bound to it), else None.
        self.session = session
        #: How many more notifications the last look-up vouches for, and when it began (monotonic).
        self._covered = 0
        self._checked_at = 0.0

    def expired(self) -> bool:
        """Whether the bearer token the caller was last authenticated with has expired, by its own
        ``expires_at`` (no lookup: a stream with nothing to send asks at each keep-alive)."""
        auth = self.principal.auth
        return isinstance(auth, oauth.TokenInfo) and oauth.expired(auth)

    async def vouch(self, waiting: int) -> bool:
        """Whether a notification the stream just took from its outbox may go out: False when the
        stream's credentials no longer authenticate the caller (a token revoked or expired, a DRF
        token deleted, its user made inactive): the stream then ends, and sends nothing more.

        ``waiting``: how many notifications wait behind this one, read before anything is awaited.
        The caller is authenticated again unless a look-up that began after this notification was
        queued, less than :data:`REVERIFY_SECONDS` ago, vouched for it (it found it waiting).
        """
        now = time.monotonic()
        if self._covered > 0 and now - self._checked_at < REVERIFY_SECONDS:
            self._covered -= 1
            return True
        self._covered = 0
        current = await reauthenticate(self.scope, self.headers, self.principal, self.session)
        if current is None:
            return False
        self.principal = current
        # Those waiting now were queued before this look-up began: it vouches for them too.
        self._covered, self._checked_at = waiting, now
        return True

    async def may_receive(self, message: dict[str, Any]) -> bool:
        """Whether the caller, as :meth:`vouch` last found it, is told of ``message``: a resource
        update only if it may read the resource now (:func:`core.may_use`)."""
        if message["method"] != "notifications/resources/updated":
            return True
        uri = message.get("params", {}).get("uri")
        if await may_use(self.principal, "resources/read", uri):
            return True
        logger.info("Left out an update of %s on a stream: its caller may no longer read it", uri)
        return False


#: The methods that run a tool (:func:`check_tool_scopes`): by ``params.name``, or (``tools/resumeSaga``)
#: the tool of the call its ``sagaToken`` resumes.
SCOPED_TOOL_METHODS = frozenset(("tools/call", "tools/callSaga", "tools/resumeSaga"))


async def check_tool_scopes(scope: dict[str, Any], headers: dict[str, str], method: str, params: dict[str, Any],
                            principal: Principal, request_id: Any) -> None:
    """403 ``insufficient_scope`` for a tool the caller may use but whose scope the token lacks.

    A tool the caller could not use even with the scope stays unknown (answered by the
    method table like any hidden tool); tools/list hides both (docs/oauth.md).
    """
    if principal.scopes is None or method not in SCOPED_TOOL_METHODS:
        return
    name = params.get("name") if method != "tools/resumeSaga" else await saga_flavor.tool_of_token(params.get("sagaToken"), principal)
    tool = registry.get_tool(name) if isinstance(name, str) else None
    if tool is None:
        return
    missing = oauth.missing_scopes(principal, tool.permissions)
    if not missing or principal.is_anonymous:
        return
    django_perms = tuple(p for p in tool.permissions if not p.startswith(SCOPE_PERMISSION_PREFIX))
    if django_perms and not await run_sync(principal.has_perms, django_perms):
        return
    # Granted scopes plus the missing ones, so a step-up keeps what the client had (MCP authorization, Scope Challenge Handling).
    wanted = " ".join(sorted(set(principal.scopes) | set(missing)))
    description = f"Tool {name} needs scope {' '.join(missing)}"
    header = oauth.challenge(oauth.resource_of(scope, headers), error="insufficient_scope", description=description, scope=wanted)
    raise HttpError(403, McpError(INVALID_REQUEST, f"Forbidden: {description}"), request_id, extra_headers=[(b"www-authenticate", header.encode())])


class Response:
    """One HTTP response that starts as nothing and becomes JSON or an SSE stream."""

    def __init__(self, send: Any, session_id: str | None = None, *, event_ids: bool = False) -> None:
        self._send = send
        self.session_id = session_id
        self.event_ids = event_ids
        self.streaming = False
        self.stream_id: str | None = None
        #: The stream's priming event went out: the client holds an event id to resume it with.
        self.primed = False
        self.closed = False
        self._lock: asyncio.Lock | None = None  # made when the response first streams (most never do)
        #: The CORS headers of an allowed browser origin's request (:func:`cors_headers`), else None.
        self.cors: list[tuple[bytes, bytes]] | None = None
        #: When the stream last sent something (``time.monotonic()``): what :func:`keep_alive` measures from.
        self.last_sent = 0.0
        #: When an event id (kept for ``Last-Event-ID``) last went out on the stream (:meth:`reprime`).
        self.last_event_at = 0.0
        #: Called when the response becomes an SSE stream (a session request's handler keeps it alive then).
        self.on_streaming: Callable[[], None] | None = None

    def _base_headers(self) -> list[tuple[bytes, bytes]]:
        headers = [(b"mcp-session-id", self.session_id.encode())] if self.session_id else []
        if self.cors:
            headers += self.cors
        return headers

    def ensure_stream_id(self) -> str:
        """The id of this response's SSE stream, made on first use (a call that asks for input
        in its first round records it; most calls never stream)."""
        if self.stream_id is None:
            self.stream_id = uuid.uuid4().hex
        return self.stream_id

    async def json(self, status: int, message: dict[str, Any] | None, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        """The whole answer at once, with its length: the server need not frame it in chunks
        (uvicorn's chunked framing costs ~10 µs per response here, see docs/performance.md)."""
        if message is not None:
            body = jsonrpc.dumps(message)
            headers = [JSON_CONTENT_TYPE, (b"content-length", b"%d" % len(body))]
        else:
            body = b""
            # 204 may not carry Content-Length (RFC 9110 8.6); every other empty answer says 0.
            headers = [] if status == 204 else [(b"content-length", b"0")]
        if self.session_id:
            headers.append((b"mcp-session-id", self.session_id.encode()))
        if self.cors:
            headers += self.cors
        if extra:
            headers += extra
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        await self._send({"type": "http.response.body", "body": body})
        self.closed = True

    async def refuse(self, error: HttpError) -> None:
        """Answer the whole request with ``error``, unless an answer has started."""
        if not self.closed and not self.streaming:
            await self.json(error.status, error.body(), error.extra_headers)

    async def start_stream(self) -> None:
        if self.streaming:
            return
        self.streaming = True
        self.last_sent = time.monotonic()
        if self.on_streaming is not None:
            self.on_streaming()
        await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + self._base_headers()})
        if self.event_ids and self.session_id:
            stream_id = self.ensure_stream_id()
            # Priming event: gives the client an id to resume from before anything else happens.
            event_id = await store.append_event(self.session_id, stream_id, "")
            await self._send({"type": "http.response.body", "body": f"id: {event_id}\ndata: \n\n".encode(), "more_body": True})
            self.primed = True
            self.last_event_at = time.monotonic()

    async def reprime(self) -> None:
        """A new priming event (an id, no message) on a quiet stream: the id its client would resume with
        stays one the event log keeps. ``mcp_cleanup`` deletes events older than ``CALL_TTL``, and a
        standalone stream with nothing to say sends comments, which carry no id: its client's
        ``Last-Event-ID`` was a day old, refused (400), and the official client stopped listening for
        good (found by a review)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.closed or self.session_id is None or self.stream_id is None:
                return
            event_id = await store.append_event(self.session_id, self.stream_id, "")
            with contextlib.suppress(OSError):
                await self._send({"type": "http.response.body", "body": f"id: {event_id}\ndata: \n\n".encode(), "more_body": True})
            self.last_sent = self.last_event_at = time.monotonic()

    async def event(self, message: dict[str, Any]) -> None:
        """Send ``message`` as an event (kept for ``Last-Event-ID`` on a session's stream)."""
        await self._event(message, last=False)

    async def _event(self, message: dict[str, Any], *, last: bool, kept: bool = True) -> bool:
        """:meth:`event`; ``last``: ``message`` is the request's response, kept only if no other connection
        to the stream answered first (:func:`store.append_response_event`). False when one had: nothing
        sent, and the stream is to end. ``kept=False``: sent without an id, not kept for ``Last-Event-ID``."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self.start_stream()
            payload = jsonrpc.dumps(message).decode()
            prefix = ""
            if kept and self.event_ids and self.session_id and self.stream_id:
                if last:
                    answered_here = await store.append_response_event(self.session_id, self.stream_id, payload)
                    if answered_here is None:
                        return False
                    event_id = answered_here
                else:
                    event_id = await store.append_event(self.session_id, self.stream_id, payload)
                prefix = f"id: {event_id}\n"
                self.last_event_at = time.monotonic()
            with contextlib.suppress(OSError):
                await self._send({"type": "http.response.body", "body": f"{prefix}event: message\ndata: {payload}\n\n".encode(), "more_body": True})
            self.last_sent = time.monotonic()
            return True

    async def comment(self, body: bytes) -> None:
        """An SSE comment (``body``: ``: ...\n\n``) on the stream, between its events."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.closed:
                return
            with contextlib.suppress(OSError):
                await self._send({"type": "http.response.body", "body": body, "more_body": True})
            self.last_sent = time.monotonic()

    async def pause(self, retry_ms: int) -> None:
        """End the connection, not the SSE stream, with no response: a ``retry`` field (how long the
        client waits before it resumes the stream with ``Last-Event-ID``), then the end of the body."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # after a keep-alive comment that is going out, not inside it
            with contextlib.suppress(OSError):
                await self._send({"type": "http.response.body", "body": b"retry: %d\n\n" % retry_ms, "more_body": True})
                await self._send({"type": "http.response.body", "body": b""})
            self.closed = True

    def finish(self, message: dict[str, Any], status: int = 200, extra: list[tuple[bytes, bytes]] | None = None) -> Awaitable[None]:
        """The request's last message: an event that ends the SSE stream if the response streams, else
        the whole JSON answer. A plain function that hands back the coroutine to await, not one that
        awaits it: one coroutine less for every answer (~0.33% of a plain echo's instructions)."""
        if self.streaming:
            return self._finish_stream(message)
        return self.json(status, message, extra)

    async def _finish_stream(self, message: dict[str, Any]) -> None:
        if not await self._event(message, last=True):
            # Another connection to this stream (a resume while this one still looked open) carried
            # the response: this one ends without it, as a paused stream does (docs/protocol.md).
            await self.pause(FAILED_STREAM_RETRY_MS)
            return
        with contextlib.suppress(OSError):
            await self._send({"type": "http.response.body", "body": b""})
        self.closed = True


#: A standalone stream, a ``subscriptions/listen`` stream or a session request's stream (:func:`keep_alive`)
#: with nothing to say sends an SSE comment this often (proxies and clients close idle connections);
#: a standalone stream looks at its session then (sessions.keep_in_use).
KEEPALIVE_SECONDS = 15.0
#: A quiet standalone stream sends a new priming event this often (:meth:`Response.reprime`), and more
#: often under a short ``CALL_TTL``.
REPRIME_SECONDS = 3600.0
KEEPALIVE_COMMENT = b": keep-alive\n\n"


async def keep_alive(response: Response, gone: Callable[[], bool]) -> None:
    """Send :data:`KEEPALIVE_COMMENT` on ``response``'s SSE stream whenever it has sent nothing for
    :data:`KEEPALIVE_SECONDS`, until cancelled (or ``gone()``: its client left).

    For a 2025-11-25 session request's stream while its handler waits: for the client's answer to
    an ``elicitation/create`` (a human may take minutes), for a worker, for a call that runs
    elsewhere. The client's read timeout (the official SDK's is 300 s) and a proxy's idle timeout
    close an idle stream as they close an idle GET stream. Started when the response starts
    streaming (a call answered in JSON, as most are, pays nothing: a JSON answer has no room for a
    comment), and stopped before the request's last message.
    """
    while True:
        idle = time.monotonic() - response.last_sent if response.streaming else 0.0
        await asyncio.sleep(max(KEEPALIVE_SECONDS - idle, 0.0))
        if gone() or response.closed:
            return
        if response.streaming and time.monotonic() - response.last_sent >= KEEPALIVE_SECONDS:
            await response.comment(KEEPALIVE_COMMENT)


class McpEndpoint:
    """The ASGI application serving MCP (both eras) at one path."""

    @classmethod
    def as_asgi(cls) -> McpEndpoint:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"McpEndpoint serves HTTP, not {scope['type']}")
        # Its thread-sensitive sync code (sync tools, DRF authentication, an OAuth verifier) runs
        # in a thread of its own, not one the whole process shares (server/threads.py).
        # Entered and left here, not with ``async with``: its two coroutines were a measurable
        # part of a fast request.
        thread = RequestThread()
        thread.enter()
        try:
            headers = _headers(scope)
            response = Response(send)  # no keyword argument: a call with none makes no dict for them
            try:
                origin = check_origin(headers)
                method = scope["method"]
                if origin is not None:  # a browser's request, from an origin allowed: CORS (docs/protocol.md)
                    if method == "OPTIONS" and "access-control-request-method" in headers:
                        await response.json(204, None, preflight_headers(origin, headers))
                        return
                    response.cors = cors_headers(origin)
                try:
                    refuse_query_token(scope, headers)  # anonymous requests too (anonymous_at_once skips authenticate)
                except HttpError as refused:
                    if method == "POST":
                        await self.name_the_request(receive, headers, refused)
                    raise
                version_header = headers.get("mcp-protocol-version")
                if method == "POST":
                    await self.post(scope, receive, headers, response)
                elif method == "GET":
                    if versions.is_modern(version_header):
                        raise HttpError(405, McpError(INVALID_REQUEST, "Method not allowed: the 2026-07-28 protocol has no GET stream"), extra_headers=[(b"allow", b"POST")])
                    await self.get(scope, receive, headers, response)
                elif method == "DELETE":
                    if versions.is_modern(version_header):
                        raise HttpError(405, McpError(INVALID_REQUEST, "Method not allowed"), extra_headers=[(b"allow", b"POST")])
                    await self.delete(scope, headers, response)
                else:
                    raise HttpError(405, McpError(INVALID_REQUEST, f"Method not allowed: {method}"), extra_headers=[(b"allow", b"GET, POST, DELETE")])
            except HttpError as exc:
                logger.info("%s %s -> %s: %r", scope["method"], scope.get("path"), exc.status, exc.error.message)
                await response.refuse(exc)
            except ClientGone:
                # Nothing to answer (and no one to answer it to); an ASGI server logs at ERROR
                # whatever the application raises, so this ends the request here.
                logger.debug("%s %s: the client left before its request's body arrived", scope["method"], scope.get("path"))
            except asyncio.CancelledError:
                # The server stops (or gives up on a request its client left): not before the calls
                # it stopped are kept for their clients' resume (daphne stops its loop once the
                # first request it cancelled has ended).
                await kept_calls_written()
                raise
            except Exception as exc:
                if store.database_unreachable(exc):  # a GET stream's or a DELETE's session lookup (a POST's: post())
                    logger.exception("Database unavailable serving %s %s", scope["method"], scope.get("path"))
                    await response.refuse(database_unavailable(None))
                    return
                # A failure of ours (a bug, a statement the database refused): logged with its
                # traceback here, answered without one.
                logger.exception("Internal error serving %s %s", scope["method"], scope.get("path"))
                if not response.closed and not response.streaming:
                    await response.json(500, jsonrpc.error_message(None, McpError(INTERNAL_ERROR, "Internal error")))
                elif not response.closed:
                    # A stream under way: ended, with when to resume it (Last-Event-ID, where it has event
                    # ids). Left open, daphne held the connection without a byte until the client gave up.
                    await response.pause(FAILED_STREAM_RETRY_MS)
        finally:
            closing = thread.leave()
            if closing is not None:
                await asyncio.wrap_future(closing)

    # -- POST ---------------------------------------------------------------------------
    async def read_body(self, receive: Any, headers: dict[str, str]) -> bytes:
        limit = _hot().max_body
        declared = ascii_number(headers.get("content-length"))
        if declared is not None and declared > limit:
            raise HttpError(413, McpError(INVALID_REQUEST, f"Request body larger than {limit} bytes"))
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise HttpError(413, McpError(INVALID_REQUEST, f"Request body larger than {limit} bytes"))
            if not message.get("more_body"):
                if not chunks:
                    return chunk  # the usual case: the whole body in one message
                chunks.append(chunk)
                return b"".join(chunks)
            chunks.append(chunk)

    async def name_the_request(self, receive: Any, headers: dict[str, str], refused: HttpError) -> None:
        """Give ``refused``, a POST's refusal before its body was read (``?access_token=``), the id of
        the request the body holds, as :meth:`post` gives its own refusals: none for a notification or a
        response, null for a body that names no request. The body is read as any POST's is (bounded by
        ``MAX_BODY_BYTES``); one larger than that is not read, and the refusal says null, as it does for
        a body that has not come within :data:`QUERY_TOKEN_BODY_SECONDS` (the refusal went at once before
        its id was looked for: a client that never sent the body it declared got no answer at all)."""
        try:
            body = await asyncio.wait_for(self.read_body(receive, headers), QUERY_TOKEN_BODY_SECONDS)
        except (HttpError, asyncio.TimeoutError):
            return
        try:
            message = jsonrpc.parse_body(body)
        except jsonrpc.InvalidMessage as exc:
            refused.request_id = exc.request_id
            return
        if message.kind != "request":
            refused.answers_no_request = True
        else:
            refused.request_id = message.id

    async def post(self, scope: dict[str, Any], receive: Any, headers: dict[str, str], response: Response) -> None:
        if media_type(headers.get("content-type", "")) != "application/json":
            raise HttpError(415, McpError(INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"))
        if not _accepts_json_and_sse(headers):
            raise HttpError(406, McpError(INVALID_REQUEST, "Not Acceptable: Accept must list application/json and text/event-stream"))
        body = await self.read_body(receive, headers)
        try:
            message = jsonrpc.parse_body(body)
        except jsonrpc.InvalidMessage as exc:
            raise HttpError(400, exc, exc.request_id) from None
        version_header = headers.get("mcp-protocol-version")
        try:
            # A request whose _meta names a 2026-07-28 version is one, whatever its header says: a
            # handshake-era or missing header is then a mismatch (-32020), not "Mcp-Session-Id required".
            if version_header in versions.MODERN_VERSIONS or (
                message.kind == "request" and isinstance(meta := message.params.get("_meta"), dict)
                and versions.META_PROTOCOL_VERSION in meta and (
                    (version_header is not None and version_header not in versions.HANDSHAKE_VERSIONS)
                    or meta[versions.META_PROTOCOL_VERSION] in versions.MODERN_VERSIONS)
            ):
                await self.post_modern(scope, receive, headers, message, response)
            else:
                await self.post_handshake(scope, receive, headers, message, response)
        except HttpError as exc:
            # Errors about a request answer with its id (401s from authentication included); those
            # about a notification or a response, with none.
            if message.kind != "request":
                exc.answers_no_request = True
            elif exc.request_id is None:
                exc.request_id = message.id
            raise
        except store.DATABASE_UNAVAILABLE as exc:
            if not store.database_unreachable(exc):
                raise  # a statement's own failure: a 500, as any other
            # Before the request runs (its session, its caller's authentication, a new session):
            # 503 with its id, in both eras, not a 500 with "id": null. The database failing while
            # the request runs is answered by run_request, as any failure there.
            logger.exception("Database unavailable serving POST %s", scope.get("path"))
            unavailable = database_unavailable(message.id if message.kind == "request" else None)
            unavailable.answers_no_request = message.kind != "request"
            raise unavailable from exc

    async def post_modern(self, scope: dict[str, Any], receive: Any, headers: dict[str, str], message: jsonrpc.Message, response: Response) -> None:
        if message.kind != "request":
            # Nothing to run, but credentials that are sent must be good (MCP authorization: an
            # invalid or expired token gets 401), and a server that admits no anonymous caller
            # accepts nothing from one.
            if not anonymous_at_once(headers):
                await authenticate(scope, headers)
            await response.json(202, None)
            return
        request_id = message.id
        method = message.method
        params = message.params
        meta = params.get("_meta")
        if not isinstance(meta, dict) or not isinstance(meta.get(versions.META_PROTOCOL_VERSION), str) or not isinstance(meta.get(versions.META_CLIENT_CAPABILITIES), dict):
            raise HttpError(400, McpError(INVALID_PARAMS, "Invalid _meta: protocolVersion and clientCapabilities are required"), request_id)
        version = meta[versions.META_PROTOCOL_VERSION]
        header_version = headers.get("mcp-protocol-version")
        if header_version != version:
            raise HttpError(400, McpError(HEADER_MISMATCH, "MCP-Protocol-Version header does not match _meta protocolVersion"), request_id)
        if version not in versions.MODERN_VERSIONS:
            raise HttpError(400, McpError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                                          {"supported": list(versions.MODERN_VERSIONS), "requested": version}), request_id)
        header_method = headers.get("mcp-method")
        if header_method is None or header_method.strip(" \t") != method:
            raise HttpError(400, McpError(HEADER_MISMATCH, "Mcp-Method header is missing or does not match the request method"), request_id)
        name_key = NAME_PARAM.get(method)
        if name_key is not None and name_key in params:
            header_name = headers.get("mcp-name")
            name_text = None if header_name is None else header_text(header_name)
            if name_text is None or name_text != params.get(name_key):
                raise HttpError(400, McpError(HEADER_MISMATCH, f"Mcp-Name header is missing or does not match params.{name_key}"), request_id)
        elif method == "tools/callSaga" and "mcp-name" in headers and header_text(headers["mcp-name"]) != params.get("name"):
            # The spec requires Mcp-Name of tools/call, prompts/get and resources/read only (the official
            # SDK sends none with an extension's request); one that a saga does send must not lie about
            # the tool it starts (a gateway routes on it).
            raise HttpError(400, McpError(HEADER_MISMATCH, "Mcp-Name header does not match params.name"), request_id)
        # Authentication first: the header check names the tool and its headers, which a caller
        # who may not use the tool must not learn (nor one who has not said who they are).
        principal = bind_anonymous(ANONYMOUS if anonymous_at_once(headers) else await authenticate(scope, headers), headers, request_id)
        if method == "tools/call" or method == "tools/callSaga":
            # Mcp-Param-* headers that disagree with the arguments: a coroutine only for a refusal. A saga's
            # are checked as sent (a client need send none with an extension's request, as for Mcp-Name).
            refusal = _param_header_refusal(headers, params, required=method == "tools/call")
            if refusal is not None:
                await refuse_param_headers(refusal, principal, request_id)
        if principal.scopes is not None:  # an OAuth token (what check_tool_scopes looks at)
            await check_tool_scopes(scope, headers, method, params, principal, request_id)
        if method == "subscriptions/listen":
            await self.listen(scope, headers, receive, response, request_id, params, principal)
            return
        log_level = meta.get("io.modelcontextprotocol/logLevel")
        if log_level is not None and log_level not in LOG_LEVELS:
            raise HttpError(400, McpError(INVALID_PARAMS, f"Invalid _meta logLevel: must be one of {', '.join(LOG_LEVELS)}"), request_id)
        # The fields without a default by position, the others set after: called with keywords,
        # the class gets them as a dict, which its __init__ matches name by name (~1.5% of an echo).
        rc = RequestContext(principal, version, True, meta[versions.META_CLIENT_CAPABILITIES])
        rc.request_id = request_id
        rc.log_level = log_level
        rc.progress_token = jsonrpc.progress_token(meta)
        rc.emit = response.event
        await self.run_request(receive, response, method, params, rc, None)

    async def post_handshake(self, scope: dict[str, Any], receive: Any, headers: dict[str, str], message: jsonrpc.Message, response: Response) -> None:
        if message.kind == "request" and message.method == "initialize":
            if headers.get("mcp-session-id"):
                # Initialization is a session's first interaction, once (lifecycle): a client
                # starts a new session with an initialize that carries no session id.
                raise HttpError(400, McpError(INVALID_REQUEST, "Invalid Request: initialize must not carry Mcp-Session-Id "
                                                               "(send it without the header to start a new session)"), message.id)
            await self.initialize(scope, headers, message, response)
            return
        # A refusal names the id of a request only: a response's id is the server's own request's,
        # not one to answer (jsonrpc._readable_id's rule, and the unknown-id path's).
        principal, session = await self.session_for(scope, headers, message.id if message.kind == "request" else None)
        session_id = session.id
        response.session_id = session_id
        response.event_ids = True
        # The stream id is made on first use (rc.stream_id), before anything is sent, so a
        # call that asks for input in its first round can record it and be resumed with
        # Last-Event-ID; a call that never streams does not pay for it.
        meta = message.params.get("_meta")
        # Built as post_modern builds it (the fields without a default by position: no keyword dict).
        rc = RequestContext(principal, session.protocol_version, False, session.client_capabilities)
        rc.request_id = message.id
        rc.session_id = session_id
        rc.log_level = session.log_level
        rc.current_log_level = functools.partial(sessions.log_level, session_id, session.log_level)
        rc.progress_token = jsonrpc.progress_token(meta)
        rc.emit = response.event
        rc.stream_id = response.ensure_stream_id
        rc.survives_server_stop = True
        rc.stream_resumable = lambda: response.primed
        if message.kind == "notification":
            if message.method == "notifications/cancelled":
                await session_flavor.cancel_request(session_id, message.params.get("requestId"))
            await response.json(202, None)
            return
        if message.kind == "response":
            refused = await session_flavor.accept_client_response(message.raw, rc)
            if refused is None:
                await response.json(202, None)
            else:
                # A response the server cannot accept: an HTTP error status, and a JSON-RPC error with
                # no id (post: it refuses no request); its id is the server's request's, not one to answer.
                raise HttpError(400, refused)
            return
        if principal.scopes is not None:  # an OAuth token (what check_tool_scopes looks at)
            await check_tool_scopes(scope, headers, message.method, message.params, principal, message.id)
        await self.run_request(receive, response, message.method, message.params, rc, session_id)

    async def session_for(self, scope: dict[str, Any], headers: dict[str, str], request_id: Any = None) -> tuple[Principal, Any]:
        """The caller and their 2025-11-25 session (400 without the header, 404 if unknown, ended or not theirs).

        A ``MCP-Protocol-Version`` header, when sent, must be a version this transport speaks and the
        one the session negotiated (400 otherwise, for POST, GET and DELETE alike); without it the
        request is served as the session's version.
        """
        version_header = headers.get("mcp-protocol-version")
        if version_header is not None and version_header not in versions.HANDSHAKE_VERSIONS:
            raise HttpError(400, McpError(INVALID_REQUEST, f"Unsupported MCP-Protocol-Version: {version_header}"), request_id)
        session_id = headers.get("mcp-session-id")
        if not session_id:
            raise HttpError(400, McpError(INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"), request_id)
        principal = ANONYMOUS if anonymous_at_once(headers) else await authenticate(scope, headers)
        session = await sessions.get(session_id)
        if session is None or session.principal != principal.id:
            raise HttpError(404, McpError(INVALID_REQUEST, "Session not found"), request_id)
        if version_header is not None and version_header != session.protocol_version:
            raise HttpError(400, McpError(INVALID_REQUEST, f"MCP-Protocol-Version {version_header} is not the session's "
                                                           f"negotiated version ({session.protocol_version})"), request_id)
        if principal.is_anonymous and principal.scopes is None:
            # Anonymous callers are told apart by their session: its id is their secret.
            principal = session.anonymous_principal
        return principal, session

    async def initialize(self, scope: dict[str, Any], headers: dict[str, str], message: jsonrpc.Message, response: Response) -> None:
        params = message.params
        version_header = headers.get("mcp-protocol-version")
        if version_header is not None and version_header not in versions.HANDSHAKE_VERSIONS:
            # As on every other request (session_for): a version this transport does not speak is 400
            # (2025-11-25 transports), not a session that refuses the client's next request.
            raise HttpError(400, McpError(INVALID_REQUEST, f"Unsupported MCP-Protocol-Version: {version_header}"), message.id)
        if not isinstance(params.get("protocolVersion"), str):
            raise HttpError(400, McpError(INVALID_PARAMS, 'initialize needs "protocolVersion"'), message.id)
        try:
            capabilities = jsonrpc.handshake_object(params, "capabilities")
            client_info = jsonrpc.handshake_object(params, "clientInfo")
        except McpError as exc:
            raise HttpError(400, exc, message.id) from None
        principal = await authenticate(scope, headers)
        negotiated = versions.negotiate_handshake(params["protocolVersion"])
        session_id = await store.create_session(negotiated, client_info, capabilities, principal.id)
        response.session_id = session_id
        await response.json(200, jsonrpc.result_message(message.id, initialize_result(negotiated)))

    async def run_request(self, receive: Any, response: Response, method: str, params: dict[str, Any], rc: RequestContext, session_id: str | None) -> None:
        """Run the handler in this request's task; a client that closes the response stream cancels it.

        The handler is awaited here, not in a task of its own: a call that never waits
        (most fast calls) costs no task, no loop round trip and no disconnect watcher.
        The watcher (a task reading ``receive()``) starts when the handler first waits.
        Whoever stops the handler (the watcher on ``http.disconnect``, the session's
        ``notifications/cancelled``) goes through :class:`_Handler`, which cancels this
        task only while the handler runs and remembers that it did.
        """
        handler = _Handler(receive, rc, response)
        # Only .cancel() is called on what is registered (interprocess.cancellation).
        registered = cancellation.register(session_id, rc.request_id, handler) if session_id else None
        try:
            try:
                handler.running = True
                try:
                    result = await Awaiting(dispatch(method, params, rc), handler.start_watcher)
                finally:
                    handler.running = False
                    handler.stop_watcher()
            except asyncio.CancelledError:
                requested = handler.requested
                if not handler.handler_cancelled():
                    raise  # this request's task itself is being cancelled (the server shuts down)
                if handler.disconnected:
                    return
                if not requested:
                    # Nobody cancelled anything: code the request ran raised CancelledError itself (a
                    # completer's library timing out; a tool's own is a tool error, core.execute). A
                    # failure, answered as one: taken for notifications/cancelled, it got a 202 with
                    # no body, which a client reads as no answer ever coming.
                    logger.error("Unhandled CancelledError in %r, though nothing cancelled it", method, exc_info=True)
                    await response.finish(jsonrpc.error_message(rc.request_id, McpError(INTERNAL_ERROR, "Internal error")))
                    return
                # notifications/cancelled: the client expects no response for the request. A request is
                # still answered with an event stream or JSON (2025-11-25 transport: 202 is for
                # notifications and responses), so one that had not streamed yet gets a stream that
                # closes with no message.
                with contextlib.suppress(OSError):
                    if not response.streaming:
                        response.streaming = True
                        await response._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + response._base_headers()})
                    await response._send({"type": "http.response.body", "body": b""})
                return
            except McpError as exc:
                handler.handler_cancelled()
                if isinstance(exc, StreamPaused) and response.primed:
                    # Not an answer: the request goes on where the client resumes the stream.
                    logger.info("%r: its stream pauses (%s); the client resumes it", method, exc.message)
                    await response.pause(exc.retry_ms)
                    return
                # %r: the method and the message (an unknown tool's name) are the client's text, which could
                # otherwise write a line of its own into the log (a newline in a tool name).
                logger.info("%r -> error %s: %r", method, exc.code, exc.message)
                status = exc.http_status if rc.modern else 200
                await response.finish(jsonrpc.error_message(rc.request_id, exc), status)
                return
            except Exception:
                handler.handler_cancelled()
                logger.exception("Unhandled error in %r", method)
                await response.finish(jsonrpc.error_message(rc.request_id, McpError(INTERNAL_ERROR, "Internal error")))
                return
            if handler.requested:  # stopped, but the handler returned all the same
                handler.handler_cancelled()
            if handler.disconnected and (not handler.detached or await _answered_by_its_row(response)):
                return  # the handler finished anyway, but nobody is listening (or a resume answers from the row)
            # (Detached, a call without a row: its stream closed under it; the answer goes to the
            # stream's event log, for the client to resume with Last-Event-ID. The send goes nowhere.)
            await response.finish(jsonrpc.result_message(rc.request_id, result))
        finally:
            if registered is not None:
                cancellation.unregister(registered, handler)

    # -- subscriptions/listen (2026-07-28) ----------------------------------------------
    async def listen(self, scope: dict[str, Any], headers: dict[str, str], receive: Any, response: Response, request_id: Any,
                     params: dict[str, Any], principal: Principal) -> None:
        """``subscriptions/listen``: list changes and updates of the resources asked for, until the client leaves.

        The caller is authenticated again before notifications go out (:meth:`StreamCaller.vouch`):
        credentials that no longer authenticate it (a revoked or expired token, a user made
        inactive) end the stream, and a resource update goes out only if the caller may read the
        resource now (:func:`core.may_use`), as ``notify_resource_updated`` checks 2025-11-25
        sessions. A token that expires ends the stream at the next keep-alive too (no lookup).
        """
        wanted = await listen_filter(params, request_id, principal)
        uris: list[str] = wanted.get("resourceSubscriptions", [])
        kinds = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}
        # The subscription's id is the listen request's JSON-RPC id, as it was sent (a RequestId).
        meta = {"io.modelcontextprotocol/subscriptionId": request_id}
        # Bounded, one per kind or URI: a client that stops reading costs no more (notifications.Outbox).
        outbox = notifications.Outbox()

        def on_change(kind: str) -> None:
            if wanted.get(kinds.get(kind, "")):
                outbox.put(jsonrpc.notification_message(f"notifications/{kind}/list_changed"))

        caller = StreamCaller(scope, headers, principal)
        registry.add_listener(on_change)
        notifications.listen_to_resources(uris, outbox)
        watcher = asyncio.ensure_future(receive())
        getter: asyncio.Future[dict[str, Any]] | None = None
        try:
            await response.event(jsonrpc.notification_message("notifications/subscriptions/acknowledged", {"_meta": meta, "notifications": wanted}))
            while True:
                release_request_thread()  # for as long as the client listens: no thread, no connection
                getter = asyncio.ensure_future(outbox.get())
                done, _ = await asyncio.wait({getter, watcher}, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
                if watcher in done:
                    getter.cancel()
                    return
                if getter not in done:
                    getter.cancel()
                    if caller.expired():
                        await self.end_unvouched(response, "subscriptions/listen", "its access token expired")
                        return
                    # Idle: a comment, or the client's read timeout (the SDK's is 300 s) or a proxy's
                    # idle timeout closes the stream and the subscription is lost.
                    await response._send({"type": "http.response.body", "body": KEEPALIVE_COMMENT, "more_body": True})
                    continue
                message = getter.result()
                # Sent only to the caller as it is now: what a new request with its credentials would be.
                if not await caller.vouch(outbox.qsize()):
                    await self.end_unvouched(response, "subscriptions/listen", "its credentials no longer authenticate the caller")
                    return
                if not await caller.may_receive(message):
                    continue
                # Tagged here, not when queued: the outbox knows a notification by its method and URI only.
                await response.event(jsonrpc.notification_message(message["method"], {**message.get("params", {}), "_meta": meta}))
        except asyncio.CancelledError:
            # The server stops (its shutdown cancels the request): "When the server ends a subscription on
            # its own initiative (for example, during shutdown), it SHOULD respond to the original
            # subscriptions/listen request with a completion result before closing the stream". Briefly:
            # a connection already gone takes nothing.
            if not watcher.done():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(response.finish(jsonrpc.result_message(request_id, {"resultType": "complete", "_meta": meta})), 1.0)
            raise
        finally:
            # A request cancelled in asyncio.wait (a server stop, an ASGI server's disconnect) leaves
            # the getter pending: cancelled here, not destroyed pending by the garbage collector.
            if getter is not None:
                getter.cancel()
            watcher.cancel()
            registry.remove_listener(on_change)
            notifications.stop_listening(uris, outbox)

    @staticmethod
    async def end_unvouched(response: Response, stream: str, why: str) -> None:
        """End a stream whose caller :class:`StreamCaller` no longer vouches for (a ``subscriptions/listen``
        stream without its response): to the client an unexpected end, after which it opens a new
        one (a GET stream reconnects), and its credentials are then refused (401) as any request's."""
        logger.info("Ended a %s stream: %s", stream, why)
        with contextlib.suppress(OSError):
            await response._send({"type": "http.response.body", "body": b""})

    # -- GET: the standalone stream, or a resumed one ----------------------------------
    async def get(self, scope: dict[str, Any], receive: Any, headers: dict[str, str], response: Response) -> None:
        if not _accepts_sse(headers):
            raise HttpError(406, McpError(INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"))
        principal, session = await self.session_for(scope, headers)
        session_id = session.id
        await self.read_body(receive, headers)  # consume http.request: the next receive() is the disconnect
        # The request's own response (its CORS headers, and an error after the stream started is not a second start).
        response.session_id = session_id
        response.event_ids = True
        caller = StreamCaller(scope, headers, principal, session)
        given = headers.get("last-event-id", "").strip()
        if given:
            last_event_id = ascii_number(given)
            if last_event_id is None:  # our event ids are decimal numbers
                raise HttpError(400, McpError(INVALID_REQUEST, "Invalid Last-Event-ID"))
            await self.resume(receive, response, session, caller, last_event_id)
            return
        await self.standalone(receive, response, caller)

    async def resume(self, receive: Any, response: Response, session: Any, caller: StreamCaller, last_event_id: int) -> None:
        found = await store.stream_of_event(last_event_id)
        if found is None or found[0] != session.id:
            # 400, not 404: the session lives (the 2025-11-25 transport says 404 is a session that ended,
            # and a client would start a new one); only this stream cannot be resumed (its events trimmed).
            raise HttpError(400, McpError(INVALID_REQUEST, "Unknown Last-Event-ID"))
        stream_id = found[1]
        call_id = None if stream_id.startswith(STANDALONE_STREAM_PREFIX) else await store.call_for_stream(stream_id)
        # Whether the caller may still use what the call runs (a permission taken away since it started).
        refused = await session_flavor.refused_on_resume(call_id, caller.principal) if call_id is not None else None
        response.stream_id = stream_id
        response.streaming = True
        await response._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + response._base_headers()})
        # Some servers send headers only with the first body bytes: send a comment now.
        await response._send({"type": "http.response.body", "body": b": resumed\n\n", "more_body": True})
        events = await store.events_after(stream_id, last_event_id)
        if refused is not None and call_id is not None:
            await self.refuse_resumed(response, stream_id, call_id, events, refused)
            return
        already_sent: set[str] = set()  # our requests the replay carries now (and, below, those the client had)
        answered: set[Any] = set()  # ids of the responses the stream carried: seen by the client, or replayed now
        replayed_updates: set[str] = set()  # the resources whose updates the replay carries
        for event_id, payload in events:
            if payload:
                kind, message_id = _kind_and_id(payload)
                if kind == "notification" and '"notifications/resources/updated"' in payload:
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        replayed_updates.add(json.loads(payload)["params"]["uri"])
                if kind == "response" and message_id in answered:
                    continue  # one response per request: a second one kept (a detached handler's and a resumed stream's) is not sent
                if kind == "request" and str(message_id) in already_sent:
                    # One request once: two connections to the stream (a resume while the client's
                    # earlier one still looked open) each sent it, and each kept it in the log.
                    continue
                await response._send({"type": "http.response.body", "body": f"id: {event_id}\nevent: message\ndata: {payload}\n\n".encode(), "more_body": True})
                if kind == "request":
                    already_sent.add(str(message_id))
                elif kind == "response":
                    answered.add(message_id)
        if not answered and not stream_id.startswith(STANDALONE_STREAM_PREFIX):
            # A client that resumes at (or after) the event that carried the response has it, and must
            # not get it again under a new event id: the response is a POST stream's last event.
            newest = await store.last_event_of_stream(stream_id)
            kind, message_id = _kind_and_id(newest) if newest else ("", None)
            if kind == "response":
                answered.add(message_id)
        if stream_id.startswith(STANDALONE_STREAM_PREFIX):
            # The standalone stream (the official client always reconnects it with Last-Event-ID):
            # it goes on, under the same stream id, once what it missed is replayed, and the resource
            # updates made while no stream was open to carry them are told (at most one per URI).
            await self.standalone(receive, response, caller, missed_since=(last_event_id, replayed_updates))
            return
        request_id = jsonrpc.id_from_text(await store.call_request_id(call_id)) if call_id is not None else None
        if call_id is None or (request_id is not None and request_id in answered):
            # Nothing runs on this stream, or it carried its response already (before last_event_id,
            # at it, or in the replay just sent): one response per request.
            await response._send({"type": "http.response.body", "body": b""})
            return
        # Requests the stream carried up to last_event_id reached the client: not sent again (a second
        # elicitation dialog), only those it never carried (session_flavor.requests_carried).
        already_sent |= await session_flavor.requests_carried(stream_id, last_event_id)
        # The call's progress goes on under the request's progressToken, from above the last value the client saw.
        progress_token = await store.call_progress_token(call_id)
        progress_sent = await store.last_progress_on_stream(stream_id) if progress_token is not None else None
        rc = RequestContext(principal=caller.principal, protocol_version=session.protocol_version, modern=False,
                            client_capabilities=session.client_capabilities, request_id=request_id, session_id=session.id,
                            log_level=session.log_level, emit=response.event, stream_id=lambda: stream_id,
                            current_log_level=functools.partial(sessions.log_level, session.id, session.log_level),
                            progress_token=progress_token, progress_sent=progress_sent, survives_server_stop=True)
        task = asyncio.ensure_future(session_flavor.continue_call(call_id, rc, already_sent))
        stopper = _RequestedStop(task, rc)
        # The request goes on on this stream: the client's notifications/cancelled stops it here.
        registered = cancellation.register(session.id, request_id, stopper) if request_id is not None else None
        watcher = asyncio.ensure_future(receive())
        response.last_sent = time.monotonic()
        keeper = asyncio.ensure_future(keep_alive(response, watcher.done))  # as a POST's stream that waits
        try:
            try:
                done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                keeper.cancel()
            if task not in done:
                # The resumed stream closed too: not a cancellation either. A call this stream ran
                # again (its first run was gone) stays working, for the next resume to go on with.
                rc.stream_closed = True
                task.cancel()
                return
            if task.cancelled() or task.cancelling():
                # (cancelling: the cancel came as the call ended, and what the task awaited returned
                # all the same: the client asked for no answer.)
                # notifications/cancelled: the call ends cancelled (a handler running here ended it
                # already; one that waited, or runs elsewhere, ends now) and the client expects no response.
                # Not a task's: it stops its tasks/result request, and tasks/cancel ends a task (checked
                # here, as the cancel may come before the task flavor's own guard was reached).
                loaded = await store.load_call(call_id)
                if loaded is None or loaded[0].flavor != "task":
                    await end_call(call_id, "cancelled", CLIENT_CANCELLED)
                await response._send({"type": "http.response.body", "body": b""})
                return
            try:
                result = task.result()
            except StreamPaused as paused:
                await response.pause(paused.retry_ms)  # resumed again, from its last event, as before
                return
            except McpError as exc:
                await response.finish(jsonrpc.error_message(request_id, exc))
                return
            if result is not None:
                await response.finish(jsonrpc.result_message(request_id, result))
            else:
                await response._send({"type": "http.response.body", "body": b""})
        finally:
            if not task.done():
                # This request was cancelled from outside (the server stopping, the ASGI server's
                # disconnect) while it waited: as a closed stream, the call stays as it is for the
                # next resume; the run this request started ends with it, not unheard.
                rc.stream_closed = True
                task.cancel()
            watcher.cancel()
            if registered is not None:
                cancellation.unregister(registered, stopper)

    @staticmethod
    async def refuse_resumed(response: Response, stream_id: str, call_id: str, events: list[tuple[int, str]], refused: McpError) -> None:
        """End a resumed stream whose call the caller may no longer use (a permission taken away since it
        started): its request is answered as a new request of it would be ("Unknown tool"), as a
        task's ``tasks/result`` answers "Unknown task"; nothing it missed is replayed, the call not
        followed. A client that has the response already (the stream carried it at or before
        ``Last-Event-ID``: a POST stream's last event) gets nothing more: one response per request.
        One the log holds after ``Last-Event-ID`` (sent, but the client did not read it) is not replayed
        either: the refusal is sent without being kept, the log keeping the one response it has (kept, it
        was refused as a second response, and the stream ended with ``retry`` and none, resume after resume)."""
        missed = any(_kind_and_id(payload)[0] == "response" for _, payload in events if payload)
        if not missed:
            newest = await store.last_event_of_stream(stream_id)
            if newest and _kind_and_id(newest)[0] == "response":
                await response._send({"type": "http.response.body", "body": b""})
                return
        logger.info("Refused to resume the stream of call %s: %s", call_id, refused.message)
        request_id = jsonrpc.id_from_text(await store.call_request_id(call_id))
        message = jsonrpc.error_message(request_id, refused)
        if not missed:
            await response.finish(message)
            return
        await response._event(message, last=True, kept=False)
        with contextlib.suppress(OSError):
            await response._send({"type": "http.response.body", "body": b""})
        response.closed = True

    async def standalone(self, receive: Any, response: Response, caller: StreamCaller,
                         missed_since: tuple[int, set[str]] | None = None) -> None:
        """The session's standalone stream: list changes, resource updates, keep-alives.

        One per session: a new one (a reconnection, resumed or not) takes over and the older
        one ends (:func:`~mcp_tools.interprocess.notifications.open_stream` says why not a 409),
        so no message goes out on two streams. It ends too when the session is deleted, and
        when the GET's credentials no longer authenticate its caller (:meth:`StreamCaller.vouch`,
        before notifications go out; a token's expiry at each keep-alive), as ``subscriptions/listen`` does.

        ``missed_since``: a resumed stream's ``Last-Event-ID`` and the URIs whose updates its replay
        carried: each subscribed resource said to have changed since that event, and not in the replay,
        is told once the stream is registered (an update published while the client reconnected
        found no stream to carry it).
        """
        assert response.session_id is not None
        session_id = response.session_id
        # Bounded, one per kind or URI: a client that stops reading costs no more (notifications.Outbox).
        outbox = notifications.Outbox()

        def on_registry_change(kind: str) -> None:
            outbox.put(jsonrpc.notification_message(f"notifications/{kind}/list_changed"))

        # The stream's stamp, taken once it is in its session's group; what the group brought
        # before that is judged against it then.
        stamp: tuple[float, str] | None = None
        early: list[dict[str, Any]] = []

        def relay_event(event: dict[str, Any]) -> None:
            if stamp is None:
                early.append(event)
            elif notifications.ends_stream(event, stamp):
                outbox.end()

        watcher: asyncio.Future[Any] | None = None
        getter: asyncio.Future[dict[str, Any]] | None = None
        registry.add_listener(on_registry_change)
        try:
            # In the session's group before the stream opens, so it misses nothing sent from then on,
            # through the process's channel: a stream that ends on the local END of a takeover or a
            # DELETE leaves before the published copy comes, which is then dropped, not kept. A layer
            # that fails (Redis down, its connection pool exhausted) does not refuse the stream: it
            # opens on this process's notifications and joins the group once it can; it stays in the
            # group (re-added before group_expiry, after the layer failed) while it is open.
            async with broadcast.subscribed(notifications.group_name(session_id), relay_event):
                stamp = await notifications.open_stream(session_id, outbox)
                for event in early:
                    relay_event(event)
                if missed_since is not None:  # read once this stream takes updates: none falls between
                    for uri in await store.subscriptions_updated_since(session_id, missed_since[0]):
                        if uri not in missed_since[1]:
                            outbox.put(notifications.updated_message(uri))
                if response.stream_id is None:
                    response.stream_id = STANDALONE_STREAM_PREFIX + uuid.uuid4().hex
                await response.start_stream()
                watcher = asyncio.ensure_future(receive())
                in_use = time.monotonic()
                # A pass at least as often as the session must be recorded in use: a keep-alive's 15 s
                # let a SESSION_IDLE_SECONDS under that expire the session of a client listening here.
                pass_every = min(KEEPALIVE_SECONDS, sessions.in_use_every())
                # Well within the age at which mcp_cleanup deletes events (CALL_TTL), at most hourly.
                reprime_every = max(min(REPRIME_SECONDS, float(mcp_settings.CALL_TTL) / 4), KEEPALIVE_SECONDS)
                while True:
                    still = await sessions.keep_in_use(session_id, in_use)  # a listening client is not idle
                    if still is None:  # the session ended, and no message said so
                        with contextlib.suppress(OSError):
                            await response._send({"type": "http.response.body", "body": b""})
                        return
                    in_use = still
                    # Its authentication's thread (and connection) is not held for the session's life.
                    release_request_thread()
                    getter = asyncio.ensure_future(outbox.get())
                    done, _ = await asyncio.wait({getter, watcher}, timeout=pass_every, return_when=asyncio.FIRST_COMPLETED)
                    if watcher in done:
                        getter.cancel()
                        return
                    if getter in done:
                        message = getter.result()
                        if message is notifications.END:  # the session ended, or a newer stream took over
                            with contextlib.suppress(OSError):
                                await response._send({"type": "http.response.body", "body": b""})
                            return
                        if not await caller.vouch(outbox.qsize()):
                            await self.end_unvouched(response, "GET", "its credentials no longer authenticate the caller")
                            return
                        if await caller.may_receive(message):
                            await response.event(message)
                    else:
                        getter.cancel()
                        if caller.expired():
                            await self.end_unvouched(response, "GET", "its access token expired")
                            return
                        now = time.monotonic()
                        if now - response.last_event_at >= reprime_every:
                            await response.reprime()
                        elif now - response.last_sent >= KEEPALIVE_SECONDS:
                            await response._send({"type": "http.response.body", "body": KEEPALIVE_COMMENT, "more_body": True})
                            response.last_sent = now
        finally:
            if getter is not None:  # as in listen(): never left pending
                getter.cancel()
            if watcher is not None:
                watcher.cancel()
            registry.remove_listener(on_registry_change)
            notifications.close_stream(session_id, outbox)

    # -- DELETE ---------------------------------------------------------------------------
    async def delete(self, scope: dict[str, Any], headers: dict[str, str], response: Response) -> None:
        _, session = await self.session_for(scope, headers)
        await sessions.end(session.id, "The client ended its session")
        await response.json(204, None)


LIST_CHANGED_FILTERS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


async def listen_filter(params: dict[str, Any], request_id: Any, principal: Principal) -> dict[str, Any]:
    """The part of a ``subscriptions/listen`` filter this server honours (what it acknowledges).

    The list-changed kinds asked for with ``true``, and the subscribed URIs of resources it
    serves to this caller (others are left out, as ``resources/subscribe`` refuses them); keys it does
    not know are left out. A filter of the wrong shape is refused (400, -32602).
    """
    requested = params.get("notifications", {})
    if not isinstance(requested, dict):
        raise HttpError(400, McpError(INVALID_PARAMS, '"notifications" must be an object'), request_id)
    # (post_modern checked that _meta carries the clientCapabilities object.)
    if requested.get("taskIds") is not None and not tasks_flavor.declares_extension(params["_meta"][versions.META_CLIENT_CAPABILITIES]):
        # Task status notifications are the tasks extension's: a client that did not declare it MUST get
        # -32021 (SEP-2663), as every tasks method answers it, not an ack that drops what it asked for.
        refusal = tasks_flavor.missing_extension(f"notifications.taskIds needs the {tasks_flavor.EXTENSION} extension, which the client did not declare")
        raise HttpError(refusal.http_status, refusal, request_id)
    honoured: dict[str, Any] = {}
    for key in LIST_CHANGED_FILTERS:
        value = requested.get(key)
        if value is not None and not isinstance(value, bool):
            raise HttpError(400, McpError(INVALID_PARAMS, f'"notifications.{key}" must be a boolean'), request_id)
        if value:
            honoured[key] = True
    uris = requested.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise HttpError(400, McpError(INVALID_PARAMS, '"notifications.resourceSubscriptions" must be a list of URIs'), request_id)
        served = await _readable(list(dict.fromkeys(uris)), principal)
        if served:
            honoured["resourceSubscriptions"] = served
    return honoured


async def _readable(uris: list[str], principal: Principal) -> list[str]:
    """The ``uris`` that ``resources/read`` would serve to ``principal`` (what a subscription may name).

    Permissions are asked once per distinct set, not once per URI: each answer is a hop to a thread,
    and a filter of 190,000 URIs of one template took 24 s to acknowledge."""
    answers: dict[tuple[str, ...], bool] = {}
    served = []
    for uri in uris:
        found = registry.find_resource(uri)
        if found is None:
            continue
        perms = tuple(found[0].permissions)
        if perms not in answers:
            answers[perms] = await permitted(principal, perms)
        if answers[perms]:
            served.append(uri)
    return served


class _RequestedStop:
    """What a resumed stream registers for its request's cancellation: the client's own stop of the
    task that goes on with the call (its ``notifications/cancelled``), told apart from the server's."""

    __slots__ = ("task", "rc")

    def __init__(self, task: asyncio.Task[Any], rc: RequestContext) -> None:
        self.task, self.rc = task, rc

    def cancel(self, msg: Any = None) -> bool:
        self.rc.cancel_requested = True
        return self.task.cancel(msg)


class _Handler:
    """The handler of one request, run in the request's task (see :meth:`McpEndpoint.run_request`).

    The task is looked up when first needed: a handler that never waits (most fast
    calls) cannot be stopped by anyone else, and never needs it.
    """

    __slots__ = ("task", "receive", "rc", "response", "running", "requested", "disconnected", "detached", "watcher", "keeper",
                 "in_use")

    def __init__(self, receive: Any, rc: RequestContext, response: Response) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.receive = receive
        self.rc = rc
        self.response = response
        self.running = False
        #: This object cancelled the task (once at most): the CancelledError is the handler's.
        self.requested = False
        self.disconnected = False
        #: The client went away and the handler goes on (:meth:`_watch`): its answer is kept, not sent.
        self.detached = False
        self.watcher: asyncio.Future[None] | None = None
        #: Keeps a 2025-11-25 session request's stream alive while its handler waits (:func:`keep_alive`).
        self.keeper: asyncio.Future[None] | None = None
        #: A waiting session request's next record that its session is in use (:meth:`_record_in_use`).
        self.in_use: asyncio.TimerHandle | asyncio.Future[None] | None = None
        if rc.session_id is not None:
            response.on_streaming = self.start_keeper

    def cancel(self, msg: Any = None) -> bool:
        """Stop the handler (``notifications/cancelled``); nothing once it has returned."""
        # The client's own cancel, also of a handler its closed stream left running: the call ends
        # cancelled (stream_closed would keep it for a resume nobody will make).
        self.rc.stream_closed = self.rc.stream_detached = False
        self.detached = False  # nothing is kept for a resume: a cancelled request gets no answer
        return self._stop()

    def _stop(self) -> bool:
        if not self.running or self.requested:
            return False
        task = self._task()
        if task is None:
            return False
        self.requested = True
        self.rc.cancel_requested = True  # not the server going away (server.context.ends_when_stopped)
        return task.cancel()

    def _task(self) -> asyncio.Task[Any] | None:
        if self.task is None:
            # Still inside the handler's first step (it has not waited yet): this is its task.
            self.task = asyncio.current_task()
        return self.task

    def start_watcher(self) -> None:
        """The handler waits for the first time (see :class:`~mcp_tools.server.core.Awaiting`)."""
        if self.task is None:
            self.task = asyncio.current_task()
        if self.watcher is None:
            self.watcher = asyncio.ensure_future(self._watch())
        if self.rc.session_id is not None and self.in_use is None and mcp_settings.SESSION_IDLE_SECONDS is not None:
            self._arm_in_use()

    def _arm_in_use(self) -> None:
        # A session request that runs uses its session, as a listening GET stream does: with only its
        # start recorded, a request longer than SESSION_IDLE_SECONDS saw its session expire under it
        # (its next request 404, mcp_cleanup ending it). One timer per waiting request, rarely due.
        self.in_use = asyncio.get_running_loop().call_later(sessions.in_use_every(), self._record_in_use)

    def _record_in_use(self) -> None:
        self.in_use = asyncio.ensure_future(self._touch_session())

    async def _touch_session(self) -> None:
        try:
            # Not if anyone recorded it within the interval: the session's other requests, its GET stream, another
            # process. One write per interval per session, not one per waiting request (docs/settings.md: at
            # most 24 per SESSION_IDLE_SECONDS).
            await store.touch_session(self.rc.session_id or "", unless_within=sessions.in_use_every())
        except Exception:  # the database cannot be reached now: the next pass writes it
            logger.warning("Could not record session %s in use", self.rc.session_id, exc_info=True)
        if self.running:
            self._arm_in_use()

    def start_keeper(self) -> None:
        """The response became an SSE stream: keep it alive while the handler runs (a session request's)."""
        if self.keeper is None and self.running:
            self.keeper = asyncio.ensure_future(keep_alive(self.response, lambda: self.disconnected))

    def stop_watcher(self) -> None:
        # The response's hook back to this handler (start_keeper, bound) made a cycle, response ->
        # handler -> response, in every session request: let go of it, as of the watcher below.
        self.response.on_streaming = None
        in_use = self.in_use
        if in_use is not None:
            self.in_use = None
            in_use.cancel()
        keeper = self.keeper
        if keeper is not None:
            # Before the request's last message: nothing goes out after its stream's end.
            self.keeper = None
            keeper.cancel()
        watcher = self.watcher
        if watcher is not None:
            # Let go of it: the cancelled task keeps its CancelledError, whose traceback holds
            # _watch's frame and so this handler, and a reference back from here made a cycle
            # only the garbage collector could free (~16 µs of a suspending round).
            self.watcher = None
            watcher.cancel()

    async def _watch(self) -> None:
        with contextlib.suppress(Exception):
            await self.receive()
        # http.disconnect: the client is gone. In 2026-07-28 that cancels the call. In a
        # 2025-11-25 session it does not ("Disconnection SHOULD NOT be interpreted as the client
        # cancelling its request"): once the client holds an event id of the stream, the handler
        # goes on, its events and its answer kept in the stream's event log for the client to
        # resume with Last-Event-ID (a call with a row is followed there). stream_closed keeps its
        # call resumable if the server stops the handler later (shutdown, Daphne's
        # application_close_timeout), as it does a call whose stream closed before it streamed.
        # Stopped as before: a request that only waits on a call running elsewhere (tasks/result, a
        # deferred call; the call goes on where it runs), and a handler that waits for the client's
        # answers (the journal takes over: the live path lasts while the stream is open, and a
        # suspended call holds no memory; one that asks after its stream closed stops there too,
        # flavors/session.py).
        if self.running and not self.requested:
            self.disconnected = True
            self.rc.stream_closed = not self.rc.modern
            if self.rc.stream_closed and self.response.primed and self.rc.handler_here and not self.rc.awaiting_input:
                self.detached = self.rc.stream_detached = True
                if await self._session_lives():
                    return
                # Its session ended first (the official SDK deletes it, then closes its streams):
                # nobody can resume the stream now, as when it ends later (cancellation.stop_detached).
                self.detached = self.rc.stream_detached = False
                if not self.running or self.requested:
                    return
            self._stop()

    async def _session_lives(self) -> bool:
        try:
            return self.rc.session_id is not None and await sessions.get(self.rc.session_id) is not None
        except Exception:  # the database cannot say: stopped, as before there was a choice
            logger.warning("Could not read session %s of a closed stream", self.rc.session_id, exc_info=True)
            return False

    def handler_cancelled(self) -> bool:
        """Whether a CancelledError out of the handler stops only the handler, not the request's task.

        Takes back a cancellation this object asked for (``uncancel``). True then, and for a
        CancelledError the handler raised itself (no cancellation of the task pending); False
        when the task itself is being cancelled (the ASGI server's), which must go on.
        """
        task = self._task()
        if self.requested:
            self.requested = False
            if task is not None and task.cancelling():
                task.uncancel()
            return task is None or not task.cancelling()
        return task is not None and not task.cancelling()


async def _answered_by_its_row(response: Response) -> bool:
    """Whether a detached handler's call has a row, which keeps its answer: a stream resumed for it
    follows the call and answers from the row (now, or when the client resumes later), so the
    handler writes no response of its own to the stream's log (one request, one response; two
    writers would leave the resumed connection to end without it, :meth:`Response.event`)."""
    return response.stream_id is not None and await store.call_for_stream(response.stream_id) is not None


def _kind_and_id(payload: str) -> tuple[str, Any]:
    """What a message replayed from the event log is ("request", "response", "notification",
    "" if unreadable) and its JSON-RPC id."""
    import json

    try:
        message = json.loads(payload)
    except ValueError:
        return "", None
    if not isinstance(message, dict):
        return "", None
    if "method" in message:
        return ("request" if "id" in message else "notification"), message.get("id")
    return ("response" if "result" in message or "error" in message else ""), message.get("id")


async def refuse_param_headers(refusal: tuple[Tool, McpError], principal: Principal, request_id: Any) -> None:
    """``Mcp-Param-*`` headers must agree with the arguments they mirror (``x-mcp-header`` in the schema):
    ``refusal`` is :func:`_param_header_refusal`'s finding that they do not.

    A mismatch is refused (400, -32020) only for a caller who may use the tool; for one who may
    not, nothing here: the call answers "Unknown tool" as for a tool that does not exist (the
    refusal would name the hidden tool's headers). Only a call about to be refused pays for the
    permission check.
    """
    if await permitted(principal, refusal[0].permissions):
        raise HttpError(400, refusal[1], request_id)


def _param_header_refusal(headers: dict[str, str], params: dict[str, Any], *, required: bool = True) -> tuple[Tool, McpError] | None:
    """The tool a ``tools/call`` names and why its ``Mcp-Param-*`` headers are refused; None if they agree.
    ``required``: a missing header is refused too (``tools/callSaga``: only one sent that disagrees)."""
    name = params.get("name")
    tool = registry.get_tool(name) if isinstance(name, str) else None
    if tool is None:
        return None
    try:
        mirrored = tool.param_headers
    except Exception:
        # A tool whose description cannot be built (a model tool's serializer, mcp_tools.E034):
        # nothing to check here; its call fails where it runs, answered with its id.
        return None
    if not mirrored:
        return None
    given = params.get("arguments")
    arguments: dict[str, Any] = given if isinstance(given, dict) else {}
    for path, header_name in mirrored:
        expected: Any = arguments
        for key in path:  # a nested property's value (2026-07-28: the exact property path)
            expected = expected.get(key) if isinstance(expected, dict) else None
        raw = headers.get(f"mcp-param-{header_name.lower()}")
        if expected is None:
            # Absent or null: the client omits the header, and none is expected (2026-07-28); one that
            # is sent anyway names a value the body does not have (a gateway would route on it).
            if raw is not None:
                return tool, McpError(HEADER_MISMATCH, f"Mcp-Param-{header_name} header given for an argument the request does not set")
            continue
        if raw is None:
            if not required:
                continue
            return tool, McpError(HEADER_MISMATCH, f"Missing Mcp-Param-{header_name} header")
        value = header_text(raw)
        if value is None:
            return tool, McpError(HEADER_MISMATCH, f"Invalid Mcp-Param-{header_name} header")
        if not _header_matches(value, expected):
            return tool, McpError(HEADER_MISMATCH, f"Mcp-Param-{header_name} header does not match the argument")
    return None


#: A number as JSON writes it: what a header mirroring a number argument may say (Python's ``int()`` /
#: ``float()`` also read ``4_2``, `` 42``, other scripts' digits, ``nan`` and ``inf``).
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


def _header_matches(value: str, expected: Any) -> bool:
    """Whether an ``Mcp-Param-*`` value says ``expected``: booleans as ``true``/``false``, numbers
    compared as numbers (``42.0`` is ``42``, as the 2026-07-28 spec recommends), the rest as text."""
    if isinstance(expected, bool):
        return value == ("true" if expected else "false")
    if isinstance(expected, (int, float)):
        if not _JSON_NUMBER.fullmatch(value):
            return False
        for number in (int, float):  # int first: exact past 2**53
            try:
                return number(value) == expected
            except ValueError:
                continue
        return False
    return value == (expected if isinstance(expected, str) else str(expected))
