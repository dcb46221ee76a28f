"""The store: the one boundary between coroutines and the ORM.

Only this package (and the model managers it calls) touches the ORM for calls,
journals, sessions and the SSE event log. :mod:`.calls` and :mod:`.sessions`
hold the synchronous functions, for code that already runs in a thread (the
admin, management commands, Celery workers). This module exposes each of them
once more as a coroutine function, run in the store's own database thread with
Django's connection rules kept (:mod:`.hop`), so coroutines write
``await store.load_call(call_id)``.
"""

from __future__ import annotations

from django.db.models.query import QuerySet, RawQuerySet

from ..managers import CallNotLive
from .calls import OnceFailedElsewhere
from . import calls as sync_calls, sessions as sync_sessions
from .hop import (
    DATABASE_UNAVAILABLE, alive_blocking, close_old_thread_connections, close_store_thread_connections, close_thread_connections, database_unreachable,
    db, db_alive, handing_over, longest_conn_max_age,
)
from .lane import close_lanes, in_lane

#: What a handler may return that reads rows when iterated: the ORM's lazy types, named here for the
#: layers above, which touch no ORM (server.core reads them on a thread, as part of the handler's run).
LAZY_ROWS: tuple[type, ...] = (QuerySet, RawQuerySet)

__all__ = [
    "LAZY_ROWS", "CallNotLive", "DATABASE_UNAVAILABLE", "OnceFailedElsewhere", "advance", "take_over_round", "touch_live", "tasks_of", "commit_round", "claim_for_worker", "renew_lease", "renew_lease_blocking", "answer_step", "append_event", "append_response_event", "call_for_stream", "call_progress_token", "call_request_id", "client_cancelled_request", "CLIENT_CANCELLED", "call_tool_name", "last_progress_on_stream", "session_calls", "live_session_call", "call_status", "claim_round",
    "close_connections", "close_old_thread_connections", "close_thread_connections", "create_call", "database_unreachable", "create_session", "db", "db_alive", "handing_over", "in_lane", "delete_session", "events_after", "payloads_through", "last_event_of_stream", "get_session", "load_call", "longest_conn_max_age", "touch_session",
    "record_once", "check_once", "record_failed_once", "run_once", "save_round", "set_session_log_level", "stream_of_event", "subscribe",
    "subscribers", "subscriptions_updated_since", "active_users_of", "sync_calls", "sync_sessions", "unsubscribe", "end_call", "expire_overdue", "record_progress", "record_progress_relayed", "set_stream",
]



async def close_connections() -> None:
    """Close the store's database connections: the loop's SQLite lanes and the store thread's
    (tests before dropping their database; shutdown)."""
    close_lanes()
    await close_store_thread_connections()


# -- calls and their journals --------------------------------------------------
# What runs nothing but the store's own statements goes in the event loop's SQLite lane where
# it can (:mod:`.lane`); the rest, and the lane's fallback, in the store's thread (:mod:`.hop`),
# but for the writes that say a call's runner is alive: they must not wait behind a ctx.once
# effect that the store's thread runs meanwhile (:func:`.hop.db_alive`).
load_call = in_lane(sync_calls.load_call)
create_call = in_lane(sync_calls.create_call)
save_round = in_lane(sync_calls.save_round)
advance = in_lane(sync_calls.advance)
commit_round = in_lane(sync_calls.commit_round)
claim_round = db(sync_calls.claim_round)
answer_step = db(sync_calls.answer_step)
run_once = db(sync_calls.run_once)
record_once = in_lane(sync_calls.record_once)
check_once = in_lane(sync_calls.check_once)
record_failed_once = db(sync_calls.record_failed_once)  # the failure path: the error's str() is user code
end_call = db(sync_calls.end_call)
record_progress = in_lane(sync_calls.record_progress)
record_progress_relayed = db(sync_calls.record_progress_relayed)
set_stream = db(sync_calls.set_stream)
call_status = in_lane(sync_calls.call_status)
call_request_id = db(sync_calls.call_request_id)
call_progress_token = db(sync_calls.call_progress_token)
call_tool_name = db(sync_calls.call_tool_name)
session_calls = db(sync_calls.session_calls)
live_session_call = db(sync_calls.live_session_call)
call_for_stream = db(sync_calls.call_for_stream)
claim_for_worker = db(sync_calls.claim_for_worker)
renew_lease = db_alive(sync_calls.renew_lease)
#: :func:`renew_lease` for a plain thread (a worker's lease keeper), waiting for the write.
renew_lease_blocking = alive_blocking(sync_calls.renew_lease)
tasks_of = db(sync_calls.tasks_of)
touch_live = db_alive(sync_calls.touch_live)
client_cancelled_request = db_alive(sync_calls.client_cancelled_request)
CLIENT_CANCELLED = sync_calls.CLIENT_CANCELLED
take_over_round = db(sync_calls.take_over_round)
expire_overdue = db(sync_calls.expire_overdue)

# -- 2025-11-25 sessions, subscriptions, SSE event log ---------------------------
create_session = db(sync_sessions.create_session)
get_session = db(sync_sessions.get_session)
delete_session = db(sync_sessions.delete_session)
touch_session = db(sync_sessions.touch_session)
set_session_log_level = db(sync_sessions.set_session_log_level)
subscribe = db(sync_sessions.subscribe)
unsubscribe = db(sync_sessions.unsubscribe)
subscribers = db(sync_sessions.subscribers)
subscriptions_updated_since = db(sync_sessions.subscriptions_updated_since)
active_users_of = db(sync_sessions.active_users_of)
append_event = db(sync_sessions.append_event)
append_response_event = db(sync_sessions.append_response_event)
events_after = db(sync_sessions.events_after)
payloads_through = db(sync_sessions.payloads_through)
last_event_of_stream = db(sync_sessions.last_event_of_stream)
stream_of_event = db(sync_sessions.stream_of_event)
last_progress_on_stream = db(sync_sessions.last_progress_on_stream)
