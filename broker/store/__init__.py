"""Broker storage: pure formats and small, synchronous file I/O (no asyncio, no sockets).

- `record`: the commit-log record layout (CRC-protected) and its encoder/decoder;
- `segments`: the commit log over fixed-size segment files, crash-safe truncation, and an
  in-memory twin with the same interface for replication tests;
- `epoch`: the epoch cache (which master epoch wrote which offsets) and its checkpoint file.
"""
