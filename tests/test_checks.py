"""System checks mcp_tools.E001-E011 and W001-W005: each fires on bad settings, none on good ones."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.core import checks
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.authentication import TokenAuthentication

from mcp_tools.checks import check_database, check_deployment, check_settings, sqlite_transaction_mode_problems
from mcp_tools.conf import ACCEPTS, DEFAULTS, mcp_settings, problem

GOOD_MCP_TOOLS: dict[str, Any] = {**settings.MCP_TOOLS, "ALLOW_ANONYMOUS": False}
GOOD_DEPLOYMENT: dict[str, Any] = {
    "MCP_TOOLS": GOOD_MCP_TOOLS,
    "SECRET_KEY": "k" * 64,
    "CHANNEL_LAYERS": {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["redis://localhost:6379/0"]}}},
    "DEBUG": False,
}


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def mcp(**overrides: Any) -> override_settings:
    """override_settings with MCP_TOOLS = the good settings plus ``overrides``."""
    return override_settings(MCP_TOOLS={**GOOD_MCP_TOOLS, **overrides})


# -- good settings -------------------------------------------------------------------------


def test_checks_silent_with_good_settings() -> None:
    with override_settings(**GOOD_DEPLOYMENT):
        assert check_settings(None) == []
        assert check_deployment(None) == []


def test_checks_silent_with_empty_mcp_tools() -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "MCP_TOOLS": {}}):
        assert check_settings(None) == []
        assert check_deployment(None) == []


def test_checks_are_registered_with_django() -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "MCP_TOOLS": {**GOOD_MCP_TOOLS, "SLOW_CALL_SECONDS": -1, "ALLOW_ANONYMOUS": True}}):
        everything = checks.run_checks(include_deployment_checks=True)
        without_deploy = checks.run_checks(include_deployment_checks=False)
    assert "mcp_tools.E005" in ids(everything)
    assert "mcp_tools.W004" in ids(everything)
    assert "mcp_tools.E005" in ids(without_deploy)
    assert "mcp_tools.W004" not in ids(without_deploy)


def test_checks_good_settings_give_no_mcp_tools_messages_through_run_checks() -> None:
    with override_settings(**GOOD_DEPLOYMENT):
        found = checks.run_checks(include_deployment_checks=True)
    assert [m for m in ids(found) if m.startswith("mcp_tools.")] == []


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["x", ["PATH"], 5], ids=["string", "list", "int"])
def test_check_e001_mcp_tools_not_a_dict(value: Any) -> None:
    with override_settings(MCP_TOOLS=value):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E001"]
    assert found[0].level == checks.ERROR


def test_check_e002_unknown_keys_are_named_with_a_hint() -> None:
    with mcp(PAGE_SIZES=5, ALLOW_ANONIMOUS=True):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E002"]
    assert "ALLOW_ANONIMOUS, PAGE_SIZES" in found[0].msg
    assert "PAGE_SIZE" in found[0].hint


@pytest.mark.parametrize("path", ["mcp", "/m cp", 5, None, ""], ids=["relative", "space", "int", "none", "empty"])
def test_check_e003_bad_path(path: Any) -> None:
    with mcp(PATH=path):
        assert ids(check_settings(None)) == ["mcp_tools.E003"]


def test_check_e003_good_paths() -> None:
    for path in ("/mcp", "/api/mcp/", "/"):
        with mcp(PATH=path):
            assert check_settings(None) == []


def test_check_e004_authentication_class_that_does_not_import() -> None:
    with mcp(AUTHENTICATION_CLASSES=["rest_framework.authentication.TokenAuthentication", "nowhere.Auth", "rest_framework.authentication.Nope"]):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E004", "mcp_tools.E004"]
    assert "nowhere.Auth" in found[0].msg
    assert "rest_framework.authentication.Nope" in found[1].msg


@pytest.mark.parametrize("value", ["rest_framework.authentication.SessionAuthentication", 5, [""], [None]],
                         ids=["string", "int", "empty-entry", "none-entry"])
def test_check_e004_authentication_classes_not_a_list(value: Any) -> None:
    """One dotted path given for the list made the check import it character by character (a ValueError
    for ".", not a message)."""
    with mcp(AUTHENTICATION_CLASSES=value):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E004"]
    assert "must be None or a list" in found[0].msg


def test_check_e004_a_path_that_is_no_module_path() -> None:
    with mcp(AUTHENTICATION_CLASSES=[".TokenAuthentication"]):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E004"]
    assert "'.TokenAuthentication'" in found[0].msg


def test_check_e004_silent_for_importable_classes() -> None:
    with mcp(AUTHENTICATION_CLASSES=["rest_framework.authentication.TokenAuthentication"]):
        assert check_settings(None) == []


@pytest.mark.parametrize("value", [-1, -0.5, "2", None, [1]], ids=["negative", "negative-float", "string", "none", "list"])
def test_check_e005_slow_call_seconds_must_be_a_non_negative_number(value: Any) -> None:
    with mcp(SLOW_CALL_SECONDS=value):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E005"]
    assert "SLOW_CALL_SECONDS" in found[0].msg


@pytest.mark.parametrize("value", [0, 0.25, 2, 30.0])
def test_check_e005_silent_for_non_negative_numbers(value: float) -> None:
    with mcp(SLOW_CALL_SECONDS=value):
        assert check_settings(None) == []


@pytest.mark.parametrize("value", [0, -1, "1d", True, float("inf"), float("nan")],
                         ids=["zero", "negative", "string", "bool", "inf", "nan"])
def test_check_e005_session_idle_seconds_must_be_positive_or_none(value: Any) -> None:
    """0 ended every 2025-11-25 session at its next request; None is how to keep sessions."""
    with mcp(SESSION_IDLE_SECONDS=value):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E005"]
    assert "'SESSION_IDLE_SECONDS'" in found[0].msg


@pytest.mark.parametrize("value", [None, 0.5, 60, 86400])
def test_check_e005_silent_for_a_positive_idle_limit_or_none(value: Any) -> None:
    with mcp(SESSION_IDLE_SECONDS=value):
        assert check_settings(None) == []


@pytest.mark.parametrize(
    "key", ["MAX_BODY_BYTES", "PAGE_SIZE", "TOKEN_TTL", "CALL_TTL", "EVENT_RETENTION", "SAMPLING_MAX_TOOLS", "SAMPLING_MAX_TOOL_CALLS"]
)
@pytest.mark.parametrize("value", [0, -1, True, "10", 1.5, None], ids=["zero", "negative", "bool", "string", "float", "none"])
def test_check_e006_positive_integers(key: str, value: Any) -> None:
    with mcp(**{key: value}):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E006"]
    assert repr(key) in found[0].msg


LONG_KEY = "k3Jd9-a-long-random-signing-key-given-as-a-string-not-a-list-0123456789"


@pytest.mark.parametrize("value", [LONG_KEY, LONG_KEY.encode(), ["s" * 64, ""], ["s" * 64, None], [b"s" * 64], 5],
                         ids=["string", "bytes", "empty-entry", "none-entry", "bytes-entry", "int"])
def test_check_e008_signing_keys_not_a_list_of_strings(value: Any) -> None:
    """A string given for the list signed every token with its first character (any token gave the key away)."""
    with mcp(SIGNING_KEYS=value):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E008"]
    assert "SIGNING_KEYS" in found[0].msg
    assert LONG_KEY not in found[0].msg and "s" * 64 not in found[0].msg  # the key never reaches a log


@pytest.mark.parametrize("value", [None, [], ["s" * 64], ("s" * 64, "old")])
def test_check_e008_silent_for_a_list_of_keys(value: Any) -> None:
    with mcp(SIGNING_KEYS=value):
        assert check_settings(None) == []


def test_check_w002_leaves_signing_keys_given_as_a_string_to_e008() -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "MCP_TOOLS": {**GOOD_MCP_TOOLS, "SIGNING_KEYS": LONG_KEY}}):
        assert check_deployment(None) == []


@pytest.mark.parametrize("value", ["https://app.example.com", 5, ["https://app.example.com/"], ["app.example.com"],
                                   ["https://user@app.example.com"], ["https://app.example.com:x"], ["https://"], [None]],
                         ids=["string", "int", "trailing-slash", "no-scheme", "userinfo", "bad-port", "no-host", "none-entry"])
def test_check_e009_allowed_origins_not_a_list_of_origins(value: Any) -> None:
    """One string matched every origin that was a substring of it; 5 made the check itself a TypeError."""
    with mcp(ALLOWED_ORIGINS=value):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E009"]
    assert "ALLOWED_ORIGINS" in found[0].msg


@pytest.mark.parametrize("value", [None, [], ("https://app.example.com", "http://localhost:8000", "http://[::1]:8000"),
                                   {"https://app.example.com"}, frozenset({"https://app.example.com"})])
def test_check_e009_silent_for_a_list_of_origins(value: Any) -> None:
    """Sets worked before the settings table (the endpoint only asks whether an origin is in it)."""
    with mcp(ALLOWED_ORIGINS=value):
        assert check_settings(None) == []


# -- every key: its type and range (conf.ACCEPTS) ---------------------------------------------

#: Values each key refuses, and the id that reports them: the plausible wrong types a review found
#: (a version as a number, durations as "30d" / "500ms", a flag as a string) and out-of-range numbers.
REFUSED: list[tuple[str, Any, str]] = [
    ("SERVER_NAME", "", "mcp_tools.E011"), ("SERVER_NAME", None, "mcp_tools.E011"),
    ("SERVER_TITLE", 5, "mcp_tools.E011"), ("SERVER_VERSION", 2, "mcp_tools.E011"), ("SERVER_VERSION", 1.5, "mcp_tools.E011"),
    ("INSTRUCTIONS", ["Be brief."], "mcp_tools.E011"), ("STDIO_USER", "", "mcp_tools.E011"), ("STDIO_USER", 1, "mcp_tools.E011"),
    ("ANONYMOUS_SECRET_HEADER", "X Client Secret", "mcp_tools.E011"), ("ANONYMOUS_SECRET_HEADER", "", "mcp_tools.E011"),
    ("ALLOW_ANONYMOUS", "False", "mcp_tools.E010"), ("RECORD_ALL_CALLS", 1, "mcp_tools.E010"),
    ("STORE_DRIVER_CURSOR", None, "mcp_tools.E010"), ("STORE_SQLITE_LANE", "yes", "mcp_tools.E010"),
    ("ENABLE_SAGAS", 0, "mcp_tools.E010"), ("AUTODISCOVER", "True", "mcp_tools.E010"),
    ("RETAIN_FINISHED_SECONDS", -1, "mcp_tools.E005"), ("RETAIN_FINISHED_SECONDS", 0, "mcp_tools.E005"),
    ("RETAIN_FINISHED_SECONDS", "30d", "mcp_tools.E005"),
    ("WORKER_LEASE_SECONDS", 0, "mcp_tools.E005"), ("WORKER_LEASE_SECONDS", -30, "mcp_tools.E005"),
    ("CANCEL_POLL_SECONDS", -1, "mcp_tools.E005"), ("CONVERGE_WAIT_SECONDS", "60s", "mcp_tools.E005"),
    ("TASK_RESULT_WAIT_SECONDS", None, "mcp_tools.E005"), ("STDIO_SHUTDOWN_GRACE_SECONDS", float("inf"), "mcp_tools.E005"),
    ("TASK_POLL_INTERVAL_MS", "500ms", "mcp_tools.E006"), ("TASK_POLL_INTERVAL_MS", 0, "mcp_tools.E006"),
    ("CACHE_TTL_MS", "60s", "mcp_tools.E006"), ("CACHE_TTL_MS", -1, "mcp_tools.E006"), ("CACHE_TTL_MS", 1.5, "mcp_tools.E006"),
    ("TASK_MAX_TTL_MS", 999, "mcp_tools.E006"), ("TASK_MAX_TTL_MS", "1d", "mcp_tools.E006"),
    # Found by an operations review: past some 2,000 years a time computed from now overflows Python's
    # dates, and mcp_cleanup and every call that makes a row failed with OverflowError.
    ("CALL_TTL", 10**12, "mcp_tools.E006"), ("TOKEN_TTL", 10**12, "mcp_tools.E006"),
    ("SESSION_IDLE_SECONDS", 1e12, "mcp_tools.E005"), ("CANCEL_POLL_SECONDS", 1e12, "mcp_tools.E005"),
    ("RETAIN_FINISHED_SECONDS", 4e9, "mcp_tools.E005"), ("TASK_MAX_TTL_MS", 10**15, "mcp_tools.E006"),
    # Found by a review of operations: what a SQL LIMIT or OFFSET cannot take passed, then every tasks/list
    # (PAGE_SIZE) or each 50th event of a stream (EVENT_RETENTION) was an internal error; a PATH with a query
    # part was never reached (a request's path holds none).
    ("PAGE_SIZE", 2**63 - 1, "mcp_tools.E006"), ("EVENT_RETENTION", 2**64, "mcp_tools.E006"),
    ("PATH", "/api/mcp?v=1", "mcp_tools.E003"), ("PATH", "/api/mcp#x", "mcp_tools.E003"),
    # Found by the stdio review: a trailing newline (a path read from a file or an environment variable)
    # passed, and the endpoint was not served at the path meant (404).
    ("PATH", "/mcp\n", "mcp_tools.E003"), ("PATH", "/mcp\t", "mcp_tools.E003"), ("PATH", "/mcp\x00", "mcp_tools.E003"),
]

#: Values at the edges of what each key accepts (0 where docs/settings.md gives 0 a meaning, None where None has one).
ACCEPTED: list[tuple[str, Any]] = [
    ("SERVER_VERSION", "2.0.1"), ("SERVER_TITLE", None), ("INSTRUCTIONS", ""), ("STDIO_USER", None), ("STDIO_USER", "ops"),
    ("ANONYMOUS_SECRET_HEADER", None), ("ANONYMOUS_SECRET_HEADER", "X-Client-Secret"),
    ("ALLOW_ANONYMOUS", True), ("AUTODISCOVER", False), ("RETAIN_FINISHED_SECONDS", None), ("RETAIN_FINISHED_SECONDS", 0.5),
    ("WORKER_LEASE_SECONDS", 0.6), ("CANCEL_POLL_SECONDS", 0), ("CONVERGE_WAIT_SECONDS", 0), ("TASK_RESULT_WAIT_SECONDS", 0),
    ("STDIO_SHUTDOWN_GRACE_SECONDS", 0), ("SESSION_CACHE_SECONDS", 0), ("CACHE_TTL_MS", 0), ("TASK_POLL_INTERVAL_MS", 1),
    ("TASK_MAX_TTL_MS", 1000), ("CALL_TTL", 100 * 365 * 24 * 3600), ("SESSION_IDLE_SECONDS", 100 * 365 * 24 * 3600.0),
    ("PAGE_SIZE", 2**31 - 1), ("EVENT_RETENTION", 2**31 - 1),
    ("MAX_BODY_BYTES", 3 * 1024**3),  # no SQL takes it: the bound above refused it (a review of that fix)
]


@pytest.mark.parametrize(("key", "value", "check_id"), REFUSED, ids=[f"{key}={value!r}" for key, value, _ in REFUSED])
def test_check_refuses_a_value_of_the_wrong_type_or_range(key: str, value: Any, check_id: str) -> None:
    with mcp(**{key: value}):
        found = check_settings(None)
        with pytest.raises(ImproperlyConfigured, match=re.escape(f"MCP_TOOLS[{key!r}] must be")):
            getattr(mcp_settings, key)  # and where it is read, rather than a failure further on
    assert ids(found) == [check_id]
    assert repr(key) in found[0].msg


@pytest.mark.parametrize(("key", "value"), ACCEPTED, ids=[f"{key}={value!r}" for key, value in ACCEPTED])
def test_check_accepts_values_at_the_edge_of_the_range(key: str, value: Any) -> None:
    with mcp(**{key: value}):
        assert check_settings(None) == []
        assert getattr(mcp_settings, key) == value


def test_every_key_has_a_test_its_default_passes() -> None:
    assert set(ACCEPTS) == set(DEFAULTS)
    assert {key: problem(key, value) for key, value in DEFAULTS.items() if problem(key, value)} == {}


def test_check_e007_channels_not_installed() -> None:
    apps_without_channels = [app for app in settings.INSTALLED_APPS if app != "channels"]
    with override_settings(INSTALLED_APPS=apps_without_channels):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E007"]
    assert "channels" in found[0].msg


def test_check_e007_takes_channels_listed_by_its_app_config() -> None:
    """Django lets an app be listed by its AppConfig's path: "channels.apps.ChannelsConfig" installs
    channels as "channels" does. E007 looked for the string "channels" in INSTALLED_APPS, so such a
    project got the error (which stops runserver and migrate) with channels installed (docs review)."""
    by_app_config = ["channels.apps.ChannelsConfig" if app == "channels" else app for app in settings.INSTALLED_APPS]
    with override_settings(INSTALLED_APPS=by_app_config):
        assert "mcp_tools.E007" not in ids(check_settings(None))


class OwnTokens(TokenAuthentication):
    """Token authentication on a model of the site's own, not DRF's ``Token``."""

    model = Group


TOKENS = "rest_framework.authentication.TokenAuthentication"


@pytest.mark.parametrize(("configured", "source"), [
    ([TOKENS, "rest_framework.authentication.SessionAuthentication"], "MCP_TOOLS['AUTHENTICATION_CLASSES']"),
    (None, "REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']"),  # DRF's defaults: the demo lists TokenAuthentication
], ids=["mcp-tools", "drf-defaults"])
def test_check_e004_token_authentication_without_the_authtoken_app(configured: list[str] | None, source: str) -> None:
    """Without ``rest_framework.authtoken`` DRF's Token model is abstract: ``check`` passed and every MCP
    request with a token was a 500 (``Token`` has no ``DoesNotExist``)."""
    without_authtoken = [app for app in settings.INSTALLED_APPS if app != "rest_framework.authtoken"]
    with mcp(AUTHENTICATION_CLASSES=configured), override_settings(INSTALLED_APPS=without_authtoken):
        found = check_settings(None)
    assert ids(found) == ["mcp_tools.E004"]
    assert found[0].msg.startswith(f"{source} lists {TOKENS}") and "'rest_framework.authtoken'" in found[0].hint


def test_check_e004_silent_for_token_authentication_on_a_model_of_its_own() -> None:
    without_authtoken = [app for app in settings.INSTALLED_APPS if app != "rest_framework.authtoken"]
    with mcp(AUTHENTICATION_CLASSES=[f"{__name__}.OwnTokens"]), override_settings(INSTALLED_APPS=without_authtoken):
        assert check_settings(None) == []
    with mcp(AUTHENTICATION_CLASSES=[TOKENS]):
        assert check_settings(None) == []  # the authtoken app installed


def test_check_errors_accumulate() -> None:
    with mcp(PATH="x", SLOW_CALL_SECONDS="x", PAGE_SIZE=0, BOGUS=1):
        assert ids(check_settings(None)) == ["mcp_tools.E002", "mcp_tools.E003", "mcp_tools.E005", "mcp_tools.E006"]


# -- warnings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [["https://app.example", "*"], ("*",), {"https://app.example", "*"}, frozenset({"*"}), "*"],
                         ids=["in-a-list", "in-a-tuple", "in-a-set", "in-a-frozenset", "bare-string"])
def test_check_w001_wildcard_allowed_origin(value: Any) -> None:
    """The bare "*" is the documented shorthand for ["*"]: it was E009, whose message itself
    offered "*" ('... or "*", not '*''), and every request then a 500. A set holding "*" lets any
    origin in as a list does, but gave no W001."""
    with mcp(ALLOWED_ORIGINS=value):
        found = check_settings(None)
        assert "*" in mcp_settings.ALLOWED_ORIGINS and not isinstance(mcp_settings.ALLOWED_ORIGINS, str)
    assert ids(found) == ["mcp_tools.W001"]
    assert found[0].level == checks.WARNING


def test_check_w001_silent_for_listed_origins() -> None:
    with mcp(ALLOWED_ORIGINS=["https://app.example"]):
        assert check_settings(None) == []


@pytest.mark.parametrize("secret", ["short", "x" * 49, "django-insecure-" + "x" * 60], ids=["short", "49-chars", "django-insecure"])
def test_check_w002_weak_secret_key(secret: str) -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "SECRET_KEY": secret}):
        assert ids(check_deployment(None)) == ["mcp_tools.W002"]


def test_check_w002_weak_signing_key_wins_over_strong_secret_key() -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "MCP_TOOLS": {**GOOD_MCP_TOOLS, "SIGNING_KEYS": ["weak"]}}):
        assert ids(check_deployment(None)) == ["mcp_tools.W002"]


def test_check_w002_strong_signing_key_covers_weak_secret_key() -> None:
    settings_ = {**GOOD_DEPLOYMENT, "SECRET_KEY": "django-insecure-x", "MCP_TOOLS": {**GOOD_MCP_TOOLS, "SIGNING_KEYS": ["s" * 64, "o" * 64]}}
    with override_settings(**settings_):
        assert check_deployment(None) == []


@pytest.mark.parametrize("old", ["old", "django-insecure-" + "x" * 60], ids=["short", "django-insecure"])
def test_check_w002_weak_opening_key(old: str) -> None:
    """Every SIGNING_KEYS entry opens tokens: a weak or public old key lets anyone forge one, whatever seals them."""
    settings_ = {**GOOD_DEPLOYMENT, "MCP_TOOLS": {**GOOD_MCP_TOOLS, "SIGNING_KEYS": ["s" * 64, "o" * 64, old]}}
    with override_settings(**settings_):
        found = check_deployment(None)
    assert ids(found) == ["mcp_tools.W002"]
    assert "opens" in found[0].msg and "SIGNING_KEYS'][2]" in found[0].msg, found[0].msg


@pytest.mark.parametrize(
    "layers",
    [{"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}, {}, {"default": {}}],
    ids=["in-memory", "none", "no-backend"],
)
def test_check_w003_in_memory_or_missing_channel_layer(layers: dict[str, Any]) -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "CHANNEL_LAYERS": layers}):
        assert ids(check_deployment(None)) == ["mcp_tools.W003"]


def test_check_w004_anonymous_in_production() -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "MCP_TOOLS": {**GOOD_MCP_TOOLS, "ALLOW_ANONYMOUS": True}}):
        assert ids(check_deployment(None)) == ["mcp_tools.W004"]


def test_check_w004_silent_when_debugging() -> None:
    with override_settings(**{**GOOD_DEPLOYMENT, "DEBUG": True, "MCP_TOOLS": {**GOOD_MCP_TOOLS, "ALLOW_ANONYMOUS": True}}):
        assert check_deployment(None) == []


def test_check_tests_settings_warn_as_expected() -> None:
    """The suite's own settings (anonymous callers, DEBUG off; in-memory layer without Redis) warn, nothing worse."""
    assert check_settings(None) == []
    in_memory = settings.CHANNEL_LAYERS["default"]["BACKEND"].endswith("InMemoryChannelLayer")
    assert ids(check_deployment(None)) == (["mcp_tools.W003"] if in_memory else []) + ["mcp_tools.W004"]


