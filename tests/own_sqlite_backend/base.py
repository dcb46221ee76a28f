"""Django's SQLite backend under another module name: what a project's backend that subclasses it looks like."""

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    """SQLite, as Django's own (its ``vendor`` is ``"sqlite"``)."""
