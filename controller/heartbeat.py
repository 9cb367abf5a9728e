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

import heapq
import types
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


class HeartbeatTable:
    """Broker liveness as seen by this controller node.

    Deliberate difference from RocketMQ: RocketMQ keeps the channel and address of the first
    heartbeat of an entry. Here a heartbeat that arrives with a channel makes that channel the
    entry's channel (the latest stream wins) and updates the address. A broker that reconnects
    before its old connection is noticed as closed thus keeps its entry when the old stream's
    close arrives late: `on_channel_close` removes only entries whose *current* channel closed.
    A heartbeat without a channel changes neither the channel nor the address.

    Cost, with n entries: a heartbeat, `view`, `get`, `is_active` and `active_count` are O(1)
    amortized (a new entry O(log n)); `scan_expired` is O(log n) per entry whose deadline passed;
    `on_channel_close` and `remove` touch only the entries of that channel or set. Deadlines
    (`last_update_ms + heartbeat_timeout_ms`) sit in a heap, one item per entry, pushed again
    only when a popped deadline turns out to have been refreshed by later heartbeats.
    """

    def __init__(self) -> None:
        self._infos: dict[Key, BrokerLiveInfo] = {}
        self._channels: dict[Key, Hashable] = {}
        self._by_channel: dict[Hashable, set[Key]] = {}
        self._ids_by_name: dict[str, set[int]] = {}
        self._deadlines: list[tuple[int, Key]] = []
        """Heap of (deadline, key); an item is current while it equals `_scheduled[key]`."""
        self._scheduled: dict[Key, int] = {}
        self._expired: set[Key] = set()
        """Entries whose deadline passed (seen by `_settle`), not yet dropped by `scan_expired`."""

    def on_heartbeat(self, req: HeartbeatRequest, now_ms: int, channel: Hashable | None = None) -> bool:
        """Record a heartbeat; True if the entry is new ("broker became active")."""
        validate_heartbeat(req)
        assert req.broker_id is not None
        key = (req.broker_name, req.broker_id)
        timeout = req.heartbeat_timeout_mills
        if timeout is None:
            timeout = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
        priority = DEFAULT_ELECTION_PRIORITY if req.election_priority is None else req.election_priority
        prev = self._infos.get(key)
        if prev is None:
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
            self._ids_by_name.setdefault(req.broker_name, set()).add(req.broker_id)
        else:
            advances = req.epoch > prev.epoch or (req.epoch == prev.epoch and req.max_offset > prev.max_offset)
            # the constructor, not dataclasses.replace (which looks the fields up on every call: a
            # third of a heartbeat's cost in the table at 18,000 heartbeats/s, docs/benchmarks.md)
            info = BrokerLiveInfo(
                cluster_name=prev.cluster_name,
                broker_name=prev.broker_name,
                broker_id=prev.broker_id,
                broker_addr=prev.broker_addr if channel is None else req.broker_addr,
                last_update_ms=now_ms,
                heartbeat_timeout_ms=timeout,
                epoch=req.epoch if advances else prev.epoch,
                max_offset=req.max_offset if advances else prev.max_offset,
                confirm_offset=req.confirm_offset if advances else prev.confirm_offset,
                election_priority=priority,
            )
        self._infos[key] = info
        if channel is not None:
            self._set_channel(key, channel)
        self._expired.discard(key)
        deadline = now_ms + timeout
        scheduled = self._scheduled.get(key)
        if scheduled is None or deadline < scheduled:  # new, expired, or its timeout shrank
            self._scheduled[key] = deadline
            heapq.heappush(self._deadlines, (deadline, key))
        return prev is None

    def on_channel_close(self, channel: Hashable) -> list[BrokerLiveInfo]:
        """Drop the entries whose current channel is `channel`; return them (sorted by key)."""
        return self._drop(self._by_channel.get(channel, ()))

    def scan_expired(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Drop the entries not heard from within their timeout; return them (sorted by key)."""
        self._settle(now_ms)
        return self._drop(self._expired)

    def remove(self, broker_name: str, broker_ids: Iterable[int] | None = None) -> list[BrokerLiveInfo]:
        """Drop the entries of a broker set (all of them when `broker_ids` is None), for clean-broker-data."""
        known = self._ids_by_name.get(broker_name, set())
        ids = known if broker_ids is None else known & set(broker_ids)
        return self._drop((broker_name, broker_id) for broker_id in ids)

    def is_active(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        info = self._infos.get((broker_name, broker_id))
        return info is not None and info.active_at(now_ms)

    def get(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        """The entry of one broker, active or not."""
        return self._infos.get((broker_name, broker_id))

    def view(self, now_ms: int) -> LivenessView:
        """The entries active at `now_ms`, for one synchronous computation (see `LivenessView`): O(1)."""
        return LivenessView(brokers=types.MappingProxyType(self._infos), now_ms=now_ms)

    def active_count(self, now_ms: int) -> int:
        """How many entries are active at `now_ms`, without a scan of the table (for metrics)."""
        self._settle(now_ms)
        return len(self._infos) - len(self._expired)

    def entries(self) -> Mapping[Key, BrokerLiveInfo]:
        """Every entry, active or not, sorted by key (a copy)."""
        return dict(sorted(self._infos.items()))

    def __len__(self) -> int:
        return len(self._infos)

    def _settle(self, now_ms: int) -> None:
        """Move every entry whose deadline is before `now_ms` into `_expired`; reschedule the refreshed ones."""
        heap = self._deadlines
        while heap and heap[0][0] < now_ms:
            deadline, key = heapq.heappop(heap)
            if self._scheduled.get(key) != deadline:
                continue  # superseded by an earlier deadline, or the entry is gone
            info = self._infos[key]
            actual = info.last_update_ms + info.heartbeat_timeout_ms
            if actual < now_ms:
                del self._scheduled[key]
                self._expired.add(key)
            else:
                self._scheduled[key] = actual
                heapq.heappush(heap, (actual, key))

    def _set_channel(self, key: Key, channel: Hashable) -> None:
        old = self._channels.get(key)
        if old == channel:
            return
        if old is not None:
            self._unlink_channel(key, old)
        self._channels[key] = channel
        self._by_channel.setdefault(channel, set()).add(key)

    def _unlink_channel(self, key: Key, channel: Hashable) -> None:
        keys = self._by_channel.get(channel)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_channel[channel]

    def _drop(self, keys: Iterable[Key]) -> list[BrokerLiveInfo]:
        dropped = []
        for key in sorted(keys):
            info = self._infos.pop(key, None)
            if info is None:
                continue
            dropped.append(info)
            channel = self._channels.pop(key, None)
            if channel is not None:
                self._unlink_channel(key, channel)
            ids = self._ids_by_name[key[0]]
            ids.discard(key[1])
            if not ids:
                del self._ids_by_name[key[0]]
            self._scheduled.pop(key, None)
            self._expired.discard(key)
        if len(self._deadlines) > 2 * len(self._scheduled) + 64:  # drop the items of dropped entries
            self._deadlines = [(d, k) for d, k in self._deadlines if self._scheduled.get(k) == d]
            heapq.heapify(self._deadlines)
        return dropped
