"""Wire flavors: how each kind of client is asked for input and gets its answer.

Each module translates the engine's outcome (completed, needs input) into its
own messages and tokens, over the shared core in :mod:`mcp_tools.server.core`:

* :mod:`.session`: 2025-11-25 sessions, requests on the SSE stream;
* :mod:`.mrtr`: 2026-07-28 multi-round-trip requests (``InputRequiredResult``);
* :mod:`.saga`: re-entrant sagas of seed 000 (``tools/callSaga`` / ``tools/resumeSaga``).
"""
