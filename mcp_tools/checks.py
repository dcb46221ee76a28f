"""System checks of mcp_tools: its settings, database, tools and OAuth (every id: docs/settings.md, "System checks")."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from .conf import ACCEPTS, DEFAULTS, problem, read_origins, visible_text


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``MCP_TOOLS``: a dict (E001) of known keys (E002), each of a value its row of
    :data:`mcp_tools.conf.ACCEPTS` accepts; authentication classes that import and whose models are installed (E004);
    channels (E007)."""
    problems: list[Any] = []
    user = getattr(settings, "MCP_TOOLS", {})
    if not isinstance(user, dict):
        return [Error("MCP_TOOLS must be a dict.", id="mcp_tools.E001")]
    unknown = sorted(set(user) - set(DEFAULTS))
    if unknown:
        problems.append(Error(f"Unknown MCP_TOOLS keys: {', '.join(unknown)}.", hint=f"Valid keys: {', '.join(sorted(DEFAULTS))}.", id="mcp_tools.E002"))
    merged = {**DEFAULTS, **user}
    classes = merged["AUTHENTICATION_CLASSES"]
    if problem("AUTHENTICATION_CLASSES", classes) is None and classes is not None:  # else E004 from the table below
        for dotted in classes:
            try:
                import_string(dotted) if isinstance(dotted, str) else dotted
            except (ImportError, ValueError, TypeError) as exc:  # import_module("") for ".Auth", a relative ".x" for ".x.Auth"
                problems.append(Error(f"MCP_TOOLS['AUTHENTICATION_CLASSES'] cannot import {dotted!r}: {exc}.", id="mcp_tools.E004"))
    problems.extend(token_model_problems(classes))
    for name, rule in ACCEPTS.items():  # every key's type and range: E003-E006, E008-E011
        wrong = problem(name, merged[name])
        if wrong is not None and name != "OAUTH":  # OAUTH: check_oauth (E040)
            problems.append(Error(wrong, id=rule.check_id))
    # Asked of the app registry: an app listed by its AppConfig ("channels.apps.ChannelsConfig") is installed too.
    if not apps.is_installed("channels"):
        problems.append(Error("mcp_tools serves MCP through Django Channels: add 'channels' to INSTALLED_APPS.", id="mcp_tools.E007"))
    origins = read_origins(merged["ALLOWED_ORIGINS"])  # the bare "*" too
    # Every collection conf.ACCEPTS takes: a set holding "*" lets any origin in as a list does.
    if isinstance(origins, (list, tuple, set, frozenset)) and "*" in origins:
        problems.append(Warning("MCP_TOOLS['ALLOWED_ORIGINS'] contains '*': any web page can call the endpoint from a browser.",
                                hint="List the origins that may call it.", id="mcp_tools.W001"))
    elif origins is None and "*" in (getattr(settings, "ALLOWED_HOSTS", None) or ()):
        # Without ALLOWED_ORIGINS the browser origins allowed are ALLOWED_HOSTS' hosts: "*" there lets
        # every page in, as W001's "*" does (the spec: servers MUST validate Origin). A leading-dot
        # entry (".example.com") names the site's own domain and its subdomains, a choice of the site's.
        problems.append(Warning("MCP_TOOLS['ALLOWED_ORIGINS'] is not set and ALLOWED_HOSTS contains '*': any web page can call "
                                "the endpoint from a browser.",
                                hint="Set MCP_TOOLS['ALLOWED_ORIGINS'] to the origins that may call it ([] for none).",
                                id="mcp_tools.W007"))
    problems.sort(key=lambda message: message.id)  # stable: one key's messages keep the table's order
    return problems


