"""Who is calling: DRF authentication on the ASGI scope, and permission checks.

DRF authentication classes expect a request; we build a minimal Django
``HttpRequest`` from the scope (headers only, the body is consumed by the
transport) and wrap it in a DRF ``Request``.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import InitVar, dataclass, field
from types import MappingProxyType
from typing import Any, NoReturn

from django.contrib.auth.models import AnonymousUser
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from ..conf import RELOAD_ON, mcp_settings
from ..registry.registry import SCOPE_PERMISSION_PREFIX

logger = logging.getLogger("mcp_tools.auth")

_auth_classes: list[Any] | None = None
#: What :func:`credential_headers` found for the configured classes (``False``: not computed yet).
_carriers: tuple[str, ...] | None | bool = False
#: The lower-cased name of ``ANONYMOUS_SECRET_HEADER`` ("": none), computed once.
_secret_header: str | None = None


def reset() -> None:
    global _auth_classes, _carriers, _secret_header
    _auth_classes = None
    _carriers = False
    _secret_header = None


@receiver(setting_changed)
def _reset_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    if setting in RELOAD_ON:
        reset()


#: DRF authenticators that find credentials only in these headers.
_HEADER_ONLY = {
    "rest_framework.authentication.TokenAuthentication": ("authorization",),
    "rest_framework.authentication.BasicAuthentication": ("authorization",),
    "rest_framework.authentication.SessionAuthentication": ("cookie",),
}


def credential_headers() -> tuple[str, ...] | None:
    """Headers that can carry credentials for the configured authenticators, or None if unknown.

    Lets the transport answer a request without credentials at once instead of
    building a DRF request and hopping to a thread. Computed once per configuration
    (every request asks).
    """
    global _carriers
    if _carriers is False:
        _carriers = _credential_headers()
    return _carriers  # type: ignore[return-value]


def _credential_headers() -> tuple[str, ...] | None:
    headers: list[str] = []
    for cls in authentication_classes():
        path = f"{cls.__module__}.{cls.__qualname__}"
        known = _HEADER_ONLY.get(path)
        if known is None:
            return None
        headers.extend(known)
    return tuple(headers)


def authentication_classes() -> list[Any]:
    global _auth_classes
    if _auth_classes is None:
        configured = mcp_settings.AUTHENTICATION_CLASSES
        if configured is None:
            from rest_framework.settings import api_settings

            _auth_classes = list(api_settings.DEFAULT_AUTHENTICATION_CLASSES)
        else:
            _auth_classes = [import_string(path) if isinstance(path, str) else path for path in configured]
    return _auth_classes


#: The longest principal id (``ToolCall.principal`` and ``McpSession.principal`` are ``varchar(128)``):
#: a longer one is fitted to it by :func:`fit_principal_id`.
PRINCIPAL_MAX_LENGTH = 128


#: What :func:`fit_principal_id` makes of a longer id: its first characters, ``~`` and 40 hex digits.
_FITTED_TAG_LENGTH = 1 + 40
_FITTED_SHAPE = re.compile(r".{%d}~[0-9a-f]{40}" % (PRINCIPAL_MAX_LENGTH - _FITTED_TAG_LENGTH), re.DOTALL)


def fit_principal_id(raw: str) -> str:
    """``raw`` if it fits :data:`PRINCIPAL_MAX_LENGTH`, else its first 87 characters, ``~`` and 40 hex
    digits of its SHA-256: distinct ids stay distinct, and the same caller gets the same id in every
    request.

    A raw id that already has that shape (exactly 128 characters, ending in ``~`` and 40 hex
    digits) is fitted too: kept as it is, it would be the fitted id of a longer one, and an OAuth
    client picks its own client id. So this is not idempotent: an id read back from a row is
    already fitted and must not be fitted again (``Principal(..., stored=True)``).

    An id can come from outside: an OAuth client id (``oauth-client:<client_id>``; a 2025-11-25
    client id may be the URL of its metadata document), a user's primary key. PostgreSQL refuses
    (or, with a cast, cuts) a longer id where SQLite keeps it whole: a session refused, or a task
    no longer its caller's, on one database and not the other.
    """
    if len(raw) < PRINCIPAL_MAX_LENGTH or (len(raw) == PRINCIPAL_MAX_LENGTH and not _FITTED_SHAPE.fullmatch(raw)):
        return raw
    tag = "~" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return raw[:PRINCIPAL_MAX_LENGTH - len(tag)] + tag


@dataclass
class Principal:
    """The authenticated caller. ``id`` is what tokens and calls are bound to: at most
    :data:`PRINCIPAL_MAX_LENGTH` characters, the id given is fitted (:func:`fit_principal_id`)
    unless ``stored`` says it was read back from a row, where it already is."""

    user: Any
    id: str
    auth: Any = None
    #: The scopes of an OAuth bearer token; None when the credentials are not scope-limited
    #: (DRF authentication, sessions): then only Django permissions apply.
    scopes: frozenset[str] | None = None
    #: Django's answer per permission set: a principal lives for one request (or one call), and
    #: ``tools/list`` asks about the same few sets once per tool. An :class:`AnonymousPrincipal`
    #: (:data:`ANONYMOUS` lives as long as the process) keeps none.
    _answers: dict[frozenset[str], bool] = field(default_factory=dict, repr=False, compare=False)
    #: The id is one :func:`fit_principal_id` made (a ``principal`` column): fitting it again would
    #: change a 128-character id, no longer its caller's.
    stored: InitVar[bool] = False

    def __post_init__(self, stored: bool) -> None:
        # Here, not where each id is made: every id is compared with the rows' column (tasks,
        # sessions, tokens, the admin), whoever made it (a verifier, a custom authenticator).
        if not stored:
            self.id = fit_principal_id(self.id)

    @property
    def is_anonymous(self) -> bool:
        return not getattr(self.user, "is_authenticated", False)

    def has_perms(self, perms: tuple[str, ...] | list[str]) -> bool:
        """Sync: whether the caller holds every permission of ``perms`` (may query the database).

        ``oauth-scope:<scope>`` entries (a tool's ``scopes``) need that scope in the token;
        superusers are no exception, a token limits what its holder may do. The rest is Django's
        ``user.has_perms``, so every authentication backend is asked as Django asks it: one that
        answers ``has_perm`` alone (django-rules) grants, and one that raises ``PermissionDenied``
        vetoes. Each answer is kept on the principal; Django's ``ModelBackend`` keeps the user's
        permissions on the user object, so it queries once per user, not once per check.
        """
        if not perms:
            return True
        if self.is_anonymous:
            return False
        if any(perm.startswith(SCOPE_PERMISSION_PREFIX) for perm in perms):
            if self.scopes is not None and not all(
                perm[len(SCOPE_PERMISSION_PREFIX):] in self.scopes for perm in perms if perm.startswith(SCOPE_PERMISSION_PREFIX)
            ):
                return False
            perms = [perm for perm in perms if not perm.startswith(SCOPE_PERMISSION_PREFIX)]
            if not perms:
                return True
        if getattr(self.user, "is_superuser", False) and getattr(self.user, "is_active", False):
            return True
        key = frozenset(perms)
        answer = self._answers.get(key)
        if answer is None:
            # Not ``perm in user.get_all_permissions()``: that skips backends that only answer
            # has_perm, and a backend's veto (PermissionDenied from has_perm) with them.
            answer = self._answers[key] = bool(self.user.has_perms(key))
        return answer


#: The answers an anonymous principal keeps: none, and none can be added.
_NO_ANSWERS: MappingProxyType[frozenset[str], bool] = MappingProxyType({})


class AnonymousPrincipal(Principal):
    """A caller without credentials: :data:`ANONYMOUS`, or one bound to a session or a client secret.

    It holds no permission and keeps nothing: :meth:`has_perms` answers without asking Django or
    keeping the answer, and the principal cannot be changed once made. :data:`ANONYMOUS` is one
    object for the whole process (and a session's lives as long as the session is cached): an
    answer or a scope kept on it would hold for every anonymous request from then on.
    """

    def __init__(self, binding: str | None = None) -> None:
        # Set past __setattr__, which refuses every change.
        object.__setattr__(self, "__dict__", {
            "user": _ANONYMOUS_USER, "id": fit_principal_id("anonymous" if binding is None else f"anonymous:{binding}"),
            "auth": None, "scopes": None, "_answers": _NO_ANSWERS})

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"An anonymous principal cannot be changed (its {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"An anonymous principal cannot be changed (its {name!r})")

    def has_perms(self, perms: tuple[str, ...] | list[str]) -> bool:
        """Only what needs no permission: an anonymous caller holds none (and no token scopes)."""
        return not perms


_ANONYMOUS_USER = AnonymousUser()
ANONYMOUS = AnonymousPrincipal()


def anonymous_principal(binding: str) -> Principal:
    """An anonymous caller of its own, bound to ``binding`` (a session id, a client secret's digest).

    Tokens and calls are bound to ``Principal.id``, so one anonymous caller's
    ``requestState``, saga token or task is refused to another.
    """
    return AnonymousPrincipal(binding)


def anonymous_from_secret(headers: dict[str, str]) -> Principal:
    """A 2026-07-28 anonymous caller: bound to the secret it sends, or the shared anonymous principal."""
    global _secret_header
    name = _secret_header
    if name is None:
        name = _secret_header = str(mcp_settings.ANONYMOUS_SECRET_HEADER or "").lower()
    secret = headers.get(name, "").strip() if name else ""
    if not secret:
        # No secret: one principal with every other such caller (docs/oauth.md).
        return ANONYMOUS
    if len(secret) < 16:
        raise ValueError(f"{mcp_settings.ANONYMOUS_SECRET_HEADER} must be at least 16 characters")
    return anonymous_principal("client:" + hashlib.sha256(secret.encode()).hexdigest()[:40])


def principal_for_user(user: Any) -> Principal:
    if user is None or not getattr(user, "is_authenticated", False):
        return ANONYMOUS
    return Principal(user=user, id=f"user:{user.pk}")


class AuthenticationFailed(Exception):
    def __init__(self, message: str, www_authenticate: str | None = None) -> None:
        super().__init__(message)
        self.www_authenticate = www_authenticate


def _attach_session_user(django_request: Any, scope: dict[str, Any]) -> None:
    """Give the request the user of its session cookie, as Django's session and authentication
    middleware would (DRF's ``SessionAuthentication`` reads ``request._request.user``), lazily: a
    request no authenticator asks about reads no session. A scope's own ``user`` (Channels'
    ``AuthMiddlewareStack``) is used as it is."""
    from django.apps import apps
    from django.utils.functional import SimpleLazyObject

    if "user" in scope:
        django_request.user = scope["user"]
        return
    if not apps.is_installed("django.contrib.sessions"):
        return
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import get_user

    engine = import_module(settings.SESSION_ENGINE)
    django_request.session = engine.SessionStore(django_request.COOKIES.get(settings.SESSION_COOKIE_NAME))
    django_request.user = SimpleLazyObject(lambda: get_user(django_request))


#: Headers the request built for authentication leaves out: they describe a body it does not have.
_BODY_HEADERS = frozenset((b"content-type", b"content-length"))


def authentication_scope(scope: dict[str, Any]) -> dict[str, Any]:
    """The scope of the Django request the authenticators see: ``scope`` without its body's headers.

    The transport has read the body (JSON), so the request is built with an empty one. Kept, the
    POST's ``Content-Type: application/json`` and ``Content-Length`` would describe a body that is
    not there, and an authenticator that reads the form data would fail on it: django-oauth-toolkit's
    ``OAuth2Authentication`` reads ``request.POST`` (oauthlib's ``extract_body``), which on a DRF
    request without parsers raises ``UnsupportedMediaType``, a 500 for every request with
    credentials. Without them the request has no form data, and no authenticator finds a token in
    a body (RFC 6750 2.2's form parameter is not MCP's: "Access Token Usage").
    """
    headers = [(name, value) for name, value in scope.get("headers", ()) if name.lower() not in _BODY_HEADERS]
    return {**scope, "method": scope.get("method", "POST"), "headers": headers}


def authenticate_scope(scope: dict[str, Any]) -> Principal:
    """Run the configured DRF authenticators against an ASGI HTTP scope (sync: may hit the DB).

    Returns the anonymous principal when no authenticator recognises the
    request and anonymous access is enabled; raises :class:`AuthenticationFailed`
    otherwise.
    """
    from django.core.handlers.asgi import ASGIRequest
    from rest_framework import exceptions
    from rest_framework.request import Request

    classes = authentication_classes()
    if classes:
        import io

        django_request = ASGIRequest(authentication_scope(scope), io.BytesIO(b""))
        # Session authentication enforces CSRF for unsafe methods; MCP clients are not browsers
        # and Origin is validated by the transport, so skip Django's CSRF check here.
        django_request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
        _attach_session_user(django_request, scope)
        request = Request(django_request, authenticators=[cls() for cls in classes])
        try:
            user = request.user
        except exceptions.APIException as exc:
            # AuthenticationFailed and NotAuthenticated are DRF's refusals. Any other APIException
            # (Throttled, PermissionDenied, a ParseError of the authenticator's own) refuses too:
            # DRF stops at the authenticator that raised, so the caller is not "found by none"
            # (anonymous), and it is the client's request that was refused, not a server error.
            if not isinstance(exc, (exceptions.AuthenticationFailed, exceptions.NotAuthenticated)):
                logger.info("A DRF authenticator refused an MCP request with %s: %s", type(exc).__name__, exc.detail)
            header = None
            if request.authenticators:
                header = request.authenticators[0].authenticate_header(request)
            raise AuthenticationFailed(str(exc.detail), header) from None
        if user is not None and getattr(user, "is_authenticated", False):
            return Principal(user=user, id=f"user:{user.pk}", auth=request.auth)
    if mcp_settings.ALLOW_ANONYMOUS:
        return ANONYMOUS
    header = None
    for cls in classes:
        header = cls().authenticate_header(None)
        if header:
            break
    raise AuthenticationFailed("Authentication credentials were not provided.", header)
