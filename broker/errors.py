"""The broker's exceptions: one small hierarchy, translated at the adapter boundaries.

- `InvalidMessageError`: a producer's message (or consumer-offset commit) breaks a limit; the
  message names the field. Nothing of the request was stored.
- `ProtocolError`: a peer sent bytes that break the HA wire format; drop the connection.
- `StoreError` and its kinds: the commit log or the epoch file refused an operation or found
  damage. `CorruptLogError` is never raised for a torn tail (that is cut on open and logged); it
  means valid data follows a damaged record, so repairing it silently would lose messages.
  `DiskFullError`: a write refused (below the free-space threshold) or undone (ENOSPC).
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every error the broker raises on purpose."""


class InvalidMessageError(BrokerError):
    """A message or consumer-offset commit from a client that breaks a limit; names the field."""


class ProtocolError(BrokerError):
    """Bytes from a peer that are not a valid HA frame. The decoder that raised it is poisoned."""


class StoreError(BrokerError):
    """A storage operation was refused (bad offset, bad argument) or failed."""


class InvalidRecordError(StoreError):
    """A record, or raw replicated data, that breaks the record format or the configured limits."""


class CorruptLogError(StoreError):
    """Damage in the commit log that cannot be cut away without losing valid records after it."""


class DiskFullError(StoreError):
    """The store's disk is (nearly) full: nothing of the write was stored; retry once space is freed."""


class SeedRequiredError(StoreError):
    """An empty replica was sent a log starting after offset 0: the deleted head's queue offsets are unknown."""


class EpochFileError(StoreError):
    """Neither the epoch file nor its `.bak` copy could be read."""
