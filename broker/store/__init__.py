"""Broker storage: pure formats and small, synchronous file I/O (no sockets; asyncio only in `flusher`).

- `record`: the commit-log record layout (CRC-protected) and its encoder/decoder;
- `segments`: the commit log over fixed-size segment files, crash-safe truncation, and an
  in-memory twin with the same interface for replication tests;
- `epoch`: the epoch cache (which master epoch wrote which offsets) and its checkpoint file;
- `indexes`: pure in-memory consume queues, queue-offset counters, idempotent-producer table and
  consumer-group offsets, fed record by record;
- `put_plan`: validation, encoding and deduplication of a put (pure);
- `checkpoint`: the confirm-offset checkpoint file;
- `head`: the head-state file (what segments deleted by retention leave behind);
- `index_checkpoint`, `index_files`: the persisted indexes (per-queue consume-queue files and the
  index checkpoint), so opening replays only the log after the last checkpoint;
- `retention`: which head segments retention may delete (pure);
- `diskspace`: the free-space check that refuses puts on a (nearly) full disk;
- `message_store`: `MessageStore`, the store replication and the client API work against;
- `flusher`: asyncio group commit (SYNC) or periodic flush (ASYNC) around the store.
"""
