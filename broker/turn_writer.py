"""One write per event-loop iteration for the binary protocol's connections (issue 17).

Frames queued during one iteration of the loop (producers released by one read of replies, puts
released by one replica ack or flush) go out in one `transport.write` at its end: one send system
call and one wake-up of the peer instead of one each. Both ends of the binary protocol use it.
"""

from __future__ import annotations

import asyncio


class TurnWriter:
    """Queue frames; write them together once the current loop iteration ends."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        """Set by the protocol's `connection_made`; nothing is written before it or once it is closing."""
        self.queued: list[bytes] = []

    def write(self, frame: bytes) -> None:
        if not self.queued:
            asyncio.get_running_loop().call_soon(self.flush)
        self.queued.append(frame)

    def flush(self) -> None:
        frames, self.queued = self.queued, []
        transport = self.transport
        if frames and transport is not None and not transport.is_closing():
            transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