@register(Tags.database)
def check_database(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W005: on SQLite, durable calls need writers that take the lock at BEGIN (``transaction_mode``)."""
    from django.db import router

    from .models import ToolCall

    alias = router.db_for_write(ToolCall)
    return sqlite_transaction_mode_problems(alias, settings.DATABASES.get(alias, {}))


def sqlite_transaction_mode_problems(alias: str, database: dict[str, Any]) -> list[Any]:
    """W005 for the ``DATABASES`` entry ``database`` that durable calls write to, if it needs it."""
    if not _is_sqlite(str(database.get("ENGINE", ""))):
        return []
    mode = str((database.get("OPTIONS") or {}).get("transaction_mode") or "DEFERRED").upper()
    if mode in ("IMMEDIATE", "EXCLUSIVE"):
        return []
    return [Warning(
        f"The {alias!r} database is SQLite with {mode} transactions: concurrent writers of durable calls fail with "
        "'database is locked' instead of waiting their turn, and two runs of one ctx.once step in different "
        "processes can both start their effect.",
        hint=f"Set DATABASES[{alias!r}]['OPTIONS']['transaction_mode'] = 'IMMEDIATE' (Django 5.1+), as the demo does.",
        id="mcp_tools.W005")]


def _is_sqlite(engine: str) -> bool:
    """Whether the backend ``engine`` names is SQLite: Django's, or one of another name built on it (GeoDjango's
    SpatiaLite, a project's own subclass), told by its ``vendor`` as the store tells it."""
    if engine.endswith("sqlite3"):
        return True
    from django.db.utils import load_backend

    try:
        return getattr(load_backend(engine).DatabaseWrapper, "vendor", None) == "sqlite"
    except Exception:  # a backend that does not load here (its driver missing): Django's own checks say so
        return False


def _weak_key(key: Any) -> bool:
    """A key anyone may know or guess: empty, under 50 characters, or Django's ``django-insecure`` kind."""
    return not key or len(str(key)) < 50 or str(key).startswith("django-insecure")


@register(Tags.security, deploy=True)
def check_deployment(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    problems: list[Any] = []
    user = getattr(settings, "MCP_TOOLS", {}) or {}
    keys = user.get("SIGNING_KEYS") if isinstance(user, dict) else None
    if problem("SIGNING_KEYS", keys) is not None:  # E008 reports it
        keys = None
    secret = keys[0] if keys else settings.SECRET_KEY
    if _weak_key(secret):
        problems.append(Warning("The key that seals requestState and saga tokens is weak.",
                                hint="Set a long random SECRET_KEY or MCP_TOOLS['SIGNING_KEYS'].", id="mcp_tools.W002"))
    elif keys and any(_weak_key(key) for key in keys[1:]):
        # Every key of the list opens tokens: one weak (or public) old key lets anyone forge a token
        # naming any principal, however strong the sealing key (Django's security.W025 says the same
        # of SECRET_KEY_FALLBACKS, which SIGNING_KEYS replaces here).
        weak = [index for index, key in enumerate(keys) if index and _weak_key(key)]
        problems.append(Warning(f"A key that opens requestState and saga tokens is weak: MCP_TOOLS['SIGNING_KEYS'][{weak[0]}].",
                                hint="Replace it with a long random key, or remove it once the tokens it sealed have expired.",
                                id="mcp_tools.W002"))
    layers = getattr(settings, "CHANNEL_LAYERS", {}) or {}
    backend = (layers.get("default") or {}).get("BACKEND", "")
    if backend.endswith("InMemoryChannelLayer") or not backend:
        problems.append(Warning("The channel layer is in-memory: answers posted to another server process wake the waiting call "
                                "only through database polling.", hint="Use channels_redis with several processes.", id="mcp_tools.W003"))
    if isinstance(user, dict) and user.get("ALLOW_ANONYMOUS") and settings.DEBUG is False:
        problems.append(Warning("MCP_TOOLS['ALLOW_ANONYMOUS'] is on in production: anyone can call tools without permissions.",
                                id="mcp_tools.W004"))
    return problems


@register(Tags.compatibility)
def check_background_broker(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Background tools need a Celery app with a broker (E020) whose transport loads (E021): else their calls never run.
    So do tools with ``task_support``: a worker runs their task-augmented calls (a plain tool's passed the
    check, then its 2025-11-25 tasks stayed working for good; found by the author review)."""
    from .registry import registry

    background = sorted(tool.name for tool in registry.tools if tool.background or tool.task_support != "forbidden")
    if not background:
        return []
    from celery import current_app

    if current_app.conf.broker_url:
        return broker_transport_problems(current_app)
    return [Error(
        f"Background tools are registered ({', '.join(background[:5])}{', ...' if len(background) > 5 else ''}; "
        "background=True, or task_support for their task calls) but no Celery broker is configured, so their calls would never run.",
        # The import is the step most often missed: without it celery -A loads the app, the server never does.
        hint="Set up a Celery app (celery.py loading 'django.conf:settings' with namespace 'CELERY'), import it in the "
             "project's __init__.py ('from .celery import app as celery_app') and set CELERY_BROKER_URL; "
             "see docs/background.md, \"Setting it up\".",
        id="mcp_tools.E020",
    )]


def broker_transport_problems(app: Any) -> list[Any]:
    """E021: the transport of ``app``'s broker cannot be loaded, most often as its client library is not installed.

    Made as the server's first queued call makes it, without connecting: kombu imports the
    transport's module when the connection object is built and checks its library when the
    transport object is (a ``redis://`` broker without ``redis``: an ``AttributeError`` at the
    import, or an ``ImportError``, by kombu version). Unchecked, ``check`` passed, the worker
    crashed at start, and every background call waited for the sweep to queue it again.
    """
    url = str(app.conf.broker_write_url).split(";")[0]  # a failover list: its first broker is the one used
    # The scheme alone in messages: the URL may hold the broker's password.
    name = app.conf.broker_transport or (url.split("://", 1)[0] if "://" in url else url)
    try:
        connection = app.connection_for_write()
        try:
            connection.transport  # noqa: B018  (made, not connected: what fails without the library)
        finally:
            connection.release()
    except Exception as exc:  # whatever the transport's module raises at import: every one leaves calls unqueued
        from kombu.transport import TRANSPORT_ALIASES

        module = str(TRANSPORT_ALIASES.get(name, ""))
        if module.startswith("kombu.transport.redis:"):
            hint = "Install the Redis client: pip install redis (django-mcp-tools' 'redis' extra installs it, as 'celery[redis]' does)."
        elif module:
            hint = f"Install the client library kombu's {module} needs (Celery's bundles name them: 'celery[...]')."
        else:  # no such scheme, such as mcpfs:// when no module registered it
            hint = ("Register the scheme by importing the module that defines it in the Celery app module "
                    "(mcpfs://: import mcp_tools.interprocess.filebroker, docs/background.md).")
        return [Error(f"The Celery broker's {name!r} transport cannot be loaded ({type(exc).__name__}: {exc}), so "
                      "background calls cannot be queued and a worker cannot start.", hint=hint, id="mcp_tools.E021")]
    return []


@register(Tags.compatibility)
def check_model_tools(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Model actions and toolsets: unknown field (E030), method or action (E031), duplicate tool name (E032),
    unknown permission (E033), a schema that cannot be built (E034), a filter the model's database
    cannot run (W030)."""
    from .modeltools import check_model_tools as problems

    return problems()


@register(Tags.compatibility)
def check_registered_permissions(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W006: a tool, resource or prompt requires a permission that no installed app defines.

    Nobody but a superuser would have such a permission (a typo, an app left out of
    INSTALLED_APPS), so the item is hidden from everyone else. A warning, not an error: a
    custom authentication backend may grant names no model declares. Model tools are left to
    E033, and a tool's OAuth scopes (``oauth-scope:`` entries) are no Django permissions.
    """
    from .modeltools import base as model_tools
    from .registry import registry
    from .registry.registry import SCOPE_PERMISSION_PREFIX

    known = model_tools.known_permissions()
    by_model_tools = {name for declaration in model_tools.declarations for name in declaration.tool_names()}
    items: list[tuple[str, str, tuple[str, ...]]] = [
        *(("Tool", tool.name, tool.permissions) for tool in registry.tools if tool.name not in by_model_tools),
        *(("Resource", resource.uri or "", resource.permissions) for resource in registry.resources),
        *(("Resource template", resource.uri_template or "", resource.permissions) for resource in registry.resource_templates),
        *(("Prompt", prompt.name, prompt.permissions) for prompt in registry.prompts),
    ]
    return [
        Warning(f"{kind} {name!r} requires permission {perm!r}, which no installed app defines: only superusers "
                "will see it.",
                hint="Name a permission as 'app_label.codename' of an installed model (its default permissions or "
                     "Meta.permissions). If an authentication backend grants it, silence mcp_tools.W006.",
                id="mcp_tools.W006")
        for kind, name, perms in items
        for perm in perms
        if perm not in known and not perm.startswith(SCOPE_PERMISSION_PREFIX)
    ]


@register(Tags.security)
def check_oauth(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``MCP_TOOLS["OAUTH"]`` (ids E040-E043, W040, W041): MCP authorization as a resource server."""
    user = getattr(settings, "MCP_TOOLS", {}) or {}
    config = user.get("OAUTH") if isinstance(user, dict) else None
    if config is None:
        return []
    from .server.oauth import OAUTH_DEFAULTS

    if not isinstance(config, dict):
        return [Error("MCP_TOOLS['OAUTH'] must be a dict or None.", id="mcp_tools.E040")]
    problems: list[Any] = []
    unknown = sorted(set(config) - set(OAUTH_DEFAULTS))
    if unknown:
        problems.append(Error(f"Unknown MCP_TOOLS['OAUTH'] keys: {', '.join(unknown)}.",
                              hint=f"Valid keys: {', '.join(sorted(OAUTH_DEFAULTS))}.", id="mcp_tools.E040"))
    servers = config.get("AUTHORIZATION_SERVERS")
    if not isinstance(servers, (list, tuple)) or not servers or not all(
        isinstance(s, str) and visible_text(s) and (s.startswith("/") or s.startswith(("https://", "http://"))) for s in servers
    ):
        problems.append(Error("MCP_TOOLS['OAUTH']['AUTHORIZATION_SERVERS'] must list at least one issuer URL "
                              "(or a path of this site starting with '/').", id="mcp_tools.E041"))
    verifier = config.get("TOKEN_VERIFIER")
    from .server.oauth import TokenVerifier

    try:
        cls = import_string(verifier) if isinstance(verifier, str) else verifier
    except (ImportError, ValueError, TypeError) as exc:  # as E004's: a path such as ".Verifier" or ".x.Verifier"
        problems.append(Error(f"MCP_TOOLS['OAUTH']['TOKEN_VERIFIER'] cannot import {verifier!r}: {exc}.",
                              hint="For django-oauth-toolkit: pip install '/path/to/django-mcp-tools[oauth]' (a checkout).", id="mcp_tools.E042"))
    else:
        if not (isinstance(cls, type) and issubclass(cls, TokenVerifier)):
            problems.append(Error("MCP_TOOLS['OAUTH']['TOKEN_VERIFIER'] must name a subclass of mcp_tools.server.oauth.TokenVerifier.",
                                  id="mcp_tools.E042"))
    for key in ("SCOPES_SUPPORTED", "REQUIRED_SCOPES"):
        value = config.get(key, [])
        if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) and s and " " not in s for s in value):
            problems.append(Error(f"MCP_TOOLS['OAUTH'][{key!r}] must be a list of scope names (no spaces).", id="mcp_tools.E043"))
    resource = config.get("RESOURCE")
    # A query too: RFC 8707 2 says a resource SHOULD NOT have one, and here it would name a resource
    # the metadata does not describe (its path-suffixed URL, RFC 9728 3.1, is made of the path alone).
    if resource is not None and (not isinstance(resource, str) or not visible_text(resource) or "#" in resource or "?" in resource
                                 or not resource.startswith(("https://", "http://"))):
        problems.append(Error("MCP_TOOLS['OAUTH']['RESOURCE'] must be an absolute URI without a query or a fragment "
                              "(RFC 8707 2: a resource MUST NOT have a fragment and SHOULD NOT have a query; the "
                              "protected resource metadata's URL, RFC 9728 3.1, is built from its path alone).",
                              hint="Serve each resource (a tenant, say) at a path of its own, e.g. 'https://shop.example/a/mcp'.",
                              id="mcp_tools.E043"))
    elif resource is None and not settings.DEBUG:
        problems.append(Warning("MCP_TOOLS['OAUTH']['RESOURCE'] is not set: the resource identifier (the token audience) is "
                                "built from each request's scheme and host (as Django reads them: SECURE_PROXY_SSL_HEADER, "
                                "USE_X_FORWARDED_HOST).",
                                hint="Set it to the public URL of the MCP endpoint, e.g. 'https://example.com/mcp'.", id="mcp_tools.W040"))
    problems.extend(bearer_authenticator_problems(user.get("AUTHENTICATION_CLASSES")))
    return problems


def mcp_authenticators(configured: Any) -> tuple[str, list[tuple[str, Any]]] | None:
    """The DRF authenticators MCP uses: the setting that lists them and each one's (name, class).

    ``configured``: ``MCP_TOOLS["AUTHENTICATION_CLASSES"]`` (None: DRF's defaults). Each name is
    as the setting spells it (DOT's docs give the package's path, not the module's). None when
    one does not import: E004 (MCP_TOOLS) or DRF's own error (REST_FRAMEWORK) reports it.
    """
    try:
        if configured is None:
            from rest_framework.settings import api_settings

            listed = list(getattr(settings, "REST_FRAMEWORK", {}).get("DEFAULT_AUTHENTICATION_CLASSES") or ())
            classes = list(api_settings.DEFAULT_AUTHENTICATION_CLASSES)
        elif isinstance(configured, (list, tuple)):
            listed = list(configured)
            classes = [import_string(path) if isinstance(path, str) else path for path in configured]
        else:
            return None  # E004
    except (ImportError, ValueError, TypeError):  # E004 (a path such as ".x.Auth")
        return None
    source = "MCP_TOOLS['AUTHENTICATION_CLASSES']" if configured is not None else "REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']"
    named = []
    for index, cls in enumerate(classes):
        if index < len(listed) and isinstance(listed[index], str):
            named.append((listed[index], cls))
        else:  # a class given as itself (or what E004 reports as no class)
            named.append((f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else repr(cls), cls))
    return source, named


def token_model_problems(configured: Any) -> list[Any]:
    """E004: an authenticator used for MCP is DRF's ``TokenAuthentication`` (or a subclass using its
    ``Token`` model) and ``rest_framework.authtoken`` is not installed.

    DRF's ``Token`` is then abstract (DRF tests that exact name in ``INSTALLED_APPS``), so every
    request carrying ``Authorization: Token ...`` was a 500 (``Token`` has no ``DoesNotExist``)
    while ``check`` passed. ``configured``: as :func:`mcp_authenticators` takes it.
    """
    from rest_framework.authentication import TokenAuthentication

    found = mcp_authenticators(configured)
    if found is None or "rest_framework.authtoken" in settings.INSTALLED_APPS:
        return []
    source, authenticators = found
    return [
        Error(f"{source} lists {name}, which looks tokens up in DRF's Token model, but 'rest_framework.authtoken' is "
              "not in INSTALLED_APPS: every request with a token would fail.",
              hint="Add 'rest_framework.authtoken' to INSTALLED_APPS and run migrate, or use another authenticator.",
              id="mcp_tools.E004")
        for name, cls in authenticators
        if isinstance(cls, type) and issubclass(cls, TokenAuthentication)
        and getattr(cls, "model", None) is None and getattr(cls, "get_model", None) is TokenAuthentication.get_model  # else its own model
    ]


def bearer_authenticator_problems(configured: Any) -> list[Any]:
    """W041: with ``OAUTH`` on, a DRF authenticator used for MCP takes bearer tokens (django-oauth-toolkit's
    ``OAuth2Authentication``, as DOT's docs advise for a REST API; simplejwt's ``JWTAuthentication``).

    MCP hands every ``Authorization: Bearer`` value to the token verifier and refuses
    ``?access_token=`` (docs/oauth.md), so such an authenticator never authenticates an MCP request:
    a token it would accept is one the resource-server checks (audience, expiry, scopes) did not see.
    ``configured``: ``MCP_TOOLS["AUTHENTICATION_CLASSES"]`` (None: DRF's defaults).
    """
    found = mcp_authenticators(configured)
    if found is None:
        return []
    source, authenticators = found
    problems: list[Any] = []
    for name, cls in authenticators:
        try:
            header = cls().authenticate_header(None)  # what the transport asks of each class for a 401, too
        except Exception:
            continue
        scheme = header.split(None, 1)[0].lower() if isinstance(header, str) and header.strip() else ""
        if scheme == "bearer":
            problems.append(Warning(
                f"MCP_TOOLS['OAUTH'] is on and {source} lists {name}, which takes bearer tokens: MCP gives every "
                "Bearer token to OAUTH['TOKEN_VERIFIER'] (audience, expiry, scopes) and refuses access tokens in the "
                "query string, so this authenticator never authenticates an MCP request.",
                hint="Set MCP_TOOLS['AUTHENTICATION_CLASSES'] to the DRF authenticators MCP should use, without it "
                     "(your REST API keeps REST_FRAMEWORK's); see docs/oauth.md.",
                id="mcp_tools.W041"))
    return problems
