"""A Celery broker that needs no server: kombu's filesystem transport, with atomic writes.

kombu's ``filesystem://`` transport creates a message file and then writes it,
so a consumer polling the folder can pick the file up while it is still empty
and fail on it (a worker that also sends, such as one with an embedded beat,
hits this within seconds). Here a message is written under a name the
consumer ignores and renamed into place, which is atomic on one filesystem.

Register the ``mcpfs`` scheme by importing this module in the Celery app
module (as ``demo_site/celery.py`` does), then use ``mcpfs://localhost//``
with kombu's filesystem transport options (``data_folder_in``/``out``,
``control_folder``). For one machine only; use Redis across machines.
"""

from __future__ import annotations

import os
import socket
import sys
import uuid
from time import monotonic
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.json import dumps

SCHEME = "mcpfs"


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]  # as kombu own filesystem.Channel
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".part"  # not "<queue>.msg": consumers skip it until it is complete
        with open(partial, "wb") as handle:
            handle.write(dumps(payload).encode())
        os.replace(partial, final)


#: How often a consumer waiting for messages looks whether the Celery worker it serves is stopping.
STOP_CHECK_SECONDS = 0.25


def _worker_stopping() -> bool:
    """Whether a Celery worker in this process has been told to stop (warm or cold shutdown).

    Read from ``celery.worker.state`` only if a worker imported it: a process that only sends
    messages (the web server) never stops this way. Its flags are None or False until set, and
    then an exit code, which may be 0: compared by identity, as Celery compares them.
    """
    state = sys.modules.get("celery.worker.state")
    if state is None:
        return False
    return any(flag is not None and flag is not False for flag in (state.should_stop, state.should_terminate))


class Transport(filesystem.Transport):
    Channel = Channel

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """kombu's polling wait for a message, which gives up (``socket.timeout``, as when the wait
        runs out) once the worker is stopping, and then takes no message.

        Celery's loop for a broker it polls (``synloop``) looks at its stop flag only between two
        waits of 2 s, and waits once more after seeing it: an idle worker took 4 s of its 7-9 s
        warm shutdown here (``scripts/demo``'s Ctrl-C). Waiting in slices of
        :data:`STOP_CHECK_SECONDS` keeps the folder's own polling interval.
        """
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - monotonic()
            if _worker_stopping() or (left is not None and left <= 0):
                raise socket.timeout()
            try:
                return super().drain_events(connection, timeout=STOP_CHECK_SECONDS if left is None else min(left, STOP_CHECK_SECONDS), **kwargs)
            except socket.timeout:
                continue


TRANSPORT_ALIASES.setdefault(SCHEME, f"{__name__}:Transport")
