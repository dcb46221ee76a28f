"""Marks ``is_task`` on the calls made before 0010 added it, from what their rows say.

Apart from 0010: an ``ADD COLUMN`` takes PostgreSQL's ACCESS EXCLUSIVE lock on the calls table until
its transaction commits, and Django runs each migration in one transaction; a backfill in the same
migration would keep every read and write of the calls blocked for as long as it runs. Here the
column is committed first, and the backfill is two ``UPDATE`` statements run by the database (no
row is read into Python), which lock the rows they change only.
"""

from typing import Any

from django.db import migrations

#: The 2026-07-28 tasks extension, as a client declares it in its capabilities.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def mark_tasks(apps: Any, schema_editor: Any) -> None:
    """A 2025-11-25 task is the one flavor "task". A 2026-07-28 task was recorded "mrtr", as every 2026
    call: the rule of ``console.queries.modern_tasks`` tells it apart, a background ``tools/call`` whose
    client declared the extension, of a registered tool that does not forbid tasks (a forbidden one's
    ``ctx.defer()`` held the call on its stream; the registry is filled by the apps' ``ready()``, before
    ``migrate`` runs). The rule is spelled out here, not imported: a migration keeps meaning what it
    meant when it was written, whatever that function becomes."""
    from mcp_tools.registry import registry

    ToolCall = apps.get_model("mcp_tools", "ToolCall")
    calls = ToolCall.objects.using(schema_editor.connection.alias).filter(is_task=False)
    calls.filter(flavor="task").update(is_task=True)
    task_tools = [tool.name for tool in registry.tools if tool.task_support != "forbidden"]
    if task_tools:
        calls.filter(flavor="mrtr", background=True, method="tools/call", tool_name__in=task_tools,
                     client_capabilities__extensions__has_key=TASKS_EXTENSION).update(is_task=True)


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_tools', '0010_toolcall_is_task'),
    ]

    operations = [
        migrations.RunPython(mark_tasks, migrations.RunPython.noop, elidable=True),
    ]
