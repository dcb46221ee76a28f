"""The progress a task's ``tasks/result`` streams relayed, so the next one does not send it again."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_tools', '0009_call_retries'),
    ]

    operations = [
        migrations.AddField(
            model_name='toolcall',
            name='progress_relayed',
            field=models.FloatField(blank=True, null=True, verbose_name='progress relayed'),
        ),
    ]
