"""The dashboard's WebSocket: pushes the dashboard to staff when calls change.

Authenticated by the admin's session cookie (``channels.auth.AuthMiddlewareStack``,
see :func:`mcp_tools.routing.console_websocket_app`); only active staff with the
``view_toolcall`` (or ``change_toolcall``) permission whom the admin site lets in (its
``has_permission``) are accepted; the others' handshake is
refused (HTTP 403: the socket is closed before it was accepted). Before each push the consumer checks again, from the database,
that the admin session it was opened with still logs in the same user, and that the
user may still watch: a logout, an expired session, a password change, or a lost
permission closes the socket (4403).

Two ways a change reaches an open console:

- a "call changed" message on :data:`~mcp_tools.interprocess.events.CONSOLE_GROUP`
  (sent by the lifecycle signals and the admin's actions) pushes at once;
- a tick every :data:`TICK_SECONDS` reads one indexed ``MAX(updated_at)`` and
  pushes if it moved. That catches what sends no message: progress reports,
  changes made by other processes when the channel layer is in-memory, and
  Celery workers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from ..interprocess import broadcast
from ..interprocess.events import CONSOLE_GROUP

#: How often an open console looks at the table for changes nobody announced.
TICK_SECONDS = 1.0
#: Pushes at least this often anyway (ages and hourly windows move with time).
REFRESH_SECONDS = 30.0
#: At most one push per this interval, however many calls change.
MIN_GAP_SECONDS = 0.25
FORBIDDEN = 4403
#: The close code of a socket whose ticker failed (RFC 6455's "internal error").
TICKER_FAILED = 1011

logger = logging.getLogger(__name__)


def websocket_path() -> str:
    """The URL path of the dashboard's WebSocket (no leading slash)."""
    return "mcp-tools/console/ws/"


#: The query parameter that names the admin site a dashboard page is of (absent: the default site).
SITE_PARAM = "site"


def _serving_sites() -> list[Any]:
    """The admin sites that serve the calls' pages, by name: they register ``ToolCall`` and the URLconf
    mounts them. A site that only registers it (mcp_tools.admin registers ToolCall on the default site,
    which a project may leave unmounted behind a stricter one of its own) serves no page to anyone, and
    named in ``?site=`` it let in whom the mounted site refuses (found by a review)."""
    from django.contrib.admin.sites import all_sites
    from django.urls import get_resolver, get_urlconf

    from ..models import ToolCall

    # The URLconf's instance namespaces: a site's name is one when it is mounted (reversing "admin:..." is
    # no test, the app namespace falls back to any site that is).
    mounted = get_resolver(get_urlconf()).namespace_dict
    return sorted((site for site in all_sites if site.is_registered(ToolCall) and site.name in mounted), key=lambda site: site.name)


def admin_site_for(name: str | None) -> Any:
    """The admin site whose dashboard opened the socket: the site that serves calls named ``name`` (the page's
    ``?site=``; None when no such site does), else the default site, else any site that serves calls; None
    when none does. The socket asks it whether it lets the user in (:func:`can_watch`), as its pages do, and
    its pushes link to its pages.
    """
    from django.contrib import admin

    serving = _serving_sites()
    if name is not None:
        return next((site for site in serving if site.name == name), None)
    # ``admin.site`` is a lazy proxy of the default site: ``==`` compares what it wraps, ``is`` never holds.
    default = next((site for site in serving if site == admin.site), None)
    return default if default is not None else (serving[0] if serving else None)


def scope_site_name(scope: Any) -> str | None:
    """The ``?site=`` of the socket's URL, if any."""
    from urllib.parse import parse_qs

    raw = scope.get("query_string", b"")
    values = parse_qs(raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)).get(SITE_PARAM)
    return values[0] if values else None


