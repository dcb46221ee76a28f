"""The ``MCP_TOOLS`` settings dict, its defaults, and lazy access to it.

Settings are read when used, never at import time, and reloaded on Django's
``setting_changed`` signal so ``override_settings`` works in tests. A value is tested against
:data:`ACCEPTS` when it is first read (``manage.py check`` applies the same tests).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.functional import Promise

DEFAULTS: dict[str, Any] = {
    # Where the endpoint lives (used by mcp_tools.urls / routing helpers and the demo banner).
    "PATH": "/mcp",
    "SERVER_NAME": "mcp-tools",
    "SERVER_TITLE": None,
    "SERVER_VERSION": None,  # None: the installed mcp_tools version
    "INSTRUCTIONS": None,
    # DRF authentication classes (import strings). None: REST_FRAMEWORK's defaults.
    "AUTHENTICATION_CLASSES": None,
    # Serve callers that present no credentials (as AnonymousUser). Each anonymous caller is
    # its own principal: its 2025-11-25 session, or the per-client secret it sends in the
    # ANONYMOUS_SECRET_HEADER (2026-07-28); anonymous callers without either share one.
    "ALLOW_ANONYMOUS": False,
    "ANONYMOUS_SECRET_HEADER": "X-MCP-Client-Secret",
    # MCP authorization (OAuth 2.1 resource server): None, or a dict with AUTHORIZATION_SERVERS,
    # TOKEN_VERIFIER, RESOURCE, SCOPES_SUPPORTED, REQUIRED_SCOPES... (docs/oauth.md).
    "OAUTH": None,
    # Origins allowed to call the endpoint from a browser. None: derived from ALLOWED_HOSTS.
    # Requests without an Origin header (non-browser clients) are always allowed.
    "ALLOWED_ORIGINS": None,
    "MAX_BODY_BYTES": 4 * 1024 * 1024,
    "PAGE_SIZE": 100,
    # Seconds each process may reuse a 2025-11-25 session it read (0: read it on every request).
    "SESSION_CACHE_SECONDS": 1.0,
    "SESSION_IDLE_SECONDS": 24 * 3600,
    # SSE events kept per stream for Last-Event-ID replay.
    "EVENT_RETENTION": 500,
    # Resources one 2025-11-25 session may be subscribed to at once (resources/subscribe).
    "SESSION_MAX_SUBSCRIPTIONS": 1000,
    # Keys used to seal requestState / saga / resume tokens. None: SECRET_KEY (+ fallbacks).
    "SIGNING_KEYS": None,
    # Lifetime of a requestState / saga token, and of a call waiting for input.
    "TOKEN_TTL": 3600,
    "CALL_TTL": 24 * 3600,
    # Finished calls (and their steps) older than this many seconds are deleted by mcp_cleanup
    # and the periodic cleanup task. None keeps them forever.
    "RETAIN_FINISHED_SECONDS": 30 * 24 * 3600,
    # Record every call in the ToolCall table (default: only calls that suspend,
    # defer or run longer than SLOW_CALL_SECONDS).
    "RECORD_ALL_CALLS": False,
    "SLOW_CALL_SECONDS": 2.0,
    # How often a running handler whose call has a row checks that the row is still live
    # (the cancellation path that needs no shared channel layer). 0 turns the check off.
    "CANCEL_POLL_SECONDS": 1.0,
    # The store sends its statements to the database driver's cursor when nothing watches
    # Django's cursors (query logging, execute_wrappers, a wrapped CursorWrapper, a backend
    # that makes cursors its own way). False: always through Django's cursor, for an agent
    # that instruments Django's code in a way that cannot be seen (ddtrace's Django integration).
    "STORE_DRIVER_CURSOR": True,
    # On a SQLite file in WAL mode, a durable round's own statements run on the event loop's
    # thread (never waiting for a lock: a busy database sends them to the store's thread) instead
    # of hopping to the store's thread. False: always the store's thread.
    "STORE_SQLITE_LANE": True,
    # Background work: a worker renews its hold on a call this often (a third of it); a call
    # whose worker stopped renewing is taken over by another worker after this many seconds.
    "WORKER_LEASE_SECONDS": 30.0,
    # Suggested polling interval for task clients (pollInterval / pollIntervalMs), and bounds
    # on the task lifetime a client may ask for (ttl / ttlMs), in milliseconds.
    "TASK_POLL_INTERVAL_MS": 500,
    "TASK_MAX_TTL_MS": 24 * 3600 * 1000,
    # How long a tasks/result holds its connection before the stream pauses (the client resumes it; docs/settings.md).
    "TASK_RESULT_WAIT_SECONDS": 30.0,
    # How long a request of a client without resume tokens waits for a converging tool
    # (one returning mcp_tools.Pending) before it answers with the pending state
    # (an isError result for a tool with an outputSchema).
    "CONVERGE_WAIT_SECONDS": 60.0,
    # 2026-07-28 cache hints on list/discover/read results.
    "CACHE_TTL_MS": 60_000,
    # Sampling with tools: bounds on the server-side agent loop.
    "SAMPLING_MAX_TOOLS": 16,
    "SAMPLING_MAX_TOOL_CALLS": 8,
    # Experimental extensions advertised under capabilities.experimental.
    "ENABLE_SAGAS": True,
    # Username the stdio transport runs as (None: anonymous if ALLOW_ANONYMOUS).
    "STDIO_USER": None,
    # After stdin closes, mcp_stdio finishes the requests it accepted and writes their replies
    # for at most this many seconds; then the rest are cancelled and answered with an error.
    # SIGTERM ends it at once (docs/settings.md).
    "STDIO_SHUTDOWN_GRACE_SECONDS": 10.0,
    # Autodiscover each installed app's mcp_tools.py module.
    "AUTODISCOVER": True,
}


class Accepts(NamedTuple):
    """What one ``MCP_TOOLS`` key accepts: its test, the words docs/settings.md says it with, and
    the id of the system check that reports a value failing it."""

    test: Callable[[Any], bool]
    says: str
    check_id: str
    #: The value never appears in a message (a key that seals tokens).
    secret: bool = False
    #: What a value that fits is read as, when the key takes a shorthand (None: as given).
    read: Callable[[Any], Any] | None = None


#: The longest duration a key of seconds takes: 100 years. Past some 2,000 years a time computed from
#: now leaves the dates Python has (``OverflowError`` in the cleanup and in every call that makes a row);
#: a key meant as "forever" reads as written well within this.
MAX_SECONDS = 100 * 365 * 24 * 3600


def _number(*, above: float | None = None, at_least: float | None = None, at_most: float | None = None, integer: bool = False,
            none: bool = False) -> Callable[[Any], bool]:
    """The test of a number key: finite (no bool, no str such as "1d"), within its bounds, or None
    where ``none`` says None means something of its own (docs/settings.md)."""

    def test(value: Any) -> bool:
        if value is None:
            return none
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) or not math.isfinite(value):
            return False
        return (above is None or value > above) and (at_least is None or value >= at_least) and (at_most is None or value <= at_most)

    return test


def _signing_keys(value: Any) -> bool:
    # A str is a sequence too: list("key") would sign with "k" and fall back to "e" and "y".
    return value is None or isinstance(value, (list, tuple)) and all(isinstance(key, str) and key for key in value)


def is_origin(value: Any) -> bool:
    """``value`` is a browser origin as an ``Origin`` header carries it (``scheme://host[:port]``:
    no path, not even ``/``, no user) or ``"*"``."""
    if value == "*":
        return True
    if not isinstance(value, str):
        return False
    parts = urlsplit(value)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # a port that is no number, or past 65535
        return False
    return port_ok and bool(parts.scheme and parts.hostname) and "@" not in parts.netloc and value.lower() == f"{parts.scheme}://{parts.netloc}".lower()


def _origins(value: Any) -> bool:
    # A str is a sequence too: "origin in 'https://app.example.com'" held for every substring, so
    # one origin given for the list is refused; the bare "*" is the documented shorthand for ["*"].
    # A set was accepted before the table (membership is all the endpoint asks of it).
    return value is None or value == "*" or isinstance(value, (list, tuple, set, frozenset)) and all(is_origin(origin) for origin in value)


def read_origins(value: Any) -> Any:
    """``ALLOWED_ORIGINS`` as its readers take it: the bare ``"*"`` as ``("*",)``, anything else as given
    (so what reads the setting meets a collection of origins or None, never a str)."""
    return ("*",) if value == "*" else value


def _authentication_classes(value: Any) -> bool:
    # One dotted path given for the list would be imported character by character.
    return value is None or isinstance(value, (list, tuple)) and all(isinstance(cls, type) or isinstance(cls, str) and cls for cls in value)


def _text(*, none: bool = False, empty: bool = True) -> Callable[[Any], bool]:
    # A lazy translation (gettext_lazy) is text too: i18n sites translate their instructions and title,
    # and the JSON encoder writes it as its string.
    return lambda value: none if value is None else isinstance(value, (str, Promise)) and (empty or bool(str(value)))


def visible_text(value: str) -> bool:
    """``value`` holds no whitespace and no control character: a path or URL, not one with a trailing
    newline (read from a file or an environment variable), which passed and matched nothing."""
    return all(c.isprintable() and not c.isspace() for c in value)


def _header_name(value: Any) -> bool:
    # RFC 9110 field name (a token): what a client can send and the transport can look up.
    return value is None or isinstance(value, str) and bool(value) and all(c in _TOKEN_CHARS for c in value.lower())


_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")

# What the keys of one kind accept, said once (docs/settings.md, "Accepted values", groups the keys so).
SECONDS_OR_ZERO = Accepts(_number(at_least=0, at_most=MAX_SECONDS), "a number of seconds >= 0, at most 100 years", "mcp_tools.E005")
SECONDS = Accepts(_number(above=0, at_most=MAX_SECONDS), "a number of seconds > 0, at most 100 years", "mcp_tools.E005")
SECONDS_OR_NONE = Accepts(_number(above=0, none=True, at_most=MAX_SECONDS), "None or a number of seconds > 0, at most 100 years",
                          "mcp_tools.E005")
#: What a SQL LIMIT or OFFSET takes on every database (PAGE_SIZE and EVENT_RETENTION become them: sys.maxsize,
#: "never page", passed the check and failed each tasks/list, and each 50th event of a stream; a review).
MAX_COUNT = 2**31 - 1
POSITIVE_INTEGER = Accepts(_number(above=0, integer=True), "a positive integer", "mcp_tools.E006")
COUNT = Accepts(_number(above=0, integer=True, at_most=MAX_COUNT), f"a positive integer, at most {MAX_COUNT}", "mcp_tools.E006")
SECONDS_INTEGER = Accepts(_number(above=0, integer=True, at_most=MAX_SECONDS), "a positive integer of seconds, at most 100 years",
                          "mcp_tools.E006")
FLAG = Accepts(lambda value: isinstance(value, bool), "True or False", "mcp_tools.E010")
TEXT_OR_NONE = Accepts(_text(none=True), "None or a string", "mcp_tools.E011")

#: What each key accepts: every key of :data:`DEFAULTS`. ``manage.py check`` reports a value
#: failing its test (:mod:`mcp_tools.checks`), and reading it raises ImproperlyConfigured, not
#: something further on that would use it wrongly (a token sealed with the wrong key, a session
#: ended at once, a ValueError per request).
ACCEPTS: dict[str, Accepts] = {
    # No query or fragment: a request's path never holds them, so the endpoint was never reached at such a
    # PATH, which the demo advertised (found by a review).
    # Nor whitespace or control characters: a trailing newline (a path read from a file or an environment
    # variable) passed, and the endpoint answered 404 at the path meant (found by the stdio review).
    "PATH": Accepts(lambda value: isinstance(value, str) and value.startswith("/") and not any(c in value for c in "?#")
                    and visible_text(value),
                    "a URL path starting with '/', without whitespace, control characters, '?' or '#'", "mcp_tools.E003"),
    "SERVER_NAME": Accepts(_text(empty=False), "a non-empty string", "mcp_tools.E011"),
    # A number would go out as one in serverInfo, which clients type as a string.
    "SERVER_TITLE": TEXT_OR_NONE,
    "SERVER_VERSION": TEXT_OR_NONE,
    "INSTRUCTIONS": TEXT_OR_NONE,
    "AUTHENTICATION_CLASSES": Accepts(_authentication_classes, "None or a list of DRF authentication classes (import strings)",
                                      "mcp_tools.E004"),
    "ALLOW_ANONYMOUS": FLAG,  # the string "False" would be true
    "ANONYMOUS_SECRET_HEADER": Accepts(_header_name, "None or a header name", "mcp_tools.E011"),
    # check_oauth reports it (E040) with the rest of OAUTH; here for its reads.
    "OAUTH": Accepts(lambda value: value is None or isinstance(value, dict), "None or a dict", "mcp_tools.E040"),
    "ALLOWED_ORIGINS": Accepts(_origins, 'None or a list or set of origins ("scheme://host[:port]", no path) or "*"', "mcp_tools.E009",
                               read=read_origins),
    "MAX_BODY_BYTES": POSITIVE_INTEGER,
    "PAGE_SIZE": COUNT,
    "SESSION_CACHE_SECONDS": SECONDS_OR_ZERO,  # 0: read on every request
    "SESSION_IDLE_SECONDS": SECONDS_OR_NONE,  # 0 would end every session at its next request; None keeps them
    "EVENT_RETENTION": COUNT,
    "SESSION_MAX_SUBSCRIPTIONS": POSITIVE_INTEGER,  # 0 would refuse every subscription the capability advertises
    "SIGNING_KEYS": Accepts(_signing_keys, "None or a list of non-empty strings, newest first", "mcp_tools.E008", secret=True),
    "TOKEN_TTL": SECONDS_INTEGER,
    "CALL_TTL": SECONDS_INTEGER,
    # 0 (or less) would delete calls just finished, before a task client read the result; None keeps them.
    "RETAIN_FINISHED_SECONDS": SECONDS_OR_NONE,
    "RECORD_ALL_CALLS": FLAG,
    "SLOW_CALL_SECONDS": SECONDS_OR_ZERO,
    "CANCEL_POLL_SECONDS": SECONDS_OR_ZERO,  # 0: no checks
    "STORE_DRIVER_CURSOR": FLAG,
    "STORE_SQLITE_LANE": FLAG,
    "WORKER_LEASE_SECONDS": SECONDS,  # 0 would renew the lease in a loop, a write per pass
    "TASK_POLL_INTERVAL_MS": POSITIVE_INTEGER,  # sent as an integer; 0 would ask clients to poll without a pause
    # ttl from 1000 to this; past 100 years a task's expiry leaves Python's dates (an internal error per task call)
    "TASK_MAX_TTL_MS": Accepts(_number(at_least=1000, integer=True, at_most=MAX_SECONDS * 1000), "an integer >= 1000, at most 100 years of ms",
                               "mcp_tools.E006"),
    "TASK_RESULT_WAIT_SECONDS": SECONDS_OR_ZERO,
    "CONVERGE_WAIT_SECONDS": SECONDS_OR_ZERO,
    "CACHE_TTL_MS": Accepts(_number(at_least=0, integer=True), "an integer >= 0", "mcp_tools.E006"),  # 0: stale at once
    "SAMPLING_MAX_TOOLS": POSITIVE_INTEGER,
    "SAMPLING_MAX_TOOL_CALLS": POSITIVE_INTEGER,
    "ENABLE_SAGAS": FLAG,
    "STDIO_USER": Accepts(_text(none=True, empty=False), "None or a non-empty string", "mcp_tools.E011"),
    "STDIO_SHUTDOWN_GRACE_SECONDS": SECONDS_OR_ZERO,
    "AUTODISCOVER": FLAG,
}


def problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the key ``name`` (a sentence), or None when it fits :data:`ACCEPTS`."""
    rule = ACCEPTS.get(name)
    if rule is None or rule.test(value):
        return None
    # repr() of what is not a plain value can look like a valid one (a lazy string shows its text).
    plain = type(value) in (str, int, float, bool, list, tuple, dict)
    shown = repr(value) if plain and not rule.secret else f"a {type(value).__name__}"
    return f"MCP_TOOLS[{name!r}] must be {rule.says}, not {shown}."


