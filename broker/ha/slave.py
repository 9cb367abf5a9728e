"""The slave's HA client: a thin asyncio shell around `slave_conn.SlaveConnection`.

One task per target master. A session connects to the master's HA address, sends the
handshake, applies what the master sends (truncating at the consistent point first, crash-safely
through the store), acks, and sends a heartbeat ack when idle. Any error ends the session: the
socket is closed and the client reconnects after a backoff that doubles from 0.2 s to 5 s and
starts again at 0.2 s after a session that reached TRANSFER. `stop()` cancels the task; the
store is only touched between awaits, so a stop never interrupts a store operation.

A session also ends when nothing arrives for `housekeeping_interval_ms` (the master sends
heartbeats every `send_heartbeat_interval_ms`).

Acks follow the store's flushes: during a session a flush listener asks the connection for the
ack now due (under SYNC flush, a slave acknowledges only fsynced bytes; `slave_conn`) and writes
it at once, so a put waits for one fsync on the slave, shared by every frame received meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final, NoReturn

from brokergroup.broker.errors import BrokerError
from brokergroup.broker.ha.slave_conn import SlaveConnection
from brokergroup.broker.protocol.ha import DEFAULT_MAX_TRANSFER_BODY, HAState, encode
from brokergroup.broker.settings import HASettings
from brokergroup.broker.store.types import ReplicatedLog

logger = logging.getLogger(__name__)

READ_SIZE: Final = 256 * 1024
BACKOFF_INITIAL_S: Final = 0.2
BACKOFF_MAX_S: Final = 5.0


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"HA address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class HASlave:
    """Follows one master; see the module docstring."""

    def __init__(
        self,
        store: ReplicatedLog,
        *,
        broker_id: int,
        settings: HASettings,
        clock_ms: Callable[[], int],
        master_address: str,
        expected_epoch: int,
    ) -> None:
        split_address(master_address)  # fail early on a bad address
        self._store = store
        self._broker_id = broker_id
        self._settings = settings
        self._clock = clock_ms
        self.master_address = master_address
        self.expected_epoch = expected_epoch
        """The master epoch the controller announced; an older master is refused."""
        self._task: asyncio.Task[None] | None = None
        self._conn: SlaveConnection | None = None
        self.sessions = 0
        """Sessions that reached TRANSFER (for status and tests)."""
        self.last_error: str | None = None

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.state is HAState.TRANSFER

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"ha-slave->{self.master_address}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    def status(self) -> dict[str, object]:
        return {
            "masterAddress": self.master_address,
            "connected": self.connected,
            "ackedOffset": self._conn.acked_offset if self._conn is not None else None,
            "sessions": self.sessions,
            "lastError": self.last_error,
        }

    async def _run(self) -> None:
        backoff = BACKOFF_INITIAL_S
        while True:
            try:
                await self._session()
            except (OSError, TimeoutError, BrokerError) as error:
                self.last_error = f"{type(error).__name__}: {error}"
                logger.warning("replication from %s stopped: %s", self.master_address, self.last_error)
            except Exception as error:
                self.last_error = f"{type(error).__name__}: {error}"
                logger.exception("replication from %s failed", self.master_address)
            reached_transfer = self.connected
            self._conn = None
            if reached_transfer:
                backoff = BACKOFF_INITIAL_S
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _session(self) -> None:
        host, port = split_address(self.master_address)
        async with asyncio.timeout(self._settings.housekeeping_interval_ms / 1000):
            reader, writer = await asyncio.open_connection(host, port)
        try:
            conn = self._conn = SlaveConnection(
                broker_id=self._broker_id,
                is_learner=self._settings.async_learner,
                expected_epoch=self.expected_epoch,
                heartbeat_interval_ms=self._settings.send_heartbeat_interval_ms,
                now_ms=self._clock(),
                max_transfer_body=DEFAULT_MAX_TRANSFER_BODY + self._settings.transfer_batch_size,
                sync_from_last_file=self._settings.sync_from_last_file,
            )
            writer.write(encode(conn.handshake(self._clock())))
            await writer.drain()
            loop = asyncio.get_running_loop()

            def send_due_ack() -> None:
                try:
                    for ack in conn.flushed(self._store, self._clock()):
                        writer.write(encode(ack))
                except Exception:
                    logger.exception("acking a flush to %s failed", self.master_address)
                    writer.close()

            def on_flushed(_flushed_offset: int) -> None:
                if _on_loop(loop):
                    send_due_ack()
                elif not loop.is_closed():
                    loop.call_soon_threadsafe(send_due_ack)

            self._store.add_flush_listener(on_flushed)
            try:
                await self._follow(conn, reader, writer)
            finally:
                self._store.remove_flush_listener(on_flushed)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _follow(
        self, conn: SlaveConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> NoReturn:
        # One watchdog timer per session, re-armed when it falls due or when the next deadline moves
        # earlier than it, instead of an `asyncio.timeout` armed and cancelled around every read
        # (issue 17). When it falls due it sends the heartbeat ack itself (`conn.tick`), or, after
        # `housekeeping_interval_ms` without a frame, aborts the connection, which ends the read.
        housekeeping = self._settings.housekeeping_interval_ms
        loop = asyncio.get_running_loop()
        last_read = self._clock()
        silent = False
        timer: asyncio.TimerHandle | None = None
        timer_at = 0  # when the armed timer fires, on self._clock

        def deadline() -> int:
            wake = conn.next_wakeup_ms()
            return last_read + housekeeping if wake is None else min(last_read + housekeeping, wake)

        def arm(at: int, now: int) -> None:
            nonlocal timer, timer_at
            if timer is not None:
                timer.cancel()
            timer, timer_at = loop.call_later(max(at - now, 0) / 1000, watchdog), at

        def watchdog() -> None:
            nonlocal timer, silent
            timer = None
            now = self._clock()
            if now - last_read >= housekeeping:
                silent = True
                writer.transport.abort()
                return
            try:
                for ack in conn.tick(now):
                    writer.write(encode(ack))
            except Exception:
                logger.exception("a heartbeat ack to %s failed", self.master_address)
                writer.transport.abort()
                return
            arm(deadline(), now)

        try:
            while True:
                at = deadline()
                if timer is None or at < timer_at:
                    arm(at, self._clock())
                try:
                    data = await reader.read(READ_SIZE)
                except OSError:
                    if not silent:
                        raise
                    data = b""
                if silent:
                    raise TimeoutError(f"no frame from the master for {housekeeping} ms")
                if not data:
                    raise ConnectionError("the master closed the connection")
                now = last_read = self._clock()
                was_transfer = conn.state is HAState.TRANSFER
                acks = conn.receive(data, self._store, now) or conn.tick(now)
                if not was_transfer and conn.state is HAState.TRANSFER:
                    self.sessions += 1
                    logger.info("replicating from %s at offset %d", self.master_address, conn.position)
                for ack in acks:
                    writer.write(encode(ack))
                if acks:
                    await writer.drain()
        finally:
            if timer is not None:
                timer.cancel()
