"""2025-11-25 sessions, resource subscriptions and the SSE event log in the ORM (sync)."""

from __future__ import annotations

import secrets
from typing import Any

from ..conf import mcp_settings


def create_session(protocol_version: str, client_info: dict[str, Any], capabilities: dict[str, Any], principal: str) -> str:
    from ..models import McpSession

    session_id = secrets.token_urlsafe(24)
    McpSession.objects.create(
        id=session_id, protocol_version=protocol_version, client_info=client_info,
        client_capabilities=capabilities, principal=principal,
    )
    return session_id


def get_session(session_id: str) -> Any:
    from ..models import McpSession

    return McpSession.objects.filter(id=session_id).first()


def delete_session(session_id: str) -> bool:
    from ..models import McpSession, StreamEvent

    deleted, _ = McpSession.objects.filter(id=session_id).delete()
    StreamEvent.objects.filter(session_id=session_id).delete()
    return bool(deleted)


def set_session_log_level(session_id: str, level: str) -> None:
    from ..models import McpSession

    McpSession.objects.filter(id=session_id).update(log_level=level)


def subscribe(session_id: str, uri: str) -> None:
    from ..models import ResourceSubscription

    ResourceSubscription.objects.get_or_create(session_id=session_id, uri=uri)


def unsubscribe(session_id: str, uri: str) -> None:
    from ..models import ResourceSubscription

    ResourceSubscription.objects.filter(session_id=session_id, uri=uri).delete()


def subscribers(uri: str) -> list[str]:
    from ..models import ResourceSubscription

    return list(ResourceSubscription.objects.filter(uri=uri).values_list("session_id", flat=True))


# -- SSE event log -------------------------------------------------------------

def append_event(session_id: str, stream_id: str, payload: str) -> int:
    from ..models import StreamEvent

    return StreamEvent.objects.append(session_id, stream_id, payload, mcp_settings.EVENT_RETENTION)


def events_after(stream_id: str, last_id: int) -> list[tuple[int, str]]:
    from ..models import StreamEvent

    return [(e.id, e.payload) for e in StreamEvent.objects.after(stream_id, last_id, mcp_settings.EVENT_RETENTION)]


def stream_of_event(event_id: int) -> tuple[str, str] | None:
    from ..models import StreamEvent

    return StreamEvent.objects.filter(id=event_id).values_list("session_id", "stream_id").first()
