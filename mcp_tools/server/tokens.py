"""Sealed tokens: ``requestState``, saga tokens, resume tokens.

A token is a reference to a ``ToolCall`` row plus the facts it is bound to
(principal, round, method and parameter digest), and a ``requestState`` may
carry a copy of the call's journal (:func:`mcp_tools.server.core.seal`); signed with Django's
``signing`` (HMAC-SHA256 keyed from ``MCP_TOOLS["SIGNING_KEYS"]`` or
``SECRET_KEY``, with ``SECRET_KEY_FALLBACKS`` for rotation) and time-stamped.
Every failure raises the same :class:`InvalidToken`; the reason is logged.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any, cast

import orjson

from django.conf import settings
from django.core import signing
from django.utils.crypto import salted_hmac
from django.utils.encoding import force_bytes

from ..conf import mcp_settings
from ..protocol import jsonrpc

logger = logging.getLogger("mcp_tools.tokens")


class InvalidToken(Exception):
    """The token is malformed, tampered with, expired, or bound to something else."""


def _keys() -> tuple[str, list[str]]:
    configured = mcp_settings.SIGNING_KEYS  # a list of non-empty strings, or ImproperlyConfigured (conf.ACCEPTS)
    if configured:
        keys = list(configured)
        return keys[0], keys[1:]
    return settings.SECRET_KEY, list(getattr(settings, "SECRET_KEY_FALLBACKS", []))


class _CompactJSON(signing.JSONSerializer):
    """``signing.JSONSerializer`` with one encoder for every token (same bytes, no encoder built per
    call), read by orjson where it reads the same values as json: not where an integer may pass
    64 bits (orjson rounds it to a float), nor what it refuses (NaN, lone surrogates)."""

    _encode = staticmethod(jsonrpc.json_encoder(ensure_ascii=True, separators=(",", ":"), default=None))

    def dumps(self, obj: Any) -> bytes:
        return self._encode(obj).encode("latin-1")

    def loads(self, data: bytes) -> Any:
        if not jsonrpc.may_hold_long_number(data):
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass
        return super().loads(data)


class _Signer(signing.TimestampSigner):
    """``TimestampSigner`` with each key's HMAC keyed once: the same signatures, bytes for bytes.

    Django's ``signature()`` derives the HMAC key (a hash of salt and secret) and
    keys a new HMAC for every token; here each key's HMAC is keyed once, by
    Django's own ``salted_hmac`` over an empty message, and copied per token, which
    is a third of sealing's cost. Everything else (separators, the timestamp,
    fallback keys, expiry, the default salt) is Django's.
    """

    def __init__(self, *, salt: str | None = None, **kwargs: Any) -> None:
        super().__init__(salt=salt or "django.core.signing.TimestampSigner", **kwargs)
        self._keyed: dict[str | bytes, Any] = {}

    def signature(self, value: str | bytes, key: str | bytes | None = None) -> str:
        key = key or self.key
        if not isinstance(key, (str, bytes)):  # an unhashable key type: Django's way, uncached
            return super().signature(value, key)
        keyed = self._keyed.get(key)
        if keyed is None:
            keyed = self._keyed[key] = salted_hmac(cast(str, self.salt) + "signer", b"", key, algorithm=self.algorithm)
        mac = keyed.copy()
        mac.update(force_bytes(value))
        return signing.b64_encode(mac.digest()).decode()


#: The longest token :func:`unseal` opens unless its purpose says otherwise: a ``requestState``,
#: saga, resume or tasks/list token holds ids and digests (a carried journal at most 2,048
#: characters), so anything longer is not one of them, refused before its signature is computed.
MAX_TOKEN_CHARS = 4096

_signers: dict[tuple[str, str, tuple[str, ...]], _Signer] = {}


def _signer(purpose: str) -> _Signer:
    """The signer of ``purpose`` tokens with the current keys (what ``signing.dumps``/``loads`` build per call)."""
    key, fallbacks = _keys()
    cache_key = (purpose, key, tuple(fallbacks))
    signer = _signers.get(cache_key)
    if signer is None:
        if len(_signers) > 64:  # keys rotated many times in one process (tests): start again
            _signers.clear()
        signer = _signers[cache_key] = _Signer(
            key=key, fallback_keys=list[str | bytes](fallbacks), salt=f"mcp_tools.{purpose}")
    return signer


_tag_keys: dict[str, Any] = {}
#: Tags made, by (key, principal id): a tag is a pure function of both, and every round of a call
#: needs its caller's (sealing the token, then opening it), an HMAC copied, fed and finished each time.
#: Bounded: emptied when full (it only saves work; nothing depends on what it holds).
_tags: dict[tuple[str, str], str] = {}
TAGS_KEPT = 1024


def _tag(principal_id: str, key: str) -> str:
    tag = _tags.get((key, principal_id))
    if tag is not None:
        return tag
    keyed = _tag_keys.get(key)
    if keyed is None:
        if len(_tag_keys) > 64:  # keys rotated many times in one process (tests): start again
            _tag_keys.clear()
        keyed = _tag_keys[key] = salted_hmac("mcp_tools.principal", b"", key)
    mac = keyed.copy()
    mac.update(principal_id.encode("utf-8", "surrogatepass"))
    tag = mac.hexdigest()[:32]
    if len(_tags) >= TAGS_KEPT:
        _tags.clear()
    _tags[(key, principal_id)] = tag
    return tag


def principal_tag(principal_id: str) -> str:
    """What a token holds of the caller it is bound to: a keyed digest of the principal's id, not the id.

    Tokens are signed, not encrypted: the client, its logs and the proxies between can read them.
    An anonymous 2025-11-25 caller's id holds its session id, which is its only credential, and a
    user's holds the database's key for the user (seed 002: a token exposes nothing of the server's).
    """
    return _tag(principal_id, _keys()[0])


def names_principal(tag: Any, principal_id: str) -> bool:
    """Whether a token's ``tag`` (:func:`principal_tag`) names ``principal_id``: under the current key or
    a fallback one (a token sealed before a key rotation), or as the id itself, which tokens sealed
    before tags held (they are refused after ``TOKEN_TTL`` anyway; no id is 32 hex digits)."""
    if not isinstance(tag, str):
        return False
    if tag == principal_id:
        return True
    key, fallbacks = _keys()
    return any(hmac.compare_digest(tag, _tag(principal_id, k)) for k in (key, *fallbacks))


def seal(purpose: str, payload: dict[str, Any]) -> str:
    # Not compressed: a token is ~150 bytes, and zlib cost more than it saved (older compressed tokens still open).
    return _signer(purpose).sign_object(payload, serializer=_CompactJSON)


def unseal(purpose: str, token: Any, *, max_age: float | None = None, max_chars: int = MAX_TOKEN_CHARS) -> dict[str, Any]:
    """The payload of a ``purpose`` token :func:`seal` made, at most ``max_age`` seconds ago
    (``TOKEN_TTL`` by default) and at most ``max_chars`` long; :class:`InvalidToken` otherwise.

    A purpose whose tokens carry values of the caller's data (a list cursor holds the last row's
    ordering value) passes a bound of its own."""
    if not isinstance(token, str) or not token or len(token) > max_chars:
        logger.info("Refused %s token: not a string of sane length", purpose)
        raise InvalidToken(purpose)
    try:
        payload = _signer(purpose).unsign_object(
            token, serializer=_CompactJSON, max_age=int(max_age if max_age is not None else mcp_settings.TOKEN_TTL))
    except signing.SignatureExpired:
        logger.info("Refused %s token: expired", purpose)
        raise InvalidToken(purpose) from None
    except (signing.BadSignature, ValueError, TypeError, UnicodeDecodeError) as exc:
        logger.info("Refused %s token: %s", purpose, type(exc).__name__)
        raise InvalidToken(purpose) from None
    if not isinstance(payload, dict):
        raise InvalidToken(purpose)
    return payload


def reseal(purpose: str, token: str) -> str:
    """``token``, a ``purpose`` token :func:`seal` made (the server's own, kept in a call's row), sealed
    again now: its expiry counts from when it is handed out, not from when it was kept. ``token``
    as it is when it does not open (another key since, tampered with)."""
    try:
        payload = _signer(purpose).unsign_object(token, serializer=_CompactJSON)
    except (signing.BadSignature, ValueError, TypeError, UnicodeDecodeError):
        return token
    return seal(purpose, payload) if isinstance(payload, dict) else token
