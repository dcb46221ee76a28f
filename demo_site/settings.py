"""Settings of the ``mcp_tools`` demo project.

Everything works out of the box with embedded defaults (SQLite, in-memory
channel layer, local-memory cache). The environment switches to real
services:

``DATABASE_URL``
    e.g. ``postgres://user:pass@localhost:5432/mcp_demo`` (needs ``dj-database-url``
    and ``psycopg``: the ``postgres`` extra) or ``mysql://user:pass@localhost:3306/mcp_demo``
    for MariaDB (``dj-database-url`` and ``mysqlclient``: the ``mysql`` extra).
``REDIS_URL``
    e.g. ``redis://localhost:6379/0``: the cache (``django-redis``), the channel
    layer (``channels-redis``) and the Celery broker.
``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG``, ``DJANGO_ALLOWED_HOSTS``
    The usual deployment settings (``DJANGO_ALLOWED_HOSTS`` is a comma list).
``MCP_ALLOW_ANONYMOUS``
    Serve MCP callers that present no credentials (default: off).
``MCP_CONFORMANCE=1``
    Install the fixture tools of the MCP conformance suite
    (``demo_site.conformance``) and allow anonymous callers.
"""

from __future__ import annotations

import os
from typing import Any
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


# --------------------------------------------------------------------------
# Core
# --------------------------------------------------------------------------
SECRET_KEY = os.environ.get(
    "DJANGO_SECRET_KEY",
    "django-insecure-mcp-tools-demo-key-change-me-0123456789abcdefghijklmnop",
)
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]", *env_list("DJANGO_ALLOWED_HOSTS")]

# The conformance suite's fixture tools (see demo_site/conformance/mcp_tools.py).
MCP_CONFORMANCE_FIXTURES = env_bool("MCP_CONFORMANCE", False)

INSTALLED_APPS = [
    "daphne",  # first: its runserver serves the ASGI application
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "mcp_tools",
    "demo_site.inventory",
    "demo_site.operations",
    "demo_site.shop",
]
if MCP_CONFORMANCE_FIXTURES:
    # Before the inventory app, so the suite's fixtures are listed first: some
    # scenarios call the first listed tool with empty arguments.
    INSTALLED_APPS.insert(INSTALLED_APPS.index("demo_site.inventory"), "demo_site.conformance")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo_site.urls"
ASGI_APPLICATION = "demo_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --------------------------------------------------------------------------
# Database
# --------------------------------------------------------------------------
DATABASES: dict[str, Any] = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
        # mcp_tools reaches the ORM from one worker thread per process: keeping its
        # connection open saves a connect per request (see docs/performance.md).
        "CONN_MAX_AGE": 60,
        "OPTIONS": {
            # Wait for a competing writer instead of failing at once.
            "timeout": 20,
            # WAL lets readers proceed while one connection writes (Django 5.1+). Checkpoints
            # every 10,000 WAL pages (~40 MB) instead of SQLite's 1,000: the index pages a
            # durable round rewrites each commit are copied back once per checkpoint, so
            # fewer checkpoints cut a round's write cost by 15-30% (docs/performance-durable.md).
            "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;"
                            "PRAGMA wal_autocheckpoint=10000;PRAGMA journal_size_limit=67108864;",
            # Take the write lock when a transaction starts, so two concurrent
            # transactions never deadlock upgrading a read lock (Django 5.1+).
            "transaction_mode": "IMMEDIATE",
        },
    }
}

