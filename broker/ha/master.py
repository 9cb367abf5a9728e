"""The master's HA server: a thin asyncio shell around `master_conn.MasterConnection`.

One `asyncio.start_server` on the HA host/port (port 0 binds a free one; `address` is what was
bound). Each accepted socket becomes a `MasterLink` with two tasks: the connection's own task
reads the slave's frames (and closes the link after `housekeeping_interval_ms` without one: one
idle deadline per link, re-armed when it falls due, not a timer armed per read), a
sender task writes whatever `next_transfer` yields and otherwise sleeps until woken (an append,
a handshake or first ack, a confirm-offset move when no earlier move is being held back:
`wake_for_confirm`) or until the next heartbeat or held-back confirm offset falls due. A confirm
offset that moved is sent alone only if no data frame carried it within `CONFIRM_DELAY_MS`
(master_conn): under load it rides on the next data frame.

What the frames mean for the sync-state-set, the confirm offset and put acks is decided by the
owner through `LinkEvents` (the `HAService`); `accepting()` false refuses a connection at once
(this broker is not master). Any error on a link closes that link only; `on_closed` then runs
exactly once for every link that was accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from brokergroup.broker.errors import BrokerError
from brokergroup.broker.ha.master_conn import Acked, Handshaked, MasterConnection
from brokergroup.broker.protocol.ha import encode
from brokergroup.broker.settings import HASettings
from brokergroup.broker.store.types import ReplicatedLog

logger = logging.getLogger(__name__)

READ_SIZE = 64 * 1024
CONFIRM_DELAY_MS = 5
"""How long a moved confirm offset waits for a data frame to carry it before it is sent alone:
caught-up slaves see it at most this much later (consumers reading from a slave see new messages
up to 5 ms later), and under load no frame is sent for it alone."""


class MasterLink:
    """One slave's connection: its state machine, its socket, its wake-up flag."""

    def __init__(self, conn: MasterConnection, writer: asyncio.StreamWriter, address: str) -> None:
        self.conn = conn
        self.address = address
        self.writer = writer
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def slave_id(self) -> int | None:
        return self.conn.slave_id

    def close(self) -> None:
        """Close the socket; the link's tasks notice and finish."""
        self.writer.close()


class LinkEvents(Protocol):
    def accepting(self) -> bool:
        """Whether new HA connections are welcome (this broker is master)."""

    def on_handshake(self, link: MasterLink, event: Handshaked) -> bool:
        """A slave introduced itself; False closes the link."""

    def on_ack(self, link: MasterLink, event: Acked) -> None: ...

    def on_closed(self, link: MasterLink) -> None: ...


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)


