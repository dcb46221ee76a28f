"""Signals about tool calls, for a project's own audit or metrics.

Each is sent with ``sender=ToolCall`` and the keyword arguments ``call_id``,
``tool_name``, ``status``, ``principal`` and ``flavor``, after the row's change
has been committed::

    from django.dispatch import receiver
    from mcp_tools.signals import tool_call_failed

    @receiver(tool_call_failed)
    def count_failure(sender, *, tool_name, **kwargs):
        metrics.increment("mcp.failed", tags={"tool": tool_name})

- ``tool_call_started``: the call got its row. Fast calls never get one (unless
  ``RECORD_ALL_CALLS``), and so send no signal at all.
- ``tool_call_suspended``: the call waits for the client's input.
- ``tool_call_finished``: the call completed with a result.
- ``tool_call_failed``: the call ended with an error result.

Open admin dashboards hear of every change whether or not a signal has receivers
(:func:`mcp_tools.interprocess.events.call_changed`); a signal without receivers costs nothing.

Cancellation and expiry are operator or deadline decisions; the admin records
them in its ``LogEntry`` history.

Signals are sent from the server's event loop with ``Signal.asend_robust``:
async receivers are awaited there, sync receivers run in a thread (they may use
the ORM). A receiver that raises is logged and does not fail the call.
"""

from __future__ import annotations

from .interprocess.events import tool_call_failed, tool_call_finished, tool_call_started, tool_call_suspended

__all__ = ["tool_call_failed", "tool_call_finished", "tool_call_started", "tool_call_suspended"]
