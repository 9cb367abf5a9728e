"""Replication: master -> slave log shipping with epochs, the sync-state-set, and put acks.

Pure cores (no asyncio, no sockets, no clock):

- `syncset`: the master's sync-state-set manager (confirmed set, pending proposals, the
  "synchronizing" union rule, shrink/expand, confirm offset, ack counting);
- `master_conn` / `slave_conn`: one HA connection's state machine on each side (frames in,
  frames out, decisions against the `ReplicatedLog`).

Thin asyncio shells: `master` (the HA server), `slave` (the HA client), `acks` (put waiters) and
`service` (`HAService`, the facade the broker's role manager drives).
"""

from __future__ import annotations

from brokergroup.broker.errors import BrokerError


class ReplicationError(BrokerError):
    """A replication step that cannot go on with this peer (no consistent point, an offset the
    master cannot serve, a stale master); the connection is dropped and retried."""