class HAServer:
    def __init__(
        self, store: ReplicatedLog, *, settings: HASettings, clock_ms: Callable[[], int], events: LinkEvents
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock_ms
        self._events = events
        self._server: asyncio.Server | None = None
        self._links: set[MasterLink] = set()
        self._address = ""
        self._closing = False

    async def start(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._serve, self._settings.host, self._settings.port)
        host, port = self._server.sockets[0].getsockname()[:2]
        self._address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        logger.info("HA server listening on %s", self._address)

    @property
    def started(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> str:
        if not self._address:
            raise RuntimeError("the HA server is not started")
        return self._address

    @property
    def links(self) -> tuple[MasterLink, ...]:
        return tuple(self._links)

    def wake_all(self) -> None:
        for link in self._links:
            link.wake.set()

    def wake_for_confirm(self) -> None:
        """The confirm offset moved: wake the senders that have no data frame standing for it."""
        for link in self._links:
            if link.conn.confirm_wake_wanted:
                link.wake.set()

    async def drop_all(self) -> None:
        """Close every connection and wait until each one's `on_closed` has run."""
        tasks = [link.task for link in self._links if link.task is not None]
        for link in self._links:
            link.close()
        if tasks:
            await asyncio.wait(tasks)

    async def close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        await self.drop_all()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        address = _peer(writer)
        if self._closing or not self._events.accepting():
            logger.info("refusing HA connection from %s: not master", address)
            await _close(writer)
            return
        conn = MasterConnection(
            batch_size=self._settings.transfer_batch_size,
            heartbeat_interval_ms=self._settings.send_heartbeat_interval_ms,
            now_ms=self._clock(),
            confirm_delay_ms=CONFIRM_DELAY_MS,
        )
        link = MasterLink(conn, writer, address)
        link.task = asyncio.current_task()
        self._links.add(link)
        sender = asyncio.get_running_loop().create_task(self._send_loop(link))
        try:
            await self._receive_loop(link, reader)
        except (OSError, BrokerError) as error:
            logger.warning("HA connection from %s (slave %s) failed: %s", address, link.slave_id, error)
        except Exception:
            logger.exception("HA connection from %s (slave %s) failed", address, link.slave_id)
        finally:
            sender.cancel()
            await asyncio.wait([sender])
            self._links.discard(link)
            await _close(writer)
            logger.info("HA connection from %s (slave %s) closed", address, link.slave_id)
            self._events.on_closed(link)

    async def _receive_loop(self, link: MasterLink, reader: asyncio.StreamReader) -> None:
        timeout_s = self._settings.housekeeping_interval_ms / 1000
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        last_read = loop.time()
        expired = False
        timer: asyncio.TimerHandle

        def watchdog() -> None:  # one idle deadline per link, not a timer armed per read
            nonlocal timer, expired
            if loop.time() - last_read >= timeout_s:
                expired = True
                task.cancel()
            else:
                timer = loop.call_at(last_read + timeout_s, watchdog)

        timer = loop.call_at(last_read + timeout_s, watchdog)
        try:
            while True:
                try:
                    data = await reader.read(READ_SIZE)
                except asyncio.CancelledError:
                    if not expired or task.uncancel() > 0:
                        raise
                    logger.warning("no frame from slave %s (%s) for %.1f s", link.slave_id, link.address, timeout_s)
                    return
                if not data:
                    return
                last_read = loop.time()
                if not self._receive(link, data):
                    return
        finally:
            timer.cancel()

    def _receive(self, link: MasterLink, data: bytes) -> bool:
        """Handle the slave's bytes; False: close the link (a refused handshake)."""
        wake = False  # the sender only waits for a handshake or a first ack (where to start)
        for event in link.conn.receive(data, self._store, self._clock()):
            if isinstance(event, Handshaked):
                if not self._events.on_handshake(link, event):
                    return False
                wake = True
            else:
                self._events.on_ack(link, event)
                wake = wake or event.first
        if wake:
            link.wake.set()
        return True

    async def _send_loop(self, link: MasterLink) -> None:
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle | None = None
        timer_at = 0  # when the armed timer fires, on self._clock

        def fire() -> None:
            nonlocal timer
            timer = None
            link.wake.set()

        try:
            while True:
                link.wake.clear()
                now = self._clock()
                frame = link.conn.next_transfer(self._store, now)
                if frame is not None:
                    link.writer.write(encode(frame))
                    await link.writer.drain()
                    continue
                # One wake-up timer per link, re-armed only when the next due time is earlier than
                # the armed one (a confirm offset held back), not a timer per wait: a timer that
                # fires early (the heartbeat moved on with the frames sent since) wakes the loop,
                # which finds nothing due and arms it again.
                due = link.conn.next_wakeup_ms()
                if due is not None and (timer is None or due < timer_at):
                    if timer is not None:
                        timer.cancel()
                    timer, timer_at = loop.call_later(max(due - now, 0) / 1000, fire), due
                await link.wake.wait()
        except (OSError, BrokerError) as error:
            logger.warning("sending to slave %s (%s) failed: %s", link.slave_id, link.address, error)
            link.close()
        except Exception:
            logger.exception("sending to slave %s (%s) failed", link.slave_id, link.address)
            link.close()
        finally:
            if timer is not None:
                timer.cancel()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
