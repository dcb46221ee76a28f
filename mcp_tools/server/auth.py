"""Who is calling: DRF authentication on the ASGI scope, and permission checks.

DRF authentication classes expect a request; we build a minimal Django
``HttpRequest`` from the scope (headers only, the body is consumed by the
transport) and wrap it in a DRF ``Request``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from ..conf import RELOAD_ON, mcp_settings

logger = logging.getLogger("mcp_tools.auth")

_auth_classes: list[Any] | None = None


def reset() -> None:
    global _auth_classes
    _auth_classes = None


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
    building a DRF request and hopping to a thread.
    """
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


@dataclass
class Principal:
    """The authenticated caller. ``id`` is what tokens and calls are bound to."""

    user: Any
    id: str
    auth: Any = None
    _perms: set[str] | None = field(default=None, repr=False)

    @property
    def is_anonymous(self) -> bool:
        return not getattr(self.user, "is_authenticated", False)

    def has_perms(self, perms: tuple[str, ...] | list[str]) -> bool:
        """Sync (may query the database once per principal)."""
        if not perms:
            return True
        if self.is_anonymous:
            return False
        if getattr(self.user, "is_superuser", False) and getattr(self.user, "is_active", False):
            return True
        if self._perms is None:
            self._perms = set(self.user.get_all_permissions())
        return all(perm in self._perms for perm in perms)


ANONYMOUS = Principal(user=AnonymousUser(), id="anonymous")


def principal_for_user(user: Any) -> Principal:
    if user is None or not getattr(user, "is_authenticated", False):
        return ANONYMOUS
    return Principal(user=user, id=f"user:{user.pk}")


class AuthenticationFailed(Exception):
    def __init__(self, message: str, www_authenticate: str | None = None) -> None:
        super().__init__(message)
        self.www_authenticate = www_authenticate


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

        django_request = ASGIRequest({**scope, "method": scope.get("method", "POST")}, io.BytesIO(b""))
        # Session authentication enforces CSRF for unsafe methods; MCP clients are not browsers
        # and Origin is validated by the transport, so skip Django's CSRF check here.
        django_request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
        request = Request(django_request, authenticators=[cls() for cls in classes])
        try:
            user = request.user
        except exceptions.AuthenticationFailed as exc:
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
