"""The master's sync-state-set manager (RocketMQ `AutoSwitchHAService` set handling), pure.

Terms. The *local* set is the one the controller confirmed, with its epoch. A *proposal* is a set
the master asked the controller to adopt (shrink or expand, `alter-sync-state-set`), together with
the sync-state epoch it is sent with: the local epoch when it was made. The controller commits a
request only while its own epoch equals the request's (per set, computed and committed under one
lock with a version check), so a proposal sent with epoch `e` can become the controller's set at
epoch `e + 1` and at no other. It is *pending* until it is *settled*: the master learns an epoch
newer than `e` (then the controller can never commit it any more, and whatever it committed is
what the master learned), or the controller refuses it for good (`refused`: a member missing,
dead or behind). While anything is pending the manager is *synchronizing* (reference §4.5, #5663).

Invariants:

- the controller's current set is the local one or one of the pending proposals (a reply can be
  lost after the commit, a later proposal can be committed after an earlier one is answered).
  So while synchronizing:
  - `effective()` = local | every pending proposal: all-ack puts and the confirm offset wait
    for all of these (a shrink keeps waiting for the removed slave, an expansion waits for the
    new one at once). RocketMQ keeps only the latest proposal in the union and ends the window
    at the first answer, which loses a second expansion still in flight (issue 22);
  - `durable()` = local & every pending proposal: only these replicas are surely electable, so
    only they count toward `in_sync_replicas >= 2` acks (fixes the RocketMQ TODO that counted
    any connection, learners, non-members and duplicates included);
  - `in_sync_replicas_nums()` = max(|local|, |latest proposal|), as RocketMQ (minInSyncReplicas);
- `confirm(members, epoch)` adopts only a newer epoch, and that settles every proposal (all were
  made at an older epoch). A read at the local epoch settles nothing: it may have been computed
  before the controller committed a proposal still in flight. Anything else is ignored;
- proposals always contain this broker; shrink and expand build on the latest proposal while
  synchronizing, so concurrent changes compose instead of undoing each other;
- a member is healthy while connected and caught up within `max_time_slave_not_catchup_ms`. A
  member whose connection closed is dropped at the next check (the service checks at once on
  close); one that never connected in this term gets the same grace from the term's start
  (RocketMQ drops it at the first check, i.e. right after a failover);
- the confirm offset never moves back and freezes while a member of the effective set has no
  connection (#6662) or has not acked a positive offset (#6728: RocketMQ ignores such a member
  and lets the offset run past its data; here it holds the offset). With one member or without
  all-ack it is the log's max offset (#7656).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Set
from typing import Final

logger = logging.getLogger(__name__)

ALL_ACK: Final = -1
"""`ack_nums` meaning "every member of the sync-state-set" (RocketMQ ALL_ACK_IN_SYNC_STATE_SET)."""

EVERY_OFFSET: Final = 2**63 - 1
"""`acked_up_to` when a put waits for no replica: every offset is acked."""


def merge_acks(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    """One ack offset per slave id from (slave id, ack offset) per connection: the highest.

    Several connections can carry the same slave id (a reconnect before the old socket is seen
    dead); each id counts once."""
    acks: dict[int, int] = {}
    for slave_id, offset in pairs:
        acks[slave_id] = max(offset, acks.get(slave_id, offset))
    return acks


class SyncStateSetManager:
    """See the module docstring. One per broker; meaningful while this broker is master."""

    def __init__(self, self_id: int, *, max_time_slave_not_catchup_ms: int, all_ack: bool) -> None:
        self.self_id = self_id
        self._max_lag_ms = max_time_slave_not_catchup_ms
        self._all_ack = all_ack
        self._local: frozenset[int] = frozenset({self_id})
        self._local_epoch = -1
        self._pending: list[frozenset[int]] = []
        """Proposals not settled yet, oldest first; all were made at `_local_epoch`."""
        self._latest: frozenset[int] | None = None
        self._union: frozenset[int] = self._local
        self._durable: frozenset[int] = self._local
        self._caught_up: dict[int, int] = {}
        self._term_start_ms = 0

    # ---- the sets -----------------------------------------------------------------------------
    @property
    def local(self) -> frozenset[int]:
        """The controller-confirmed set."""
        return self._local

    @property
    def local_epoch(self) -> int:
        """The newest sync-state epoch known; proposals made now are sent with it."""
        return self._local_epoch

    @property
    def synchronizing(self) -> bool:
        return self._latest is not None

    @property
    def latest_proposal(self) -> frozenset[int] | None:
        """The last proposal while synchronizing (RocketMQ's remote set), else None."""
        return self._latest

    @property
    def pending(self) -> tuple[frozenset[int], ...]:
        """Proposals not settled yet, oldest first (all sent with `local_epoch`)."""
        return tuple(self._pending)

    def effective(self) -> frozenset[int]:
        """The set acks and the confirm offset wait for: local | pending proposals."""
        return self._union

    def durable(self) -> frozenset[int]:
        """Members in every set the controller may hold now: local & pending proposals."""
        return self._durable

    def in_sync_replicas_nums(self) -> int:
        if self._latest is None:
            return len(self._local)
        return max(len(self._local), len(self._latest))

    def reset(self, members: frozenset[int], epoch: int, *, now_ms: int) -> None:
        """A new mastership term: adopt the controller's set, forget proposals and catch-up times."""
        self._local, self._local_epoch = members, epoch
        self._settle_all()
        self._caught_up.clear()
        self._term_start_ms = now_ms

    def mark_synchronizing(self, proposal: frozenset[int]) -> None:
        """Record a proposal about to be sent with `local_epoch` (this broker is always in it)."""
        proposal = proposal | {self.self_id}
        if self._latest is None and proposal == self._local:
            return
        self._latest = proposal
        if proposal != self._local and proposal not in self._pending:
            self._pending.append(proposal)
        self._recompute()

    def confirm(self, members: frozenset[int], epoch: int) -> bool:
        """The controller's set; True when it changed the local set or settled proposals.

        Only a newer epoch settles proposals: a read at the local epoch may have been computed
        before the controller committed one of them."""
        if epoch > self._local_epoch:
            self._local, self._local_epoch = members, epoch
            self._settle_all()
            return True
        if epoch == self._local_epoch and members != self._local:
            logger.warning(
                "controller reports sync-state-set %s at epoch %d, locally %s: ignored",
                sorted(members),
                epoch,
                sorted(self._local),
            )
        return False

    def refused(self, proposal: frozenset[int], epoch: int) -> bool:
        """The controller refused `proposal` sent with `epoch` for good (a member missing, dead or
        behind): it was not committed, so it stops counting. True when something changed.

        Only for a refusal computed at the proposal's epoch; a lost reply, a fenced epoch or "equal
        to the current set" settle nothing (the master re-reads the controller instead)."""
        proposal = proposal | {self.self_id}
        if epoch != self._local_epoch or proposal not in self._pending:
            return False
        self._pending.remove(proposal)
        if not self._pending:
            self._latest = None
        elif self._latest == proposal:
            self._latest = self._pending[-1]
        self._recompute()
        return True

    def _settle_all(self) -> None:
        self._pending.clear()
        self._latest = None
        self._recompute()

    def _recompute(self) -> None:
        union = durable = self._local
        for proposal in self._pending:
            union |= proposal
            durable &= proposal
        self._union, self._durable = union, durable

    def _propose(self, proposal: frozenset[int]) -> frozenset[int] | None:
        proposal |= {self.self_id}
        if proposal == self._local:
            if self._latest is not None:
                self._latest = self._local  # withdrawn; earlier proposals stay in the union
            return None
        self.mark_synchronizing(proposal)
        return proposal

    def _base(self) -> frozenset[int]:
        return self._local if self._latest is None else self._latest

    # ---- shrink and expand ----------------------------------------------------------------------
    def update_caught_up(self, slave_id: int, time_ms: int) -> None:
        """Record that `slave_id` had everything the master had at `time_ms` (never moves back)."""
        self._caught_up[slave_id] = max(time_ms, self._caught_up.get(slave_id, time_ms))

    def caught_up_ms(self, slave_id: int) -> int | None:
        return self._caught_up.get(slave_id)

    def _healthy(self, member: int, now_ms: int, connected: Set[int]) -> bool:
        last = self._caught_up.get(member)
        if member not in connected:
            return last is None and now_ms - self._term_start_ms <= self._max_lag_ms
        return now_ms - (self._term_start_ms if last is None else last) <= self._max_lag_ms

    def maybe_shrink(self, now_ms: int, connected: Set[int]) -> frozenset[int] | None:
        """The set to propose without unhealthy members, or None when it equals the local set.

        A still-pending proposal is returned again on every call, so that the periodic check
        retries a report the controller did not answer."""
        keep = frozenset(m for m in self._base() if m == self.self_id or self._healthy(m, now_ms, connected))
        return self._propose(keep)

    def maybe_expand(
        self, slave_id: int, slave_max_offset: int, *, confirm_offset: int, last_epoch_start: int, is_learner: bool
    ) -> frozenset[int] | None:
        """The set to propose with `slave_id` added, if it may join: not a learner, not already
        in (or pending), has everything confirmed, and has reached the current epoch."""
        if is_learner or slave_id == self.self_id or slave_id in self._base():
            return None
        if slave_max_offset < confirm_offset or slave_max_offset < last_epoch_start:
            return None
        return self._propose(self._base() | {slave_id})

    # ---- commit point and acks ------------------------------------------------------------------
    def compute_confirm_offset(self, max_offset: int, acks: Mapping[int, int], connected: Set[int], stored: int) -> int:
        """The master's confirm offset (reference §4.4 with the fixes in the module docstring)."""
        others = self._union - {self.self_id}
        if not self._all_ack or not others:
            return max_offset
        frozen = min(stored, max_offset)
        if any(m not in connected or acks.get(m, -1) <= 0 for m in others):
            return frozen
        return max(frozen, min(max_offset, *(acks[m] for m in others)))

    def acked_up_to(self, acks: Mapping[int, int], ack_nums: int) -> int:
        """The highest `next_offset` that `acked_enough` accepts with these acks (`EVERY_OFFSET`
        when nothing is waited for; below 0 when not even offset 0 is acked): the rule is monotone
        in the offset, so the acks are read once for every waiting put, not once per put."""
        if ack_nums == ALL_ACK:
            return min((acks.get(m, -1) for m in self._union - {self.self_id}), default=EVERY_OFFSET)
        if ack_nums <= 1:
            return EVERY_OFFSET
        durable = sorted((acks.get(m, -1) for m in self._durable - {self.self_id}), reverse=True)
        return durable[ack_nums - 2] if len(durable) >= ack_nums - 1 else -1

    def acked_enough(self, next_offset: int, acks: Mapping[int, int], ack_nums: int) -> bool:
        """Whether a put ending at `next_offset` has the acks it waits for (reference §4.6).

        ALL_ACK: every other member of the effective set. 0 or 1: the master alone. n >= 2: the
        master plus n - 1 distinct durable members (learners and non-members do not count
        toward durability: they are never elected)."""
        if ack_nums == ALL_ACK:
            return all(acks.get(m, -1) >= next_offset for m in self._union - {self.self_id})
        if ack_nums <= 1:
            return True
        count = 1 + sum(1 for m in self._durable - {self.self_id} if acks.get(m, -1) >= next_offset)
        return count >= ack_nums
