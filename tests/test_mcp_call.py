"""``manage.py mcp_call`` and ``manage.py mcp_tools list|call``: tools called in process from a terminal.

The operator's typing is a ``StringIO`` passed as ``stdin``; what the command
prints (prompts included) is read back from ``stdout``.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.clients import create_user_with_token

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str, typed: str = "", **options: Any) -> str:
    """Run a command with ``typed`` as the operator's input; returns what it printed on stdout."""
    out = io.StringIO()
    call_command(*args, stdin=io.StringIO(typed), stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


@pytest.fixture
def users() -> None:
    """'clerk' may restock products (a model permission); 'visitor' may not."""
    create_user_with_token("clerk", ("inventory.change_product",))
    create_user_with_token("visitor")


@pytest.fixture
def product() -> None:
    from demo_site.inventory.models import Product

    Product.objects.create(sku="WID-001", name="Widget", price="2.50", stock=40)


def deploy_audits() -> list[dict[str, Any]]:
    from demo_site.inventory.models import AuditLog

    return [row.detail for row in AuditLog.objects.filter(action="deploy")]


def test_a_plain_tool_prints_its_text(users: None) -> None:
    assert run("mcp_call", "echo", "--arg", "text=hello there", "--user", "visitor").strip() == "hello there"


def test_arguments_are_typed_by_the_tool_schema(users: None, product: None) -> None:
    # quantity is an integer field: "5" is sent as 5, and the structured result is printed as JSON.
    printed = run("mcp_call", "restock", "--arg", "sku=WID-001", "--json-args", '{"quantity": 1}', "--arg", "quantity=5", "--user", "clerk")
    assert json.loads(printed)["stock"] == 45


def test_elicitation_is_answered_field_by_field(users: None) -> None:
    typed = "\n".join(["accept", "mars", "2", "", "yes, safe"]) + "\n"
    printed = run("mcp_call", "deploy", "--arg", "service=api", "--user", "visitor", typed=typed)
    # The form's fields were prompted with their description, choices and default.
    assert "Where should api be deployed?" in printed
    assert "Environment to deploy to; one of: staging, production; required" in printed
    assert "yes/no; default: yes" in printed
    # "mars" was refused and asked again; "2" picked the second choice; the model's reply was typed.
    assert "Not one of: staging, production" in printed
    assert "[user] Is deploying api to production safe?" in printed
    report = json.loads(printed[printed.index("{"):])
    assert report["env"] == "production" and report["verdict"] == "yes, safe"
    assert deploy_audits() == [{"service": "api", "env": "production", "verdict": "yes, safe"}]


def test_a_declined_elicitation_reaches_the_tool(users: None) -> None:
    with pytest.raises(CommandError, match="deploy failed: Deployment cancelled by the user"):
        run("mcp_tools", "call", "deploy", "--arg", "service=api", "--user", "visitor", typed="decline\n")
    assert deploy_audits() == []


def test_sampling_with_a_tool_call_typed_by_the_operator(users: None) -> None:
    typed = '/tool calculator {"expression": "17 * 3"}\nIt is 51.\n'
    printed = run("mcp_call", "ask_with_calculator", "--arg", "question=What is 17 times 3?", "--user", "visitor", typed=typed)
    assert "[user] What is 17 times 3?" in printed
    assert "calculator: Evaluate an arithmetic expression." in printed
    # The server ran the calculator for the "model" and sent back its result, then took the final answer.
    assert "(tool result operator-1: 51.0)" in printed
    assert printed.rstrip().endswith("It is 51.")


def test_list_shows_what_each_user_may_call(users: None) -> None:
    clerk = run("mcp_call", "--list", "--user", "clerk")
    visitor = run("mcp_tools", "list", "--user", "visitor")
    names = {line.split()[0] for line in visitor.splitlines()}
    assert {"echo", "deploy"} <= names and "restock" not in names
    assert "restock" in {line.split()[0] for line in clerk.splitlines()}
    assert any(line.startswith("echo") and "Return the text unchanged." in line for line in visitor.splitlines())


def test_a_tool_the_user_may_not_call_is_unknown_to_them(users: None, product: None) -> None:
    with pytest.raises(CommandError, match=r"Unknown tool: restock \(-32602\)"):
        run("mcp_call", "restock", "--arg", "sku=WID-001", "--arg", "quantity=1", "--user", "visitor")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mcp_call", "no_such_tool"], r"Unknown tool: no_such_tool \(-32602\)"),
        (["mcp_call", "restock", "--arg", "sku=WID-001", "--arg", "quantity=many"], r"restock failed: Invalid arguments .*\n- quantity: "),
        (["mcp_call", "echo", "--arg", "text"], "--arg takes KEY=VALUE, got 'text'"),
        (["mcp_call", "echo", "--json-args", "{text: 1}"], "--json-args is not valid JSON"),
        (["mcp_call", "echo", "--json-args", "[1]"], "--json-args must be a JSON object"),
        (["mcp_call", "echo", "--user", "nobody"], "No user named 'nobody'"),
        (["mcp_call"], "Name a tool to call, or pass --list"),
        (["mcp_tools"], "Use 'mcp_tools list' or 'mcp_tools call TOOL"),
    ],
)
def test_bad_input_is_a_command_error(users: None, product: None, args: list[str], message: str) -> None:
    if args[0] == "mcp_call" and "--user" not in args:
        args = [*args, "--user", "clerk"]
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_closed_stdin_fails_clearly_when_the_tool_asks(users: None) -> None:
    with pytest.raises(CommandError, match="stdin is closed"):
        run("mcp_call", "deploy", "--arg", "service=api", "--user", "visitor", typed="")
    with pytest.raises(CommandError, match=r"asked for input \(elicitation/create\) and --no-input was given"):
        run("mcp_call", "deploy", "--arg", "service=api", "--user", "visitor", "--no-input", typed="accept\n")
    assert deploy_audits() == []
