"""For the two-connection race tests: wait until another connection of this database waits for a row lock."""
from __future__ import annotations

import time

from django.db import connection, connections


def another_connection_waits(table: str) -> bool:
    """Whether another connection waits for a lock now (PostgreSQL), or runs a statement on ``table``
    (MariaDB: its innodb_trx did not list these waits as LOCK WAIT here; its process list shows them)."""
    with connections["default"].cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
        else:
            cursor.execute(
                "SELECT count(*) FROM information_schema.processlist"
                " WHERE command = 'Query' AND id <> CONNECTION_ID() AND info LIKE %s",
                [f"%{table}%"],
            )
        return bool(cursor.fetchone()[0])


def wait_until_another_connection_waits(table: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not another_connection_waits(table):
        assert time.monotonic() < deadline, "the other connection never reached the row"
        time.sleep(0.01)
