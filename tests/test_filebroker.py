"""The broker that needs no server (``mcpfs://``, mcp_tools/interprocess/filebroker.py): a worker that
is told to stop takes no more messages and stops waiting for them, so its warm shutdown is not held
by the polling loop (``scripts/demo``'s Ctrl-C)."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from celery.worker import state
from kombu import Connection, Consumer, Exchange, Producer, Queue

import mcp_tools.interprocess.filebroker  # noqa: F401  (registers mcpfs://)



@pytest.fixture
def queue() -> Queue:
    """A queue of its own per test: kombu keeps what its virtual transports declared for the process."""
    name = f"jobs-{uuid.uuid4().hex}"
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


@pytest.fixture
def connection(tmp_path: Path, queue: Queue) -> Any:
    folder = tmp_path / "broker"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "control_folder": str(tmp_path / "control"),
               "polling_interval": 0.01}
    with Connection("mcpfs://localhost//", transport_options=options) as conn:
        Producer(conn.channel()).publish({"job": 1}, exchange=queue.exchange, routing_key=queue.routing_key, declare=[queue])
        yield conn


def consume(conn: Any, queue: Queue, received: list[Any]) -> Consumer:
    return Consumer(conn.channel(), queues=[queue], callbacks=[lambda body, message: (received.append(body), message.ack())])


def test_a_waiting_worker_takes_its_message(connection: Any, queue: Queue) -> None:
    received: list[Any] = []
    with consume(connection, queue, received):
        connection.drain_events(timeout=5)
    assert received == [{"job": 1}]


@pytest.mark.parametrize("flag", ["should_stop", "should_terminate"])
def test_a_stopping_worker_takes_no_message_and_stops_waiting(connection: Any, queue: Queue, monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    """The flag Celery's signal handlers set is an exit code, 0 for a normal stop: set, all the same.
    Without the check the message was taken (and the wait went on, in 2 s polls, until Celery's loop
    looked at the flag itself)."""
    received: list[Any] = []
    monkeypatch.setattr(state, flag, 0)
    with consume(connection, queue, received):
        with pytest.raises(socket.timeout):
            connection.drain_events(timeout=5)
        assert received == []
        monkeypatch.setattr(state, flag, None)  # a worker that was not stopping after all takes it
        connection.drain_events(timeout=5)
    assert received == [{"job": 1}]
