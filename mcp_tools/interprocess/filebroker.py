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


class Transport(filesystem.Transport):
    Channel = Channel


TRANSPORT_ALIASES.setdefault(SCHEME, f"{__name__}:Transport")
