"""The JSON columns keep their text as written: ``json``, not ``jsonb``, on PostgreSQL.

``jsonb`` reorders object keys and rewrites numbers (``1e20`` reads back as an integer,
``-0.0`` as ``0.0``), so a durable call replayed from its journal saw other values than its
first run (docs/durable-calls.md). Only PostgreSQL's column types change (``USING col::json``
keeps what the rows hold); elsewhere the columns are the same text JSON as before, so the
field class changes in the migration state only and no table is rebuilt.
"""

from django.db import migrations

import mcp_tools.models

#: (model, table field) of every JSON column.
JSON_COLUMNS = [
    ("toolcall", "arguments"), ("toolcall", "client_capabilities"), ("toolcall", "scopes"), ("toolcall", "result"),
    ("toolcall", "error"), ("toolcall", "last_outcome"),
    ("callstep", "request"), ("callstep", "response"), ("callstep", "error"),
    ("mcpsession", "client_info"), ("mcpsession", "client_capabilities"),
]


def _retype(to_type: str):  # type: ignore[no-untyped-def]
    def retype(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor != "postgresql":
            return
        quote = schema_editor.quote_name
        for model_name, field_name in JSON_COLUMNS:
            model = apps.get_model("mcp_tools", model_name)
            column = quote(model._meta.get_field(field_name).column)
            schema_editor.execute(
                f"ALTER TABLE {quote(model._meta.db_table)} ALTER COLUMN {column} TYPE {to_type} USING {column}::{to_type}"
            )

    return retype


class Migration(migrations.Migration):

    dependencies = [
        ("mcp_tools", "0006_call_request_id_scopes_retried_as"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='callstep',
                    name='error',
                    field=mcp_tools.models.ExactJSONField(blank=True, null=True, verbose_name='error'),
                ),
                migrations.AlterField(
                    model_name='callstep',
                    name='request',
                    field=mcp_tools.models.ExactJSONField(blank=True, null=True, verbose_name='request'),
                ),
                migrations.AlterField(
                    model_name='callstep',
                    name='response',
                    field=mcp_tools.models.ExactJSONField(blank=True, null=True, verbose_name='response'),
                ),
                migrations.AlterField(
                    model_name='mcpsession',
                    name='client_capabilities',
                    field=mcp_tools.models.ExactJSONField(blank=True, default=dict, verbose_name='client capabilities'),
                ),
                migrations.AlterField(
                    model_name='mcpsession',
                    name='client_info',
                    field=mcp_tools.models.ExactJSONField(blank=True, default=dict, verbose_name='client info'),
                ),
                migrations.AlterField(
                    model_name='toolcall',
                    name='arguments',
                    field=mcp_tools.models.ExactJSONField(default=dict, help_text='Arguments as sent by the client.', verbose_name='arguments'),
                ),
                migrations.AlterField(
                    model_name='toolcall',
                    name='client_capabilities',
                    field=mcp_tools.models.ExactJSONField(blank=True, default=dict, verbose_name='client capabilities'),
                ),
                migrations.AlterField(
                    model_name='toolcall',
                    name='error',
                    field=mcp_tools.models.ExactJSONField(blank=True, help_text='The JSON-RPC error, if the call failed with one.', null=True, verbose_name='error'),
                ),
                migrations.AlterField(
                    model_name='toolcall',
                    name='last_outcome',
                    field=mcp_tools.models.ExactJSONField(blank=True, help_text='Wire answer of the latest round, repeated to identical retries.', null=True, verbose_name='last outcome'),
                ),
                migrations.AlterField(
                    model_name='toolcall',
                    name='result',
                    field=mcp_tools.models.ExactJSONField(blank=True, help_text='The final result (CallToolResult etc.).', null=True, verbose_name='result'),
                ),
                migrations.AlterField(
                    model_name='toolcall',
                    name='scopes',
                    field=mcp_tools.models.ExactJSONField(blank=True, null=True, verbose_name='token scopes'),
                ),
            ],
            database_operations=[migrations.RunPython(_retype("json"), _retype("jsonb"))],
        ),
    ]
