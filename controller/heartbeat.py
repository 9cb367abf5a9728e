"""The node-local broker heartbeat table (RocketMQ `DefaultBrokerHeartbeatManager`).

Every controller node keeps its own table; it is not replicated. Brokers heartbeat every
controller, so a newly elected controller leader already knows who is alive. The table is pure:
every clock reading is an argument (`now_ms`), and nothing here schedules, sleeps or closes
connections. The I/O shell runs `scan_expired` periodically, calls `on_channel_close` when a
broker's connection ends, and reacts to the entries those calls return.

One entry per (broker name, broker id). Rules:
- a heartbeat for an unknown key inserts an entry; absent fields default to epoch -1,
  maxOffset -1, confirmOffset -1, timeout `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS`, priority
  `DEFAULT_ELECTION_PRIORITY` (RocketMQ leaves confirmOffset 0 on a new entry; we keep the
  heartbeat's value, it takes no part in election);
- a heartbeat for a known key always refreshes the timestamp, the timeout and the election
  priority; it replaces epoch, maxOffset and confirmOffset only if the epoch is higher, or the
  epoch is equal and maxOffset is higher (monotone, as RocketMQ: a broker whose log was
  truncated keeps being ranked by its old, higher offset until its entry is dropped);
- an entry is active while `last_update_ms + heartbeat_timeout_ms >= now_ms`; `scan_expired`
  drops entries with `now_ms - last_update_ms > heartbeat_timeout_ms` (the exact complement).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Mapping

from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.controller.model import BrokerLiveInfo, LivenessView
from brokergroup.controller.protocol import HeartbeatRequest

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 10_000
"""Heartbeat timeout used when a heartbeat does not carry one (RocketMQ's default)."""

DEFAULT_ELECTION_PRIORITY = 2**31 - 1
"""Election priority used when a heartbeat does not carry one: the least preferred."""

Key = tuple[str, int]


def validate_heartbeat(req: HeartbeatRequest) -> None:
    """Refuse a heartbeat without a broker id, as RocketMQ's request processor does."""
    if req.broker_id is None:
        raise ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")


@dataclasses.dataclass
class _Entry:
    info: BrokerLiveInfo
    channel: Hashable | None


class HeartbeatTable:
    """Broker liveness as seen by this controller node.

    Deliberate difference from RocketMQ: RocketMQ keeps the channel and address of the first
    heartbeat of an entry. Here a heartbeat that arrives with a channel makes that channel the
    entry's channel (the latest stream wins) and updates the address. A broker that reconnects
    before its old connection is noticed as closed thus keeps its entry when the old stream's
    close arrives late: `on_channel_close` removes only entries whose *current* channel closed.
    A heartbeat without a channel changes neither the channel nor the address.
    """

    def __init__(self) -> None:
        self._entries: dict[Key, _Entry] = {}

    def on_heartbeat(self, req: HeartbeatRequest, now_ms: int, channel: Hashable | None = None) -> bool:
        """Record a heartbeat; True if the entry is new ("broker became active")."""
        validate_heartbeat(req)
        assert req.broker_id is not None
        key = (req.broker_name, req.broker_id)
        timeout = req.heartbeat_timeout_mills
        if timeout is None:
            timeout = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
        priority = DEFAULT_ELECTION_PRIORITY if req.election_priority is None else req.election_priority
        entry = self._entries.get(key)
        if entry is None:
            info = BrokerLiveInfo(
                cluster_name=req.cluster_name,
                broker_name=req.broker_name,
                broker_id=req.broker_id,
                broker_addr=req.broker_addr,
                last_update_ms=now_ms,
                heartbeat_timeout_ms=timeout,
                epoch=req.epoch,
                max_offset=req.max_offset,
                confirm_offset=req.confirm_offset,
                election_priority=priority,
            )
            self._entries[key] = _Entry(info, channel)
            return True
        prev = entry.info
        advances = req.epoch > prev.epoch or (req.epoch == prev.epoch and req.max_offset > prev.max_offset)
        if channel is not None:
            entry.channel = channel
        entry.info = dataclasses.replace(
            prev,
            broker_addr=prev.broker_addr if channel is None else req.broker_addr,
            last_update_ms=now_ms,
            heartbeat_timeout_ms=timeout,
            election_priority=priority,
            epoch=req.epoch if advances else prev.epoch,
            max_offset=req.max_offset if advances else prev.max_offset,
            confirm_offset=req.confirm_offset if advances else prev.confirm_offset,
        )
        return False

    def on_channel_close(self, channel: Hashable) -> list[BrokerLiveInfo]:
        """Drop the entries whose current channel is `channel`; return them (sorted by key)."""
        return self._drop(key for key, entry in self._entries.items() if entry.channel == channel)

    def scan_expired(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Drop the entries not heard from within their timeout; return them (sorted by key)."""
        return self._drop(key for key, entry in self._entries.items() if not entry.info.active_at(now_ms))

    def remove(self, broker_name: str, broker_ids: Iterable[int] | None = None) -> list[BrokerLiveInfo]:
        """Drop the entries of a broker set (all of them when `broker_ids` is None), for clean-broker-data."""
        wanted = None if broker_ids is None else set(broker_ids)
        return self._drop(
            key for key in self._entries if key[0] == broker_name and (wanted is None or key[1] in wanted)
        )

    def is_active(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        entry = self._entries.get((broker_name, broker_id))
        return entry is not None and entry.info.active_at(now_ms)

    def get(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        """The entry of one broker, active or not."""
        entry = self._entries.get((broker_name, broker_id))
        return None if entry is None else entry.info

    def view(self, now_ms: int) -> LivenessView:
        """A frozen snapshot of the entries active at `now_ms`."""
        return LivenessView(
            brokers={key: e.info for key, e in sorted(self._entries.items()) if e.info.active_at(now_ms)}
        )

    def entries(self) -> Mapping[Key, BrokerLiveInfo]:
        """Every entry, active or not, sorted by key (a copy)."""
        return {key: entry.info for key, entry in sorted(self._entries.items())}

    def __len__(self) -> int:
        return len(self._entries)

    def _drop(self, keys: Iterable[Key]) -> list[BrokerLiveInfo]:
        dropped = sorted(keys)
        return [self._entries.pop(key).info for key in dropped]
