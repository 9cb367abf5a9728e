"""Baseline for `bench produce`: bare asyncio TCP request/ack on 127.0.0.1, no HTTP, no store.

Frames are length-prefixed (u32 big-endian, then the payload); every answer is an 8-byte ack
(u64, the count of frames seen). Two server shapes, each its own process, as the broker is:

- `serve`: read a frame, answer the ack;
- `serve --follower HOST:PORT --follower HOST:PORT`: read a frame, forward it to every follower
  on one persistent connection each, wait for all their acks, then answer ("replicated").
  Frames are pipelined to the followers; acks come back in order, so a FIFO of futures per
  follower matches them.

`follow` is the follower: the same as `serve`. Each process prints `PORT <n>` on its first
line once listening. The client side (`run_clients`) runs in the benchmark process: C
connections, each sending its next frame only after the previous one's ack.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import struct
import sys
import time
from collections.abc import Awaitable, Callable

FRAME = struct.Struct(">I")
ACK = struct.Struct(">Q")
MAX_FRAME = 64 * 1024 * 1024


class Follower:
    """One persistent connection to a follower, with pipelined frames and in-order acks."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.pending: collections.deque[asyncio.Future[None]] = collections.deque()
        self.task = asyncio.get_running_loop().create_task(self._read_acks())

    @classmethod
    async def connect(cls, address: str) -> Follower:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    def send(self, header: bytes, payload: bytes) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.writer.write(header)
        self.writer.write(payload)
        return future

    async def _read_acks(self) -> None:
        try:
            while True:
                await self.reader.readexactly(ACK.size)
                self.pending.popleft().set_result(None)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            while self.pending:
                self.pending.popleft().set_exception(ConnectionError(f"follower gone: {exc}"))


def handler(followers: list[Follower]) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen = 0
        try:
            while True:
                header = await reader.readexactly(FRAME.size)
                (length,) = FRAME.unpack(header)
                if length > MAX_FRAME:
                    return
                payload = await reader.readexactly(length)
                if followers:
                    await asyncio.gather(*(f.send(header, payload) for f in followers))
                seen += 1
                writer.write(ACK.pack(seen))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return handle


async def serve(port: int, follower_addresses: list[str]) -> None:
    followers = [await Follower.connect(a) for a in follower_addresses]
    server = await asyncio.start_server(handler(followers), "127.0.0.1", port)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


async def run_clients(
    port: int,
    *,
    concurrency: int,
    payload_size: int,
    requests: int | None = None,
    seconds: float | None = None,
    on_done: Callable[[], None] | None = None,
) -> tuple[list[float], float]:
    """Frames of `payload_size` bytes over `concurrency` connections, each waiting for its ack
    before its next frame, until `requests` were sent or `seconds` passed (whichever is first).
    Returns per-request latencies (s) and the elapsed time."""
    payload = b"x" * payload_size
    header = FRAME.pack(payload_size)
    latencies: list[float] = []
    counter = iter(range(requests)) if requests is not None else itertools.count()
    begin = time.perf_counter()
    end = begin + seconds if seconds is not None else float("inf")

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in counter:
                started = time.perf_counter()
                if started >= end:
                    break
                writer.write(header)
                writer.write(payload)
                await reader.readexactly(ACK.size)
                latencies.append(time.perf_counter() - started)
                if on_done is not None:
                    on_done()
        finally:
            writer.close()
            await writer.wait_closed()

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return latencies, time.perf_counter() - begin


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m brokergroup.bench.socket_baseline")
    parser.add_argument("role", choices=["serve", "follow"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--follower", action="append", default=[], metavar="HOST:PORT")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.follower if args.role == "serve" else []))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
