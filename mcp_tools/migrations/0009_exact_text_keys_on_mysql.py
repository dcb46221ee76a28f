"""On MySQL/MariaDB, the text columns the store looks rows up by, or keeps unique, compare exactly.

MySQL and MariaDB compare text by the column's collation, and their defaults
(``utf8mb4_general_ci``, ``utf8mb4_0900_ai_ci``) ignore case and accents, and a PAD SPACE one
trailing spaces: a step ``"audit"`` clashed with ``"Audit"`` in the journal's unique index, a
subscription to ``…/report`` was one to ``…/Report``, ``tasks/list`` listed another principal's
tasks whose name differed in case, and a session or stream id found another one's. This gives
those columns the binary collation of their character set that also counts trailing spaces
(MariaDB's ``<charset>_nopad_bin``, MySQL 8's ``utf8mb4_0900_bin``; else ``<charset>_bin``).

SQLite and PostgreSQL compare them exactly already: there this does nothing, and the models'
state is unchanged (a field's ``db_collation`` names one database's collation for all of them).
A later migration that alters one of these fields on MySQL/MariaDB must give it its collation
again (``MODIFY`` takes the table's default); ``tests/test_store_text_keys.py`` checks them.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

#: The model's fields whose columns the store filters on by equality or keeps unique. The foreign keys
#: to ``McpSession.id`` (``ResourceSubscription.session``) take its collation too, as MySQL requires.
KEY_FIELDS = {
    "toolcall": ("principal", "session_id", "request_id", "stream_id", "celery_task_id", "worker"),
    "callstep": ("key",),
    "mcpsession": ("id", "principal"),
    "resourcesubscription": ("uri", "session"),
    "streamevent": ("session_id", "stream_id"),
}


def _rows(schema_editor: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _exact_collation(schema_editor: Any, charset: str) -> str:
    """The binary collation of ``charset`` that does not ignore trailing spaces, where the server has one."""
    candidates = [f"{charset}_nopad_bin", f"{charset}_0900_bin", f"{charset}_bin"]
    found = {name for (name,) in _rows(
        schema_editor, "SELECT collation_name FROM information_schema.collations WHERE collation_name IN (%s, %s, %s)", candidates)}
    return next(name for name in candidates if name in found)


def _collate(apps: Any, schema_editor: Any, exact: bool) -> None:
    """``MODIFY`` each key column with its type, NULL-ness and the exact collation (``exact``) or none:
    the table's default, which Django created it with. The foreign keys between these columns are
    dropped first and made again after (MySQL refuses to change one side of a foreign key alone)."""
    if schema_editor.connection.vendor != "mysql":
        return
    q = schema_editor.quote_name
    connection = schema_editor.connection
    columns: dict[str, list[Any]] = {}
    for model_name, names in KEY_FIELDS.items():
        model = apps.get_model("mcp_tools", model_name)
        columns[model._meta.db_table] = [model._meta.get_field(name) for name in names]
    foreign_keys = [
        (table, name, column, target_table, target_column) for table, name, column, target_table, target_column in _rows(
            schema_editor,
            "SELECT table_name, constraint_name, column_name, referenced_table_name, referenced_column_name "
            "FROM information_schema.key_column_usage WHERE table_schema = DATABASE() AND referenced_table_name IS NOT NULL",
            [])
        if (table, column) in {(t, f.column) for t, fields in columns.items() for f in fields}
    ]
    for table, name, *_ in foreign_keys:
        schema_editor.execute(f"ALTER TABLE {q(table)} DROP FOREIGN KEY {q(name)}")
    for table, fields in columns.items():
        changes = []
        for field in fields:
            (charset,) = _rows(schema_editor, "SELECT character_set_name FROM information_schema.columns "
                               "WHERE table_schema = DATABASE() AND table_name = %s AND column_name = %s", [table, field.column])[0]
            db_type = field.db_type(connection) if field.remote_field is None else field.target_field.rel_db_type(connection)
            collation = f" COLLATE {_exact_collation(schema_editor, charset)}" if exact else ""
            changes.append(f"MODIFY {q(field.column)} {db_type}{collation} {'NULL' if field.null else 'NOT NULL'}")
        schema_editor.execute(f"ALTER TABLE {q(table)} {', '.join(changes)}")
    for table, name, column, target_table, target_column in foreign_keys:
        schema_editor.execute(f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(name)} FOREIGN KEY ({q(column)}) "
                              f"REFERENCES {q(target_table)} ({q(target_column)})")


def exact_keys(apps: Any, schema_editor: Any) -> None:
    _collate(apps, schema_editor, exact=True)


def default_collation(apps: Any, schema_editor: Any) -> None:
    _collate(apps, schema_editor, exact=False)


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_tools', '0008_background_recovery'),
    ]

    operations = [
        # Not atomic: MySQL/MariaDB commit each ALTER TABLE (Django refuses DDL inside a transaction there).
        migrations.RunPython(exact_keys, default_collation, atomic=False, elidable=False),
    ]