DATABASE_URL = os.environ.get("DATABASE_URL")
if DATABASE_URL:
    try:
        import dj_database_url
    except ImportError as exc:  # pragma: no cover - configuration error
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "DATABASE_URL is set but dj-database-url is not installed: from the repository, "
            ".venv/bin/pip install -e '.[postgres]' (or '.[mysql]' for MariaDB); scripts/demo installs it"
        ) from exc
    SQLITE_OPTIONS = DATABASES["default"]["OPTIONS"]
    DATABASES["default"] = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        # Another SQLite file: the same options as the default one (IMMEDIATE transactions above
        # all, mcp_tools.W005); dj-database-url builds the entry afresh, without them.
        DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
    elif DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # Server-side parameters and prepared statements (psycopg prepares a statement
        # after its 5th run): a durable round's single statement costs ~40% less once
        # PostgreSQL plans it no more (docs/performance-durable.md). Leave these out
        # behind a pgbouncer in transaction pooling mode older than 1.21.
        DATABASES["default"].setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 5})
    elif DATABASES["default"]["ENGINE"].endswith("mysql"):
        # MariaDB has no partial indexes: ToolCall's four conditional ones are made whole (correct,
        # a little more index writing), which Django warns of at every migrate and test run.
        SILENCED_SYSTEM_CHECKS = ["models.W037"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --------------------------------------------------------------------------
# Cache, channel layer, Celery
# --------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL")
if REDIS_URL:
    try:
        import channels_redis  # noqa: F401
        import django_redis  # noqa: F401
    except ImportError as exc:  # pragma: no cover - configuration error
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "REDIS_URL is set but the Redis packages are not installed: from the repository, "
            ".venv/bin/pip install -e '.[redis]'; scripts/demo installs them"
        ) from exc
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    # Read by demo_site/celery.py (config_from_object("django.conf:settings", namespace="CELERY")).
    CELERY_BROKER_URL = REDIS_URL
    # A worker that dies mid-call has its message redelivered after this many seconds.
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {"visibility_timeout": 300}
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "mcp-tools-demo",
        }
    }
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # A broker that needs no server: kombu's filesystem transport (with atomic writes, see
    # mcp_tools/interprocess/filebroker.py), one file per message in a folder the server and
    # the worker share (MCP_TOOLS_BROKER_DIR, default var/broker/).
    BROKER_DIR = Path(os.environ.get("MCP_TOOLS_BROKER_DIR") or BASE_DIR / "var" / "broker")
    (BROKER_DIR / "control").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "mcpfs://localhost//"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR),
        "data_folder_out": str(BROKER_DIR),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # Most of a background call's start-up latency with this broker (bench/background.py):
        # 0.05 s gave a 48 ms p50 from tools/call to the handler, 0.01 s 13 ms.
        "polling_interval": 0.02,
    }

# The call row holds each background call's result and state, not a Celery result backend.
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# A task is acknowledged once it ran, and a worker lost mid-task gives it back to the queue.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The sweep: expired calls, and takeover of calls whose worker died; the cleanup: what
# manage.py mcp_cleanup does (old SSE events, idle sessions, finished calls past their
# retention). See docs/background.md.
CELERY_BEAT_SCHEDULE = {
    "mcp-tools-sweep": {"task": "mcp_tools.sweep", "schedule": 30.0},
    "mcp-tools-cleanup": {"task": "mcp_tools.cleanup", "schedule": 3600.0},
}

# --------------------------------------------------------------------------
# Authentication: DRF tokens for MCP clients, sessions for the admin
# --------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
}

LOGIN_URL = "/admin/login/"

# The shop's object-level rules (a refund only for one's own store) after Django's model permissions.
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "demo_site.shop.backends.StoreRulesBackend",
]

# --------------------------------------------------------------------------
# mcp_tools
# --------------------------------------------------------------------------
MCP_TOOLS = {
    "ALLOW_ANONYMOUS": env_bool("MCP_ALLOW_ANONYMOUS", False) or MCP_CONFORMANCE_FIXTURES,
    "SERVER_NAME": "mcp-tools-demo",
    "INSTRUCTIONS": (
        "Inventory of a small shop. Use search_products to find products by name or SKU, "
        "restock to add stock (needs the inventory.change_product permission), and deploy "
        "to run an interactive deployment that asks the user for the target environment. "
        "Resources: inventory://products (all products) and inventory://products/{sku}."
    ),
}

# --------------------------------------------------------------------------
# OAuth (MCP authorization): django-oauth-toolkit as the authorization server, when
# installed (pip install 'django-mcp-tools[oauth]'); see docs/oauth.md
# --------------------------------------------------------------------------
try:
    import oauth2_provider  # noqa: F401

    OAUTH_INSTALLED = True
except ImportError:
    OAUTH_INSTALLED = False

if OAUTH_INSTALLED:
    INSTALLED_APPS.append("oauth2_provider")
    OAUTH2_PROVIDER = {
        "SCOPES": {"mcp": "Use the shop's MCP tools", "inventory:write": "Change the inventory through MCP"},
        "DEFAULT_SCOPES": ["mcp"],
        "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    }
    MCP_TOOLS["OAUTH"] = {
        # DOT is mounted at /o/ (demo_site/urls.py); its metadata is at the root well-known URI.
        "AUTHORIZATION_SERVERS": ["/o"],
        "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
        "SCOPES_SUPPORTED": ["mcp", "inventory:write"],
        "REQUIRED_SCOPES": ["mcp"],
        "RESOURCE_NAME": "mcp_tools demo shop",
    }

# --------------------------------------------------------------------------
# Internationalization, static files
# --------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

# --------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "simple": {"format": "{asctime} {levelname} {name}: {message}", "style": "{"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "simple"},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        # Django's own "django" handler would print each runserver access line
        # (django.channels.server) a second time, bare, beside the root's line.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "mcp_tools": {"handlers": ["console"], "level": os.environ.get("MCP_TOOLS_LOG_LEVEL", "INFO"), "propagate": False},
        "demo_site": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
