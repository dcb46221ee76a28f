"""The wire layer: JSON-RPC envelopes, versions, header rules and wire flavors.

Nothing in this package imports ``django.db`` or ``channels``; it is unit-tested
without settings or a database.
"""
