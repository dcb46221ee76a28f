"""``manage.py mcp_call`` is the only client of the call it makes: when it stops while the tool
waits for input (``--no-input``, a closed stdin, Ctrl-C), it ends that call (cancelled) instead of
leaving the row ``input_required`` (shown waiting in the admin) until ``CALL_TTL`` expires it."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)


class InterruptedStdin(io.StringIO):
    """The operator presses Ctrl-C at the prompt."""

    def readline(self, *args: Any) -> str:
        raise KeyboardInterrupt


def deploy_calls() -> list[tuple[str, str]]:
    from mcp_tools.models import ToolCall

    return [(c.status, c.status_message) for c in ToolCall.objects.filter(tool_name="deploy")]


@pytest.mark.parametrize(("how", "stdin", "raises"), [
    ("--no-input", io.StringIO("accept\n"), CommandError),
    ("stdin closed", io.StringIO(""), CommandError),
    ("Ctrl-C", InterruptedStdin(), CommandError),  # exit status 130, no traceback
])
def test_a_call_given_up_while_it_waits_for_input_is_cancelled(how: str, stdin: io.StringIO, raises: type[BaseException]) -> None:
    create_user_with_token("visitor")
    extra = ["--no-input"] if how == "--no-input" else []
    with pytest.raises(raises):
        call_command("mcp_call", "deploy", "--arg", "service=api", "--user", "visitor", *extra,
                     stdin=stdin, stdout=io.StringIO(), stderr=io.StringIO())
    [(status, message)] = deploy_calls()
    assert status == "cancelled"
    assert "mcp_call stopped while the tool waited for input" in message


def test_a_call_answered_to_its_end_is_left_as_it_ended() -> None:
    create_user_with_token("visitor")
    typed = "\n".join(["accept", "mars", "2", "", "yes, safe"]) + "\n"
    call_command("mcp_call", "deploy", "--arg", "service=api", "--user", "visitor",
                 stdin=io.StringIO(typed), stdout=io.StringIO(), stderr=io.StringIO())
    assert [status for status, _ in deploy_calls()] == ["completed"]