def can_watch(user: Any, site: Any = None, scope: Any = None) -> bool:
    """Active staff with the view (or change) permission on calls (sync: may query permissions), whom the
    admin ``site`` the dashboard is of (:func:`admin_site_for`; None: no site serves it, refused) lets in
    (its ``has_permission``: a superuser-only site, django-otp's ``OTPAdminSite``), as its pages would.

    The site is asked with a request built from the socket's ``scope`` (:func:`request_for`). A site
    whose check raises on it (it needs what only its HTTP middleware sets, as ``OTPAdminSite`` needs
    ``user.is_verified``) refuses: the page then polls, through the site's own checks.
    """
    if not (
        user is not None and getattr(user, "is_authenticated", False) and user.is_active and user.is_staff
        and (user.has_perm("mcp_tools.view_toolcall") or user.has_perm("mcp_tools.change_toolcall"))
    ):
        return False
    if site is None:
        return False
    try:
        return bool(site.has_permission(request_for(user, scope or {})))
    except Exception:
        logger.debug("The admin site %r's has_permission failed on the console's socket: refused", site.name, exc_info=True)
        return False


def request_for(user: Any, scope: Any) -> Any:
    """An ``HttpRequest`` for an admin site's ``has_permission``: ``user``, and the socket's path, headers
    (as ``META``), client address and session."""
    from django.http import HttpRequest

    request = HttpRequest()
    request.user = user
    request.path = request.path_info = str(scope.get("path", ""))
    request.method = "GET"
    meta: dict[str, Any] = {"PATH_INFO": request.path, "REQUEST_METHOD": "GET"}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        key = name if name in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + name
        value = raw_value.decode("latin-1")
        meta[key] = f"{meta[key]},{value}" if key in meta else value
    client = scope.get("client")
    if client:
        meta["REMOTE_ADDR"], meta["REMOTE_PORT"] = client[0], client[1]
    request.META = meta
    if scope.get("session") is not None:
        request.session = scope["session"]
    return request


def session_user(session_key: str) -> Any:
    """The user the session ``session_key`` authenticates now, read again from the session store;
    None once it was logged out, flushed or expired, or its auth hash no longer matches the user's
    (a password change ends it, as Django's ``get_user`` would on the admin's next page).

    Read only: unlike ``django.contrib.auth.get_user`` this never flushes the session or cycles
    its key (under a fallback ``SECRET_KEY``), which would change the browser's login behind its back.
    """
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
    from django.utils.crypto import constant_time_compare

    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user_id, backend_path = session.get(SESSION_KEY), session.get(BACKEND_SESSION_KEY)
    if user_id is None or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = load_backend(backend_path).get_user(get_user_model()._meta.pk.to_python(user_id))
    if user is None or not hasattr(user, "get_session_auth_hash"):
        return user
    stored = session.get(HASH_SESSION_KEY)
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return user if stored and any(constant_time_compare(stored, h) for h in hashes) else None


def _snapshot_for(user: Any, session_key: str | None, site: Any = None, scope: Any = None) -> tuple[str, str] | None:
    """The dashboard for ``user`` if they may still watch it, read again from the database (staff
    status, permissions and the login change while a page stays open); None when they may not any more.

    ``session_key`` is the admin session the socket was opened with: it must still log in the
    same user (not logged out, expired, or ended by a password change). Without one (a scope
    authenticated by some other middleware), the user is read again by primary key. ``site``: the
    admin site the dashboard is of (:func:`admin_site_for`), whose links the panel holds and whose
    ``has_permission`` must still let the user in (asked with the socket's ``scope``).
    """
    from . import queries
    from .display import render_panel

    from django.contrib.auth import get_user_model

    pk = getattr(user, "pk", None)  # the scope's user is a lazy object: ask the user model itself
    if pk is None:
        fresh = None
    elif session_key is not None:
        fresh = session_user(session_key)
        fresh = fresh if fresh is not None and fresh.pk == pk else None
    else:
        fresh = get_user_model()._default_manager.filter(pk=pk).first()
    if not can_watch(fresh, site, scope):
        return None
    data = queries.dashboard()
    return data.fingerprint, render_panel(data, site.name if site is not None else None)


def _fingerprint() -> str:
    from . import queries

    return queries.fingerprint()


