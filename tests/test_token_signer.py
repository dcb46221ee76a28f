"""The token signer is Django's ``TimestampSigner`` with each key's HMAC keyed once: same bytes, same rules."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core import signing

from mcp_tools.server import tokens
from mcp_tools.server.tokens import _CompactJSON, _Signer

KEYS = ["django-insecure-demo-key", "ünïcode-kéy", b"bytes-key-\x00\xff"]
VALUES = ["", "a", "eyJjIjoiMSJ9:1tF8xY", "ünïcode value", "x" * 5000]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", VALUES)
def test_signatures_are_djangos_byte_for_byte(key: str | bytes, value: str) -> None:
    for salt in ("mcp_tools.request", "mcp_tools.saga", "mcp_tools.resume"):
        assert _Signer(key=key, salt=salt).signature(value) == signing.TimestampSigner(key=key, salt=salt).signature(value)


def test_the_default_salt_is_djangos() -> None:
    assert _Signer(key="k").signature("v") == signing.TimestampSigner(key="k").signature("v")


def test_tokens_open_both_ways_with_djangos_signer() -> None:
    payload = {"c": "0f8b6a3e", "r": 2, "j": [[0, "elicit", "confirm", "d", {"method": "elicitation/create"}, "pending", None, None]]}
    ours, djangos = _Signer(key="k", salt="mcp_tools.request"), signing.TimestampSigner(key="k", salt="mcp_tools.request")
    with mock.patch("django.core.signing.time.time", return_value=1_790_000_000):
        token = ours.sign_object(payload, serializer=_CompactJSON)
        assert token == djangos.sign_object(payload, serializer=_CompactJSON)
    assert djangos.unsign_object(token, max_age=None) == payload
    assert ours.unsign_object(djangos.sign_object(payload), max_age=None) == payload


def test_a_token_of_a_rotated_key_opens_with_the_fallback_and_no_other() -> None:
    old = signing.TimestampSigner(key="old", salt="mcp_tools.request").sign_object({"c": "1"})
    assert _Signer(key="new", fallback_keys=["old"], salt="mcp_tools.request").unsign_object(old) == {"c": "1"}
    with pytest.raises(signing.BadSignature):
        _Signer(key="new", salt="mcp_tools.request").unsign_object(old)
    with pytest.raises(signing.BadSignature):
        _Signer(key="old", salt="mcp_tools.saga").unsign_object(old)  # another purpose's token


def test_a_tampered_or_expired_token_is_refused(settings: object) -> None:
    token = tokens.seal("request", {"c": "1", "r": 1})
    head, stamp, signature = token.rsplit(":", 2)
    forged = signing.b64_encode(b'{"c":"2","r":1}').decode()
    other_last = "A" if signature[-1] != "A" else "B"  # a signature that ends in "A" stays itself with "A"
    for bad in (f"{forged}:{stamp}:{signature}", f"{head}:{stamp}:{signature[:-1]}{other_last}", token[:-1], token + "x"):
        with pytest.raises(tokens.InvalidToken):
            tokens.unseal("request", bad)
    with mock.patch("django.core.signing.time.time", return_value=signing.b62_decode(stamp) + 10_000):
        with pytest.raises(tokens.InvalidToken):
            tokens.unseal("request", token, max_age=60)
    assert tokens.unseal("request", token) == {"c": "1", "r": 1}


def test_tokens_read_by_orjson_give_what_djangos_serializer_gives() -> None:
    payload = {"c": "ünï", "r": 2, "n": None, "f": 1.5, "l": [True, {"k": "\u2028"}],
               "big": [2**70 + 1, -(2**63) - 1, 10**20 + 1, 2**63 - 1], "id": "12345678901234567890"}
    data = _CompactJSON().dumps(payload)
    read = _CompactJSON().loads(data)
    assert read == signing.JSONSerializer().loads(data) == payload
    assert all(type(n) is int for n in read["big"]), "orjson rounds an integer past 64 bits to a float"
    token = tokens.seal("request", payload)
    assert tokens.unseal("request", token) == payload


def test_tokens_are_written_as_djangos_serializer_writes_them() -> None:
    payload = {"c": "0f8b6a3e", "n": [10**30, 2.5, -1], "t": "ünïcode \ud800", "j": [[0, None, True, {}]]}
    assert _CompactJSON().dumps(payload) == signing.JSONSerializer().dumps(payload)
    with pytest.raises(TypeError):
        _CompactJSON().dumps({"x": object()})


@pytest.mark.parametrize("value", ["k3Jd9-a-long-random-signing-key-given-as-a-string-0123456789", ["k" * 64, ""]],
                         ids=["string", "empty-entry"])
def test_signing_keys_that_are_no_list_of_keys_seal_nothing(value: object) -> None:
    """SIGNING_KEYS given as one string sealed every token with its first character, and every other
    character opened tokens too: sealing and opening now refuse it, naming the setting, not the key."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "SIGNING_KEYS": value}):
        for use in (lambda: tokens.seal("resume", {"p": "x"}), lambda: tokens.unseal("resume", "a:b:c")):
            with pytest.raises(ImproperlyConfigured, match=r"MCP_TOOLS\['SIGNING_KEYS'\] must be None or a list") as raised:
                use()
            assert "k3Jd9" not in str(raised.value) and "k" * 64 not in str(raised.value)