# -- W005: SQLite writers must take the lock at BEGIN ------------------------------------------


SQLITE = {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}


@pytest.mark.parametrize("options", [None, {}, {"transaction_mode": "DEFERRED"}, {"transaction_mode": None}])
def test_w005_sqlite_with_deferred_transactions(options: dict[str, Any] | None) -> None:
    messages = sqlite_transaction_mode_problems("default", {**SQLITE, "OPTIONS": options})
    assert ids(messages) == ["mcp_tools.W005"]
    assert "transaction_mode" in messages[0].hint


@pytest.mark.parametrize("mode", ["IMMEDIATE", "EXCLUSIVE", "immediate"])
def test_w005_silent_when_sqlite_takes_the_lock_at_begin(mode: str) -> None:
    assert sqlite_transaction_mode_problems("default", {**SQLITE, "OPTIONS": {"transaction_mode": mode}}) == []


@pytest.mark.parametrize("options", [{}, {"transaction_mode": "DEFERRED"}])
def test_w005_sqlite_by_a_backend_of_another_name(options: dict[str, Any]) -> None:
    """A SQLite backend whose module is not named ``sqlite3`` (GeoDjango's SpatiaLite, a project's own
    subclass) is SQLite all the same: W005 looked at the ENGINE's name alone and said nothing (docs review)."""
    messages = sqlite_transaction_mode_problems("default", {**SQLITE, "ENGINE": "tests.own_sqlite_backend", "OPTIONS": options})
    assert ids(messages) == ["mcp_tools.W005"]
    assert sqlite_transaction_mode_problems(
        "default", {**SQLITE, "ENGINE": "tests.own_sqlite_backend", "OPTIONS": {"transaction_mode": "IMMEDIATE"}}) == []


