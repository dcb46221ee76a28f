"""The operator's console in the Django admin: the dashboard, its live updates, and the queries behind them.

- :mod:`.queries`: every read the changelist, detail page and dashboard make, each
  a bounded number of queries whatever the number of rows.
- :mod:`.views`: the dashboard page, its JSON polling endpoint, and the detail
  page's action buttons (mounted by ``ToolCallAdmin.get_urls``).
- :mod:`.consumers`: the WebSocket consumer that pushes the dashboard when calls change.
- :mod:`.retention`: deleting finished calls past ``RETAIN_FINISHED_SECONDS``.
"""
