"""Election policy: which replica of a broker set becomes master (RocketMQ `DefaultElectPolicy`).

`elect` is a pure function of its arguments. Liveness and the ranking data (epoch, max offset,
election priority) come from one frozen `LivenessView`, taken once per request, so the same
inputs always give the same answer.

The policy first tries the sync-state-set; only if that yields nobody, and unclean election is
enabled (the caller passes `all_replica_brokers`), it tries every registered replica. Within one
candidate collection (`_try_elect`):

1. keep only alive brokers; none alive -> nobody;
2. the old master, if alive in the collection, stays master unless another broker is preferred;
3. a preferred (admin-designated) broker wins if alive in the collection, else nobody: a
   designation is all-or-nothing within the collection;
4. otherwise rank: higher epoch, then higher max offset, then LOWER election priority.

Where brokergroup differs from RocketMQ, on purpose:
- offsets are compared as Python ints. RocketMQ compared `(int)(o2.maxOffset - o1.maxOffset)`,
  which overflows when offsets differ by more than 2**31 and elects the shorter log (#10578);
- a full tie (same epoch, offset and priority) goes to the lowest broker id. RocketMQ keeps the
  first of the tied brokers in `HashSet` iteration order (a `TreeSet` drops elements that compare
  equal); for small ids that order happens to be ascending too, but it is not a stated rule.
"""

from __future__ import annotations

from collections.abc import Collection

from brokergroup.controller.model import BrokerLiveInfo, LivenessView


def elect(
    *,
    broker_name: str,
    sync_state_brokers: Collection[int],
    all_replica_brokers: Collection[int] | None,
    old_master: int | None,
    prefer_broker_id: int | None,
    live: LivenessView,
) -> int | None:
    """The new master of `broker_name`, or None when nobody is electable.

    `all_replica_brokers` is None unless unclean election is enabled; then it holds every
    registered id and is tried when the sync-state-set yields nobody.
    """
    chosen = _try_elect(broker_name, sync_state_brokers, old_master, prefer_broker_id, live)
    if chosen is not None or all_replica_brokers is None:
        return chosen
    return _try_elect(broker_name, all_replica_brokers, old_master, prefer_broker_id, live)


def _try_elect(
    broker_name: str,
    brokers: Collection[int],
    old_master: int | None,
    prefer: int | None,
    live: LivenessView,
) -> int | None:
    valid = {broker_id for broker_id in brokers if live.is_active(broker_name, broker_id)}
    if not valid:
        return None
    if old_master in valid and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in valid else None
    infos = [info for broker_id in valid if (info := live.info(broker_name, broker_id)) is not None]
    if not infos:
        # An active broker always has info in a LivenessView; this mirrors RocketMQ's fallback
        # when no live-info getter is wired (`brokers.iterator().next()`), made deterministic.
        return min(valid)
    return min(infos, key=rank_key).broker_id


def rank_key(info: BrokerLiveInfo) -> tuple[int, int, int, int]:
    """Sort key: the smallest key is the best candidate.

    Higher epoch, then higher max offset (exact integer comparison), then lower election
    priority, then lower broker id (deterministic tie-break).
    """
    return (-info.epoch, -info.max_offset, info.election_priority, info.broker_id)
