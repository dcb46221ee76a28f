"""PostgreSQL for the test suite: Django's backend, whose flush deletes rows instead of truncating tables.

Every transactional test ends with Django's flush of every table. On PostgreSQL that is one ``TRUNCATE``
of the project's 31 tables, which gives each table new files and syncs them at commit: 0.5 to 2 s a test
on CI's shared disk, with the tables all but empty (two thirds of the PostgreSQL run's time). Deleting the
few rows a test left costs a millisecond or two. Nothing else differs: the tests run against the same
server, schema, driver and SQL as a site does; only the cleanup between tests is cheaper.
"""
from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(self, style: Any, tables: Any, *, reset_sequences: bool = False, allow_cascade: bool = False) -> list[str]:
        if not tables or reset_sequences or allow_cascade:  # what only TRUNCATE ... RESTART IDENTITY / CASCADE does
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        # Django's foreign keys are DEFERRABLE INITIALLY DEFERRED, so the tables may be emptied in any order
        # inside the flush's transaction (execute_sql_flush runs in one).
        return ["SET CONSTRAINTS ALL DEFERRED;"] + [
            f"{style.SQL_KEYWORD('DELETE')} {style.SQL_KEYWORD('FROM')} {style.SQL_FIELD(self.quote_name(table))};"
            for table in tables
        ]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
