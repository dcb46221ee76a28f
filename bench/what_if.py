"""What-if app: the demo endpoint with candidate performance fixes monkeypatched in (evidence, not a fix).

``bench/run.py --what-if server_info,anon,session_cache`` adds a
``mcp_tools+what-if/uvicorn`` (and ``/daphne``) row served by this module, to
estimate what each fix proposed in ``docs/performance.md`` is worth before it
is made in ``mcp_tools`` itself. ``BENCH_WHAT_IF`` (comma list) selects:

``server_info``
    compute ``mcp_tools.server.server_info()`` once (it reads the package
    metadata with ``importlib.metadata.version`` on every 2026 result);
``anon``
    no DRF ``Request`` for a request without ``Authorization``/``Cookie``
    (answer the anonymous principal at once);
``session_cache``
    keep 2025-11-25 sessions found in the database in a process-local dict
    (no thread hop, no SQLite connection per request; ignores deletion and
    ``logging/setLevel`` - good enough for a benchmark, not for production);
``conn_max_age``
    persistent database connections (``CONN_MAX_AGE = 600``): a deployment setting.

Once a fix lands in ``mcp_tools``, its patch here is a no-op or can be deleted.
"""

import functools
import os

from demo_site.asgi import application  # noqa: F401 - sets Django up; the app served

FIXES = set(filter(None, os.environ.get("BENCH_WHAT_IF", "").split(",")))
KNOWN = {"server_info", "anon", "session_cache", "conn_max_age"}
if FIXES - KNOWN:
    raise SystemExit(f"unknown BENCH_WHAT_IF fixes: {sorted(FIXES - KNOWN)}; known: {sorted(KNOWN)}")

if "server_info" in FIXES:
    import mcp_tools.server.methods as methods

    methods.server_info = functools.lru_cache(maxsize=1)(methods.server_info)

if "anon" in FIXES:
    import mcp_tools.transports.http as http
    from mcp_tools.server.auth import ANONYMOUS
    from mcp_tools.conf import mcp_settings

    _authenticate = http.authenticate

    async def authenticate(scope, headers):
        if mcp_settings.ALLOW_ANONYMOUS and "authorization" not in headers and "cookie" not in headers:
            return ANONYMOUS
        return await _authenticate(scope, headers)

    http.authenticate = authenticate

if "session_cache" in FIXES:
    import mcp_tools.store as store

    _get_session = store.get_session
    _sessions: dict = {}

    async def _cached_get_session(session_id):
        session = _sessions.get(session_id)
        if session is None:
            session = await _get_session(session_id)
            if session is not None:
                _sessions[session_id] = session
        return session

    store.get_session = _cached_get_session

if "conn_max_age" in FIXES:
    from django.db import connections

    connections.settings["default"]["CONN_MAX_AGE"] = 600