class McpToolsSettings:
    """Attribute access to ``settings.MCP_TOOLS`` merged over :data:`DEFAULTS`."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] | None = None

    @property
    def user_settings(self) -> dict[str, Any]:
        from django.conf import settings

        value = getattr(settings, "MCP_TOOLS", None) or {}
        return value if isinstance(value, dict) else {}

    def _merged(self) -> dict[str, Any]:
        if self._cache is None:
            self._cache = {**DEFAULTS, **self.user_settings}
        return self._cache

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"Invalid MCP_TOOLS setting: {name!r}")
        value = self._merged()[name]
        wrong = problem(name, value)
        if wrong is not None:  # checked once per configuration: a value that fits is cached below
            raise ImproperlyConfigured(wrong)
        rule = ACCEPTS.get(name)
        if rule is not None and rule.read is not None:
            value = rule.read(value)
        self.__dict__[name] = value  # later reads are plain attribute reads
        return value

    def reload(self) -> None:
        for name in [key for key in self.__dict__ if key in DEFAULTS]:
            del self.__dict__[name]
        self._cache = None


mcp_settings = McpToolsSettings()


def endpoint_path() -> str:
    """``MCP_TOOLS["PATH"]`` as served: from ``/``, with its trailing slash if it has one (Django's
    style ``/api/mcp/`` is served at ``/api/mcp/``, not somewhere else)."""
    return "/" + str(mcp_settings.PATH).lstrip("/")


#: Django settings whose change invalidates what modules derived from MCP_TOOLS. Each
#: module that caches something derived connects its own ``setting_changed``
#: receiver (as DRF and Channels do), so this module imports nobody.
RELOAD_ON = frozenset({"MCP_TOOLS", "SECRET_KEY", "SECRET_KEY_FALLBACKS", "ALLOWED_HOSTS", "REST_FRAMEWORK"})


@receiver(setting_changed)
def _reload_settings(*, setting: str, **kwargs: Any) -> None:
    if setting in RELOAD_ON:
        mcp_settings.reload()
