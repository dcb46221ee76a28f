"""The models and the migrations agree (no migration is missing)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from mcp_tools import ToolContext


@pytest.mark.django_db
def test_makemigrations_check_finds_no_changes() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits 1 when a migration is missing
        pytest.fail(f"makemigrations --check found model changes without a migration (exit {exc.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
def test_makemigrations_check_mcp_tools_app_alone() -> None:
    out = StringIO()
    call_command("makemigrations", "mcp_tools", "--check", "--dry-run", stdout=out, stderr=out)
    assert "No changes detected in app 'mcp_tools'" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_reversing_0006_refuses_to_cut_a_long_request_id() -> None:
    """0006 widened request_id from varchar(128) to text; going back, PostgreSQL cut a longer id
    silently (the call then answered under another id). The reverse now refuses while such a call
    exists, and goes through once it is gone. (SQLite keeps any length: nothing to refuse there.)"""
    from django.db import connection
    from django.db.migrations.exceptions import IrreversibleError
    from django.utils import timezone

    from mcp_tools.models import ToolCall

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL cuts text cast to varchar(128); SQLite keeps it")
    latest = [name for app, name in _leaf_nodes() if app == "mcp_tools"][0]
    ToolCall.objects.create(tool_name="t", principal="anonymous", flavor="mrtr", params_digest="0" * 64,
                            request_id="r" * 129, status="completed", expires_at=timezone.now())
    try:
        with pytest.raises(IrreversibleError, match="1 call\\(s\\) have a request id longer than 128"):
            call_command("migrate", "mcp_tools", "0005", verbosity=0)
        # The refused reverse unapplied the migrations after 0006 (their columns are gone): a plain
        # DELETE, not the ORM's, which names every column of today's model.
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(ToolCall._meta.db_table)}")
        call_command("migrate", "mcp_tools", "0005", verbosity=0)
    finally:
        call_command("migrate", "mcp_tools", latest, verbosity=0)


def _leaf_nodes() -> list[tuple[str, str]]:
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    return MigrationLoader(connection).graph.leaf_nodes()


@pytest.mark.django_db(transaction=True)
def test_0011_marks_the_tasks_made_before_is_task() -> None:
    """0010 adds ``is_task`` (the tasks methods list and reach only tasks), 0011 marks the calls made
    before it as what they were. A 2025-11-25 task (flavor "task") and a 2026-07-28 background call of a
    tool that supports tasks, whose client declared the tasks extension, are tasks; a held or resumed
    background call, a plain call, the deferred call of a tool that forbids tasks (held on its stream)
    and a call of a tool no longer registered are not (as ``console.queries.modern_tasks`` reads them)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    from mcp_tools.registry import make_tool, registry

    latest = [name for app, name in _leaf_nodes() if app == "mcp_tools"][0]
    before = ("mcp_tools", "0010_toolcall_is_task")
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        calls = executor.loader.project_state(before).apps.get_model("mcp_tools", "ToolCall").objects
        extension = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        made = {
            "legacy task": ("t", "task", True, {}),
            "modern task": ("mig_task_tool", "mrtr", True, extension),
            "modern resumed": ("mig_task_tool", "mrtr", True, {"experimental": {"resumeTokens": {}}}),
            "held in a session": ("mig_task_tool", "session", True, {}),
            "plain modern call": ("mig_task_tool", "mrtr", False, extension),
            "forbidden tool's deferred call": ("mig_held_tool", "mrtr", True, extension),
            "unregistered tool's call": ("mig_gone_tool", "mrtr", True, extension),
        }
        ids = {what: str(calls.create(tool_name=tool, principal="user:1", flavor=flavor, background=background, params_digest="0" * 64,
                                      client_capabilities=capabilities, expires_at=timezone.now()).id)
               for what, (tool, flavor, background, capabilities) in made.items()}
        with registry.registered_temporarily(make_tool(_deferring, name="mig_task_tool", background=True),
                                             make_tool(_deferring, name="mig_held_tool", background=True, task_support="forbidden")):
            MigrationExecutor(connection).migrate([("mcp_tools", latest)])
        from mcp_tools.models import ToolCall

        marked = {what for what, call_id in ids.items() if ToolCall.objects.get(id=call_id).is_task}
        assert marked == {"legacy task", "modern task"}, marked
    finally:
        MigrationExecutor(connection).migrate([("mcp_tools", latest)])


async def _deferring(ctx: ToolContext) -> str:
    """The tools of the calls the backfill reads (it reads their task support, never runs them)."""
    await ctx.defer()
    return "done"
