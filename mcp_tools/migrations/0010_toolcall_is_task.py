"""Which calls are tasks (``is_task``): the tasks methods list and reach those only, not every
background call. Calls made before it are marked from what their rows say."""

from typing import Any

from django.db import migrations, models

#: The 2026-07-28 tasks extension, as a client declares it in its capabilities.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
BATCH = 500


def mark_tasks(apps: Any, schema_editor: Any) -> None:
    """A 2025-11-25 task is the one flavor "task"; a 2026-07-28 task was recorded "mrtr", as every 2026 call:
    a background tools/call whose client declared the extension (the row does not say whether its tool
    forbade tasks, which would have held it or answered a resume token instead: such a call reads as a
    task; the console's ``modern_tasks`` asks the registry, which a migration may not)."""
    ToolCall = apps.get_model("mcp_tools", "ToolCall")
    calls = ToolCall.objects.using(schema_editor.connection.alias)
    calls.filter(flavor="task").update(is_task=True)
    # In Python: the capabilities are JSON text (no JSON lookups on PostgreSQL's json type).
    modern = calls.filter(flavor="mrtr", background=True, method="tools/call").values_list("id", "client_capabilities")
    ids = [call_id for call_id, capabilities in modern.iterator()
           if isinstance(capabilities, dict) and isinstance(capabilities.get("extensions"), dict)
           and TASKS_EXTENSION in capabilities["extensions"]]
    for start in range(0, len(ids), BATCH):
        calls.filter(id__in=ids[start:start + BATCH]).update(is_task=True)


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_tools', '0009_exact_text_keys_on_mysql'),
    ]

    operations = [
        migrations.AddField(
            model_name='toolcall',
            name='is_task',
            field=models.BooleanField(db_default=False, default=False, help_text='Created as an MCP task (2025-11-25 task-augmented tools/call, or the 2026-07-28 tasks extension): its id is the task id.', verbose_name='task'),
        ),
        migrations.RunPython(mark_tasks, migrations.RunPython.noop, elidable=True),
    ]
