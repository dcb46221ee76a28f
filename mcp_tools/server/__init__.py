"""The server layer: what each MCP method does, independent of the transport.

* :mod:`.methods`: the method table of both protocol eras (:func:`dispatch`);
* :mod:`.core` and :mod:`.flavors`: calls of tools, prompts and resources, one
  module per wire flavor over one shared core;
* :mod:`.auth`, :mod:`.sessions`, :mod:`.tokens`: who is calling, 2025-11-25
  sessions, and the sealed tokens that name a suspended call;
* :mod:`.context`: :class:`RequestContext`, a request as the transports describe it.
"""

from __future__ import annotations

from .context import RequestContext
from .methods import dispatch, initialize_result

__all__ = ["RequestContext", "dispatch", "initialize_result"]
