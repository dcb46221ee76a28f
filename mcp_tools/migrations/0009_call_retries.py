"""A background call's ``retry_on`` attempt count, kept on the row (docs/background.md, "How it runs")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_tools', '0008_background_recovery'),
    ]

    operations = [
        migrations.AddField(
            model_name='toolcall',
            name='retries',
            field=models.PositiveIntegerField(db_default=0, default=0, help_text="How many times the tool's retry_on exceptions had the call run again (at most its max_retries).", verbose_name='retries'),
        ),
    ]
