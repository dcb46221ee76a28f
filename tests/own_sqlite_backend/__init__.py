"""A project's own SQLite database backend (``ENGINE = "tests.own_sqlite_backend"``), as GeoDjango's SpatiaLite one is."""
