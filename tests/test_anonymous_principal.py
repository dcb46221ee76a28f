"""The anonymous principals keep nothing between requests.

``ANONYMOUS`` is one object for the whole process (a session's anonymous principal lives as long
as the session is cached), and ``Principal`` keeps Django's permission answers on itself: an
answer, or anything else, kept on the shared principal would hold for every anonymous request
of the process from then on. Anonymous principals now answer without keeping anything, and
cannot be changed.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from mcp_tools.server.auth import ANONYMOUS, Principal, anonymous_from_secret, anonymous_principal

PERMS = ("inventory.change_product",)


class GrantEverything:
    """An authentication backend that grants every permission to anyone, anonymous callers too."""

    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return True


BACKENDS = [f"{__name__}.GrantEverything", "django.contrib.auth.backends.ModelBackend"]


def anonymous_principals() -> list[Principal]:
    return [ANONYMOUS, anonymous_principal("session:abc"),
            anonymous_from_secret({"x-mcp-client-secret": "a-client-secret-of-its-own"})]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["ANONYMOUS", "session", "client-secret"])
def test_asking_an_anonymous_principal_twice_leaves_nothing_behind(which: int) -> None:
    principal = anonymous_principals()[which]
    before = copy.copy(vars(principal))
    with override_settings(AUTHENTICATION_BACKENDS=BACKENDS):
        assert AnonymousUser().has_perms(PERMS)  # Django would grant it: the answer is the principal's own
        for _ in range(2):
            assert principal.has_perms(PERMS) is False
            assert principal.has_perms(["oauth-scope:mcp"]) is False
            assert principal.has_perms(()) is True
    assert vars(principal) == before
    assert not principal._answers
    # Nothing can be kept on it: no answer, no other user, no scopes.
    with pytest.raises(TypeError):
        principal._answers[frozenset(PERMS)] = True  # type: ignore[index]
    with pytest.raises(AttributeError):
        principal.user = object()
    with pytest.raises(AttributeError):
        principal.scopes = frozenset({"mcp"})
    with pytest.raises(AttributeError):
        del principal.id
    assert vars(principal) == before


def test_anonymous_principals_keep_their_ids_and_stay_anonymous() -> None:
    assert ANONYMOUS.id == "anonymous" and ANONYMOUS.is_anonymous and ANONYMOUS.scopes is None and ANONYMOUS.auth is None
    session = anonymous_principal("session:abc")
    assert session.id == "anonymous:session:abc" and session.is_anonymous
    assert session == anonymous_principal("session:abc") and session != ANONYMOUS
    long_binding = "session:" + "x" * 200  # fitted as every principal id is
    assert len(anonymous_principal(long_binding).id) == 128