class ConsoleConsumer(AsyncJsonWebsocketConsumer):
    """One open dashboard. Sends ``{"type": "dashboard", "fingerprint", "html", "changed": [call ids]}``.

    Its ticker (:meth:`watch`) and its place in the group live exactly as long as the consumer:
    they end on a disconnect, and also when the consumer ends otherwise (an exception, the
    server cancelling it), which Channels does not answer with :meth:`disconnect`.
    """

    ticker: asyncio.Task[None] | None = None
    in_group = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Without this, a consumer that ended on an exception left its ticker querying the
            # database every second, for good, and its channel in the group.
            await self.stop_watching()

    async def connect(self) -> None:
        # The admin site whose dashboard opened the socket: it must let the user in, and its pushes link to its pages.
        self.site = await database_sync_to_async(admin_site_for)(scope_site_name(self.scope))
        if not await database_sync_to_async(can_watch)(self.scope.get("user"), self.site, self.scope):
            await self.close(code=FORBIDDEN)
            return
        # Remembered now: the scope's session object is this connection's copy, it never sees a logout.
        self.session_key: str | None = getattr(self.scope.get("session"), "session_key", None)
        self.fingerprint = ""
        self.changed: set[str] = set()
        self.wake = asyncio.Event()
        await self.accept()
        if self.channel_layer is not None:
            await self.channel_layer.group_add(CONSOLE_GROUP, self.channel_name)
            self.in_group = True
        if await self.push():
            self.ticker = asyncio.ensure_future(self.watch())

    async def disconnect(self, code: int) -> None:
        await self.stop_watching()

    async def stop_watching(self) -> None:
        """Stop the ticker and leave the group; once is enough (the disconnect and the consumer's end both call it)."""
        ticker, self.ticker = self.ticker, None
        if ticker is not None:
            ticker.cancel()
            await asyncio.wait([ticker])  # never raises: how the ticker ended is not the consumer's outcome
            if not ticker.cancelled() and ticker.exception() is not None:
                logger.error("The console's ticker failed", exc_info=ticker.exception())
        if self.in_group:
            self.in_group = False
            await self.channel_layer.group_discard(CONSOLE_GROUP, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """A frame from the page: JSON text goes to :meth:`receive_json`; a binary frame, or text that is
        not JSON, is ignored (the base class raises on either, which would end the consumer)."""
        if text_data is None:
            return
        try:
            content = await self.decode_json(text_data)
        except (ValueError, RecursionError):  # not JSON; nested too deep to decode
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page may ask for a fresh copy (``{"type": "refresh"}``); anything else is ignored."""
        if isinstance(content, dict) and content.get("type") == "refresh":
            self.wake.set()

    async def call_changed(self, event: dict[str, Any]) -> None:
        """A "call changed" message from the group: push soon."""
        calls = event.get("calls")
        if isinstance(calls, list):  # a batch of changes
            self.changed.update(str(call) for call in calls)
        else:
            self.changed.add(str(event.get("call", "")))
        self.wake.set()

    async def watch(self) -> None:
        """Push the dashboard as calls change, until the consumer ends.

        A ticker that fails (the database went away, a query raised) closes the socket with
        :data:`TICKER_FAILED`: the page then falls back to polling, which says "offline" while
        the data endpoint fails too, and opens the socket again later. Before, the socket stayed
        open with nothing behind it, and the page said "live" over a dashboard that no longer moved.
        """
        try:
            await self._tick()
        except Exception:
            logger.exception("The console's ticker failed; closing the socket (the page falls back to polling)")
            try:
                await self.close(code=TICKER_FAILED)
            except Exception:  # the socket is gone already: nothing left to tell
                logger.debug("Could not close the console's socket", exc_info=True)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        last_push = loop.time()
        while True:
            if await broadcast.wait_set(self.wake, TICK_SECONDS):
                self.wake.clear()
                if not await self.push():
                    return
                last_push = loop.time()
                await asyncio.sleep(MIN_GAP_SECONDS)
                continue
            if loop.time() - last_push >= REFRESH_SECONDS or await database_sync_to_async(_fingerprint)() != self.fingerprint:
                if not await self.push():
                    return
                last_push = loop.time()

    async def push(self) -> bool:
        """Send the dashboard; False (and the socket closed, 4403) when the user may not watch any more."""
        snapshot = await database_sync_to_async(_snapshot_for)(self.scope.get("user"), self.session_key, self.site, self.scope)
        if snapshot is None:
            await self.close(code=FORBIDDEN)
            return False
        self.fingerprint, html = snapshot
        changed, self.changed = sorted(self.changed - {""}), set()
        await self.send_json({"type": "dashboard", "fingerprint": self.fingerprint, "html": html, "changed": changed})
        return True
