"""Which calls are tasks (``is_task``): the tasks methods list and reach those only, not every
background call. The column alone: 0011 marks the calls made before it, in a migration of its own
(and so a transaction of its own), once this one's ``ADD COLUMN`` and its lock are committed."""

from django.db import migrations, models


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
    ]