def test_w005_silent_on_postgresql() -> None:
    assert sqlite_transaction_mode_problems("default", {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}}) == []


def test_the_configured_database_passes_the_check() -> None:
    # The demo's SQLite sets IMMEDIATE; PostgreSQL (CI's second run) needs nothing.
    assert check_database(None) == []


# -- W006: permissions no installed app defines ------------------------------------------------


def test_w006_a_tool_resource_or_prompt_requiring_an_undefined_permission() -> None:
    from mcp_tools.checks import check_registered_permissions
    from mcp_tools.registry import Prompt, Resource, make_tool, registry

    def tool_fn() -> str:
        return "x"

    def read() -> str:
        return "x"

    tool = make_tool(tool_fn, name="w006.tool", permissions=["shop.view_order", "shop.launch_order"], scopes=["orders:read"])
    scoped_only = make_tool(tool_fn, name="w006.scoped", scopes=["orders:write"])
    fixed = Resource(uri="w006://fixed", uri_template=None, name="fixed", title=None, description=None, mime_type=None,
                     fn=read, is_async=False, permissions=("inventory.view_product",), completions={})
    template = Resource(uri=None, uri_template="w006://t/{id}", name="t", title=None, description=None, mime_type=None,
                        fn=read, is_async=False, permissions=("invetnory.view_product",), completions={})
    prompt = Prompt(name="w006.prompt", title=None, description=None, fn=read, is_async=False, arguments=[],
                    permissions=("is_staff",), completions={})
    assert check_registered_permissions(None) == []  # the demo's tools ask for permissions that exist
    with registry.registered_temporarily(tool, scoped_only, fixed, template, prompt):
        found = check_registered_permissions(None)
        assert "mcp_tools.W006" in ids(checks.run_checks())
    assert {(m.id, m.level) for m in found} == {("mcp_tools.W006", checks.WARNING)}
    # The unknown ones only: not the defined permissions, and not the OAuth scopes.
    assert [m.msg.split(" which ")[0] for m in found] == [
        "Tool 'w006.tool' requires permission 'shop.launch_order',",
        "Resource template 'w006://t/{id}' requires permission 'invetnory.view_product',",
        "Prompt 'w006.prompt' requires permission 'is_staff',",
    ]


