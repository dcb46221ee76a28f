"""Background calls that lose their worker or their broker message, and their ``retry_on`` attempt count
(docs/background.md, "How it runs"); the progressToken a resumed stream or a task reports progress under,
and the progress a task's ``tasks/result`` streams relayed, so the next one does not send it again."""

from django.db import migrations, models

import mcp_tools.models


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_tools', '0007_exact_json_columns'),
    ]

    operations = [
        migrations.AddField(
            model_name='toolcall',
            name='progress_token',
            field=mcp_tools.models.ExactJSONField(blank=True, null=True, verbose_name='progress token'),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='queued_until',
            field=models.DateTimeField(blank=True, help_text='A queued call that no worker took by then is queued again (its broker message may have been lost).', null=True, verbose_name='queued until'),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='lost_workers',
            field=models.PositiveIntegerField(db_default=0, default=0, help_text="How many times a worker running the call was lost (its lease ran out): past the tool's bound, the call fails.", verbose_name='lost workers'),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='requeues',
            field=models.PositiveIntegerField(db_default=0, default=0, help_text='How many times the sweep queued the call again (its worker or its message was lost).', verbose_name='queued again'),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='retries',
            field=models.PositiveIntegerField(db_default=0, default=0, help_text="How many times the tool's retry_on exceptions had the call run again (at most its max_retries).", verbose_name='retries'),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='progress_relayed',
            field=models.FloatField(blank=True, null=True, verbose_name='progress relayed'),
        ),
    ]
