"""MCP authorization as an OAuth 2.1 resource server (docs/oauth.md).

Enabled by ``MCP_TOOLS["OAUTH"]``. A request with ``Authorization: Bearer <token>``
is checked by the configured :class:`TokenVerifier` (expiry, audience per RFC 8707,
required scopes); every 401 carries ``WWW-Authenticate: Bearer resource_metadata=...``
pointing at the RFC 9728 document served by :mod:`mcp_tools.transports.oauth`.

Tokens are looked up by a verifier, never trusted on their face: the base class here
does the checks every verifier needs, subclasses only find the token.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.contrib.auth.models import AnonymousUser
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from .. import store
from ..conf import RELOAD_ON, endpoint_path, mcp_settings
from ..registry.registry import SCOPE_PERMISSION_PREFIX

logger = logging.getLogger("mcp_tools.oauth")

WELL_KNOWN = "/.well-known/oauth-protected-resource"

#: Keys of ``MCP_TOOLS["OAUTH"]`` and their defaults.
OAUTH_DEFAULTS: dict[str, Any] = {
    # Issuer URLs of the authorization servers (RFC 9728 ``authorization_servers``). An entry
    # starting with "/" is an authorization server hosted by this site, at that path.
    "AUTHORIZATION_SERVERS": [],
    # Import string (or class) of the TokenVerifier that looks bearer tokens up.
    "TOKEN_VERIFIER": None,
    # The canonical URI of the MCP endpoint (RFC 8707 resource). None: built from the
    # request (scheme, Host, the path it reached); set it in production behind a proxy.
    "RESOURCE": None,
    # Published in the metadata; the challenge's ``scope`` when REQUIRED_SCOPES is empty.
    "SCOPES_SUPPORTED": [],
    # Scopes every request needs (403 insufficient_scope otherwise).
    "REQUIRED_SCOPES": [],
    # Refuse tokens that name no audience at all (RFC 8707: a token must be issued for us).
    "REQUIRE_AUDIENCE": True,
    "RESOURCE_NAME": None,
    "RESOURCE_DOCUMENTATION": None,
}


@dataclass(frozen=True)
class TokenInfo:
    """What a verifier found out about a valid-looking access token."""

    #: The resource owner (a Django user), or None for a token acting for no user.
    user: Any
    scopes: frozenset[str] = frozenset()
    #: Aware datetime; None means the token does not expire.
    expires_at: datetime | None = None
    #: RFC 8707 resource indicators the token was issued for; empty: not restricted.
    audience: tuple[str, ...] = ()
    client_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class TokenRefused(Exception):
    """A bearer token that must not be served: 401 invalid_token or 403 insufficient_scope."""

    def __init__(self, description: str, *, status: int = 401, error: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.scope = scope


class TokenVerifier:
    """Finds what an access token stands for. Subclass and implement :meth:`verify`.

    ``verify`` runs in a worker thread (it may use the ORM or call an introspection
    endpoint) and returns None for an unknown or revoked token. Expiry, audience and
    required scopes are checked by :meth:`check` for every verifier.
    """

    def verify(self, token: str) -> TokenInfo | None:
        raise NotImplementedError

    def check(self, info: TokenInfo, resource: str) -> None:
        """Raise :class:`TokenRefused` unless ``info`` may be served at ``resource``."""
        if expired(info):
            raise TokenRefused("The access token expired")
        if info.audience:
            if not any(audience_matches(audience, resource) for audience in info.audience):
                raise TokenRefused("The access token was not issued for this resource")
        elif oauth_setting("REQUIRE_AUDIENCE"):
            raise TokenRefused("The access token names no resource (RFC 8707 resource indicator)")
        required = set(oauth_setting("REQUIRED_SCOPES") or ())
        if not required <= info.scopes:
            raise TokenRefused("The access token lacks a required scope", status=403, error="insufficient_scope",
                               scope=" ".join(sorted(required | info.scopes)))


def expired(info: TokenInfo) -> bool:
    """Whether the token ``info`` describes has expired, by its ``expires_at`` (no lookup)."""
    expires_at = info.expires_at
    if expires_at is None:
        return False
    if expires_at.tzinfo is None:
        # Naive (django-oauth-toolkit's tokens with USE_TZ = False): in Django's time zone.
        from django.utils import timezone as django_timezone

        expires_at = django_timezone.make_aware(expires_at)
    return expires_at <= datetime.now(timezone.utc)


_verifier: TokenVerifier | None = None


@receiver(setting_changed)
def _reset_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    global _verifier
    if setting in RELOAD_ON:
        _verifier = None


def enabled() -> bool:
    return bool(mcp_settings.OAUTH)


def oauth_setting(name: str) -> Any:
    configured = mcp_settings.OAUTH or {}
    return configured.get(name, OAUTH_DEFAULTS[name])


def verifier() -> TokenVerifier:
    global _verifier
    if _verifier is None:
        path = oauth_setting("TOKEN_VERIFIER")
        cls = import_string(path) if isinstance(path, str) else path
        _verifier = cls()
    return _verifier


#: RFC 6750 2.1 ``b64token``: the syntax of a bearer token in the ``Authorization`` header.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def bearer_token(headers: dict[str, str]) -> str | None:
    """The bearer token of the request when OAuth is on (None: no ``Authorization`` of scheme Bearer).

    Any ``Authorization`` value whose scheme is ``Bearer`` (in any case, RFC 9110 11.1) is the
    verifier's alone: the scheme ends at the first whitespace of any kind, as oauthlib (behind
    django-oauth-toolkit's DRF ``OAuth2Authentication``) and DRF's authenticators split it. Were
    ``Bearer<TAB>token`` left to the DRF authenticators, one of them could accept the token
    without the audience and scope checks (docs/oauth.md). RFC 6750 2.1 writes one space before
    the token; other whitespace is tolerated, the token itself must be a ``b64token``.

    Raises :class:`TokenRefused` (400 ``invalid_request``, RFC 6750 3.1) for a Bearer value that
    is malformed: no token, or something that is no ``b64token`` (two tokens, other characters).
    """
    if not enabled():
        return None
    value = headers.get("authorization")
    if value is None:
        return None
    parts = value.split(None, 1)
    if not parts or parts[0].lower() != "bearer":
        return None
    token = parts[1].strip() if len(parts) > 1 else ""
    if not token:
        raise TokenRefused("The Bearer authorization carries no token", status=400, error="invalid_request")
    if not _B64TOKEN.fullmatch(token):
        raise TokenRefused("The Bearer authorization is malformed: one token of the RFC 6750 b64token syntax expected",
                           status=400, error="invalid_request")
    return token


#: The port a scheme's URIs name when they name none (RFC 3986 6.2.3).
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _canonical(uri: str) -> str:
    parts = urlsplit(uri)
    scheme, netloc = parts.scheme.lower(), parts.netloc.lower()
    host, colon, port = netloc.rpartition(":")
    # RFC 3986 6.2.3: an explicit port that is empty or the scheme's default names the same URI as
    # none (https://h:443/mcp is https://h/mcp). Only that port: https://h:8443 is another resource.
    # (A colon inside an IPv6 literal is no port: what follows it ends with "]".)
    if colon and not port.endswith("]") and port in ("", _DEFAULT_PORTS.get(scheme)):
        netloc = host
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def audience_matches(audience: str, resource: str) -> bool:
    """Whether a token issued for ``audience`` may be used at ``resource``.

    Equal canonical URIs match (case of scheme and host, the scheme's default port written out
    and a trailing slash ignored), and so does an audience that is a parent path of the resource
    at a segment boundary (``https://h/api`` covers ``https://h/api/mcp``, never ``https://h/apis``).
    """
    if not isinstance(audience, str) or not audience:
        return False
    mine, theirs = _canonical(resource), _canonical(audience)
    if mine == theirs:
        return True
    a, r = urlsplit(theirs), urlsplit(mine)
    return (a.scheme, a.netloc) == (r.scheme, r.netloc) and not a.query and r.path.startswith(a.path + "/")


def origin_of(scope: dict[str, Any], headers: dict[str, str]) -> str:
    """The origin (``scheme://host[:port]``) the client reached, as Django's ``request.build_absolute_uri``
    builds it behind a reverse proxy (``HttpRequest.scheme`` and ``get_host``).

    The scheme: ``https`` or ``http`` as the ``SECURE_PROXY_SSL_HEADER`` header (its first value) says,
    when that setting is set and the request has the header, else the ASGI scheme. The host:
    ``X-Forwarded-Host`` under ``USE_X_FORWARDED_HOST``, else ``Host``, else the server's address and
    port (``X-Forwarded-Port`` under ``USE_X_FORWARDED_PORT``), without the scheme's default port.
    Behind a proxy that rewrites ``Host``, the metadata's ``resource`` and the audience tokens must name
    is then the URL the client called (``OAUTH["RESOURCE"]``, when set, needs none of this).
    """
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    scheme = scope.get("scheme") or "http"
    if settings.SECURE_PROXY_SSL_HEADER:
        try:
            meta_name, secure_value = settings.SECURE_PROXY_SSL_HEADER
        except ValueError:  # Django's own words for it
            raise ImproperlyConfigured("The SECURE_PROXY_SSL_HEADER setting must be a tuple containing two values.") from None
        # A META name (HTTP_X_FORWARDED_PROTO) as the header it comes from (x-forwarded-proto).
        name = str(meta_name)
        name = name[5:] if name.startswith("HTTP_") else name if name in ("CONTENT_TYPE", "CONTENT_LENGTH") else ""
        value = headers.get(name.lower().replace("_", "-")) if name else None
        if value is not None:
            scheme = "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    host = headers.get("x-forwarded-host") if settings.USE_X_FORWARDED_HOST else None
    if host is None:
        host = headers.get("host")
    if not host:
        server = scope.get("server") or ("localhost", None)
        port = headers.get("x-forwarded-port") if settings.USE_X_FORWARDED_PORT else None
        if port is None:
            port = server[1]
        default = "443" if scheme == "https" else "80"
        host = f"{server[0]}:{port}" if port is not None and str(port) != default else str(server[0])
    return f"{scheme}://{host}"


def resource_of(scope: dict[str, Any], headers: dict[str, str]) -> str:
    """The resource identifier of the endpoint this request reached (see :func:`resource_identifier`)."""
    return resource_identifier(origin_of(scope, headers), scope.get("path") or None)


def resource_identifier(origin: str, path: str | None = None) -> str:
    """The canonical URI of the endpoint served at ``path`` (RFC 8707 resource): what tokens must name.

    ``RESOURCE`` when set. Else the origin and the path the endpoint is served at, as the client
    wrote it: the request's ASGI ``path`` (``root_path`` included) for the endpoint, which may be an
    ``include()`` under any path; ``MCP_TOOLS["PATH"]`` (the ASGI mount) when there is no such
    path (the root metadata document). Clients refuse metadata whose ``resource`` is not the URL
    they called (RFC 9728 3.3), and ask for tokens naming it.
    """
    configured = oauth_setting("RESOURCE")
    if configured:
        return str(configured).rstrip("/")
    if path is None:
        return origin + endpoint_path()
    return origin + path


def serves_resource(path: str) -> bool:
    """Whether ``path`` (from ``/``) is where the endpoint is served: its path-suffixed metadata exists.

    ``RESOURCE``'s path when that is set; else the ASGI mount's ``MCP_TOOLS["PATH"]`` or any
    ``include("mcp_tools.urls")`` of the root URLconf. A path below a ``SCRIPT_NAME`` /
    ``root_path`` is not in the URLconf: such a site sets ``RESOURCE``.
    """
    if path.startswith(WELL_KNOWN + "/"):
        # Never a resource; resolving it would come back here once per nested prefix (a crafted path's recursion).
        return False
    configured = oauth_setting("RESOURCE")
    if configured:
        return path.rstrip("/") == urlsplit(str(configured)).path.rstrip("/")
    if path == endpoint_path():
        return True
    from django.urls import Resolver404, resolve

    try:
        match = resolve(path)
    except Resolver404:
        return False
    # mcp_tools.urls' endpoint (app_name "mcp_tools"), whatever path and namespace it is included under.
    return match.url_name == "endpoint" and "mcp_tools" in match.app_names


def metadata_url(resource: str) -> str:
    """Where the metadata of ``resource`` lives: the path-suffixed well-known URI (RFC 9728 3.1)."""
    parts = urlsplit(resource)
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + parts.path, "", ""))


def metadata_document(origin: str, path: str | None = None) -> dict[str, Any]:
    """The RFC 9728 protected resource metadata of the endpoint at ``path`` (None: the ASGI mount's)."""
    resource = resource_identifier(origin, path)
    # A path is on the site whose public URL is RESOURCE when that is set (behind a TLS-terminating
    # proxy the request's own scheme is the internal one), else on the request's origin.
    parts = urlsplit(resource)
    site = f"{parts.scheme}://{parts.netloc}" if oauth_setting("RESOURCE") else origin
    servers = [site + entry if entry.startswith("/") else entry for entry in oauth_setting("AUTHORIZATION_SERVERS")]
    document: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
    }
    if oauth_setting("SCOPES_SUPPORTED"):
        document["scopes_supported"] = list(oauth_setting("SCOPES_SUPPORTED"))
    if oauth_setting("RESOURCE_NAME"):
        document["resource_name"] = oauth_setting("RESOURCE_NAME")
    if oauth_setting("RESOURCE_DOCUMENTATION"):
        document["resource_documentation"] = oauth_setting("RESOURCE_DOCUMENTATION")
    return document


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(resource: str, *, error: str | None = None, description: str | None = None, scope: str | None = None) -> str:
    """A ``WWW-Authenticate`` value: ``Bearer resource_metadata="..."`` (of ``resource``) plus the error, if any (RFC 6750 3)."""
    params: list[tuple[str, str]] = []
    if error:
        params.append(("error", error))
    if description:
        params.append(("error_description", description))
    if scope is None and error is None:
        # What a client should ask for first (MCP "Scope Selection Strategy" takes this over
        # scopes_supported). Every supported scope: a tool whose scope a token lacks is not
        # listed, so a client holding a narrower token would never learn it could step up.
        scope = " ".join(oauth_setting("SCOPES_SUPPORTED") or oauth_setting("REQUIRED_SCOPES") or ()) or None
    if scope:
        params.append(("scope", scope))
    params.append(("resource_metadata", metadata_url(resource)))
    return "Bearer " + ", ".join(f"{name}={_quote(value)}" for name, value in params)


def authenticate_bearer(token: str, resource: str) -> Any:
    """The principal a bearer token stands for (sync: the verifier may use the database).

    Raises :class:`TokenRefused` for an unknown, expired, foreign or under-scoped token.
    """
    from .auth import Principal

    if not token:
        raise TokenRefused("Empty bearer token")
    active = verifier()
    try:
        info = active.verify(token)
        if info is None:
            raise TokenRefused("The access token is invalid")
        active.check(info, resource)
    except TokenRefused:
        raise
    except Exception as exc:
        if store.database_unreachable(exc):
            raise  # the database the verifier reads is down: 503 (try again), not "invalid token" (start over)
        # A verifier that fails (an introspection endpoint down, timing out, answering garbage)
        # has not vouched for the token: the client is told so (401), never a 500.
        logger.exception("The token verifier %r failed", type(active).__name__)
        raise TokenRefused("The access token could not be verified") from None
    user = info.user
    if user is not None and not getattr(user, "is_active", True):
        raise TokenRefused("The access token's user is inactive")
    if user is not None and getattr(user, "is_authenticated", False):
        # The same id as the user's other credentials: a refreshed token keeps its calls and sessions.
        principal_id = f"user:{user.pk}"
    elif info.client_id:
        # A token acting for no user (client credentials without an owner): the client is the caller.
        user = AnonymousUser()
        principal_id = f"oauth-client:{info.client_id}"
    else:
        # Neither a user nor a client (RFC 7662 makes client_id optional): the token is the caller.
        # One shared id for all such tokens would let each continue the others' calls.
        user = AnonymousUser()
        principal_id = "oauth-token:" + hashlib.sha256(token.encode()).hexdigest()[:32]
    return Principal(user=user, id=principal_id, auth=info, scopes=frozenset(info.scopes))


def missing_scopes(principal: Any, permissions: tuple[str, ...]) -> list[str]:
    """Scopes among ``permissions`` that the principal's token lacks ([] when not scope-limited)."""
    if principal.scopes is None:
        return []
    return [p[len(SCOPE_PERMISSION_PREFIX):] for p in permissions
            if p.startswith(SCOPE_PERMISSION_PREFIX) and p[len(SCOPE_PERMISSION_PREFIX):] not in principal.scopes]