def test_w006_leaves_model_tools_to_e033() -> None:
    from demo_site.shop.models import Order
    from mcp_tools.checks import check_registered_permissions
    from mcp_tools.modeltools import register_model_action, unregister_model_action

    action = register_model_action(Order, "cancel", name="w006.cancel", permissions=["shop.launch_order"])
    try:
        assert check_registered_permissions(None) == []
        assert "mcp_tools.E033" in ids(checks.run_checks())
    finally:
        unregister_model_action(action)


# -- E021: a broker whose transport cannot be loaded -------------------------------------------

REDIS_BROKER = "redis://:hunter2@localhost:6379/0"


def test_e021_silent_for_brokers_whose_transport_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery import current_app

    from mcp_tools.checks import check_background_broker

    assert check_background_broker(None) == []  # the demo's mcpfs://
    monkeypatch.setattr(current_app.conf, "broker_url", REDIS_BROKER)
    assert check_background_broker(None) == []  # redis is installed here; the check connects to nothing


@pytest.mark.parametrize("where", ["import", "transport"])
def test_e021_a_redis_broker_without_the_redis_library(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """docs/background.md's redis:// broker without ``redis`` installed: ``check`` passed, the worker crashed at
    start and every background call stayed unqueued. Kombu finds the library missing where its version does:
    importing the transport's module (an AttributeError on ``None``), or making the transport (an ImportError)."""
    import sys

    import kombu.transport
    import kombu.transport.redis
    from celery import current_app

    from mcp_tools.checks import check_background_broker

    monkeypatch.setattr(current_app.conf, "broker_url", REDIS_BROKER)
    monkeypatch.setattr(kombu.transport, "_transport_cache", {})  # as in a fresh process: nothing resolved yet
    if where == "import":
        monkeypatch.setitem(sys.modules, "redis", None)  # not installed: "import redis" raises ImportError
        monkeypatch.delitem(sys.modules, "kombu.transport.redis")  # imported again, without it
    else:
        monkeypatch.setattr(kombu.transport.redis, "redis", None)
    [error] = check_background_broker(None)
    assert (error.id, error.level) == ("mcp_tools.E021", checks.ERROR)
    assert "'redis' transport" in error.msg and "hunter2" not in error.msg + error.hint
    assert "pip install redis" in error.hint
    assert "mcp_tools.E021" in ids(checks.run_checks())


def test_e021_a_broker_scheme_no_module_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery import current_app

    from mcp_tools.checks import check_background_broker

    monkeypatch.setattr(current_app.conf, "broker_url", "mcpfx://localhost//")
    [error] = check_background_broker(None)
    assert error.id == "mcp_tools.E021" and "'mcpfx'" in error.msg and "Register the scheme" in error.hint


# -- the endpoint mounted without the app ------------------------------------------------------


@pytest.mark.parametrize("mount", ["mcp_asgi_app", "http_urlpatterns", "include"])
def test_mounting_the_endpoint_without_the_app_installed_says_to_install_it(monkeypatch: pytest.MonkeyPatch, mount: str) -> None:
    """Without "mcp_tools" in INSTALLED_APPS its checks do not run: ``check`` passed and every MCP request
    was a 500 (``ToolCall`` "doesn't declare an explicit app_label"). Mounting it now fails, saying why."""
    import importlib
    import sys

    from mcp_tools import routing

    without_app = [app for app in settings.INSTALLED_APPS if app != "mcp_tools"]
    monkeypatch.delitem(sys.modules, "mcp_tools.urls", raising=False)  # include("mcp_tools.urls") imports it afresh
    async def django_app(scope: Any, receive: Any, send: Any) -> None: ...

    build = {"mcp_asgi_app": lambda: routing.mcp_asgi_app(django_app), "http_urlpatterns": routing.http_urlpatterns,
             "include": lambda: importlib.import_module("mcp_tools.urls")}[mount]
    with override_settings(INSTALLED_APPS=without_app), pytest.raises(ImproperlyConfigured, match="add 'mcp_tools' to INSTALLED_APPS"):
        build()
    assert build()  # installed: mounts as before


@pytest.mark.parametrize("value", ["False", 0, None])
def test_an_autodiscover_that_is_no_flag_is_reported_by_the_check_not_raised_at_set_up(value: Any) -> None:
    """Found by the stdio review: ``MCP_TOOLS["AUTODISCOVER"] = "False"`` ended ``django.setup()`` (the app's
    ready()) with an ImproperlyConfigured traceback, so ``manage.py check`` never reported its E010 and
    every command (``mcp_stdio`` included) failed the same way. Such a value discovers nothing; the check
    (which every management command runs first) says why."""
    from django.apps import apps

    from mcp_tools.registry import registry

    before = {tool.name for tool in registry.tools}
    with mcp(AUTODISCOVER=value):
        apps.get_app_config("mcp_tools").ready()  # what django.setup() runs
        assert ids(checks.run_checks()).count("mcp_tools.E010") == 1
    assert {tool.name for tool in registry.tools} == before


@pytest.mark.parametrize("verifier", [".Verifier", ".oauth.Verifier"])
def test_a_token_verifier_path_with_an_empty_module_name_is_reported_not_raised(verifier: str) -> None:
    """Found by the stdio review: ``OAUTH["TOKEN_VERIFIER"] = ".Verifier"`` made import_string raise
    ValueError ("Empty module name"), which the check did not catch: ``manage.py check``, and every
    command that runs the checks first (``mcp_stdio`` among them), ended with its traceback."""
    from mcp_tools.checks import check_oauth

    oauth = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": verifier, "RESOURCE": "https://shop.example/mcp"}
    with mcp(OAUTH=oauth):
        assert ids(check_oauth()) == ["mcp_tools.E042"]


@pytest.mark.parametrize("path", [".Auth", ".authentication.Auth"])
def test_an_authentication_class_path_starting_with_a_dot_is_reported_not_raised(path: str) -> None:
    """Found by the stdio review: ``".authentication.Auth"`` made import_string raise TypeError (a
    relative import without a package), which E004 did not catch: ``manage.py check`` ended with it."""
    with mcp(AUTHENTICATION_CLASSES=[path]):
        assert ids(check_settings(None)) == ["mcp_tools.E004"]


@pytest.mark.parametrize(("key", "value", "check_id"), [
    ("RESOURCE", "https://shop.example/mcp\n", "mcp_tools.E043"),
    ("AUTHORIZATION_SERVERS", ["https://auth.example\n"], "mcp_tools.E041"),
])
def test_an_oauth_url_with_a_trailing_newline_is_refused(key: str, value: Any, check_id: str) -> None:
    """Found by the stdio review: a URL read from a file or an environment variable with its newline
    passed E041 / E043, and the metadata document then named ``"https://shop.example/mcp\\n"`` as the
    resource, which no client called (RFC 9728 3.3: clients refuse such metadata)."""
    from mcp_tools.checks import check_oauth

    oauth = {"AUTHORIZATION_SERVERS": ["/o"], "TOKEN_VERIFIER": "mcp_tools.contrib.oauth_toolkit.OAuthToolkitVerifier",
             "RESOURCE": "https://shop.example/mcp", key: value}
    with mcp(OAUTH=oauth):
        assert ids(check_oauth()) == [check_id]
