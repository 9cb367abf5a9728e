"""An exhaustive model check of the sync-state-set protocol (issue 22), driving the real pure cores.

The state machine: one broker set of three replicas; a master with the real
`SyncStateSetManager` (acks, confirm offset, shrink, expand, proposals); the real controller core
(`alter_sync_state_set`, `elect_master`, `apply_events`, `get_replica_info`) with a heartbeat table
that is as stale as the model lets it be; the role manager's reporting policy (one
alter-sync-state-set in flight at a time, as `broker/role.py` serialises them with a lock).

Actions, in every order up to the bounds (`Bounds`):

- `put`: a client write; refused before writing below `min_in_sync_replicas` (`check_put`);
  waits for the acks the manager asks for;
- `replicate(s)`: slave `s` connects (truncating to the master's history after a failover),
  copies one entry, or re-acks when caught up; the master then runs its ack path
  (`update_caught_up`, `maybe_expand`);
- `disconnect(s)`: the master sees `s`'s connection close (`maybe_shrink`);
- `send`: the role sends its oldest queued proposal; the controller computes and commits at
  once (its per-set lock and version check make that atomic); the reply is in flight;
- `reply` / `lose_reply`: the master gets the reply (or never does, and re-reads instead);
- `read` / `read_reply`: the periodic replica-info read, computed now, delivered later;
- `heartbeat(b)`: the controller's table gets `b`'s epoch and max offset (elections rank by it);
- `crash`: the master dies; the controller elects from its table.

After every action the master recomputes its confirm offset and releases the puts acked enough,
as `HAService._changed` does. Checked in every reachable state: every acknowledged put and every
entry under a confirm offset (readable by consumers) is held by every live member of the
controller's sync-state-set (anyone the election may pick), and by any master it elects.

Modelling assumptions (stated, not checked): logs survive a crash; an entry is identified by the
epoch and position it was written at, so truncation keeps exactly the common prefix; clocks do not
advance (a disconnected member is unhealthy at once, a never-connected one stays in its grace).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from brokergroup.broker.ha.syncset import ALL_ACK, SyncStateSetManager
from brokergroup.broker.role import REFUSALS
from brokergroup.controller import core
from brokergroup.controller.model import BrokerLiveInfo, ControllerState, LivenessView
from brokergroup.controller.protocol import (
    AlterSyncStateSetRequest,
    AlterSyncStateSetResponse,
    ApplyIdRequest,
    ElectMasterRequest,
    RegisterRequest,
)

NAME, CLUSTER = "broker-a", "cluster-m"
BROKERS = (1, 2, 3)
T = TypeVar("T")
Entry = tuple[int, int]
"""(master epoch it was written at, position): what a log holds."""


class Manager(Protocol):
    """The manager surface the model drives (today's, or a variant under test)."""

    @property
    def local(self) -> frozenset[int]: ...

    @property
    def local_epoch(self) -> int: ...

    @property
    def synchronizing(self) -> bool: ...

    @property
    def latest_proposal(self) -> frozenset[int] | None: ...

    def reset(self, members: frozenset[int], epoch: int, *, now_ms: int) -> None: ...

    def confirm(self, members: frozenset[int], epoch: int) -> bool: ...

    def in_sync_replicas_nums(self) -> int: ...

    def update_caught_up(self, slave_id: int, time_ms: int) -> None: ...

    def maybe_shrink(self, now_ms: int, connected: frozenset[int]) -> frozenset[int] | None: ...

    def maybe_expand(
        self, slave_id: int, slave_max_offset: int, *, confirm_offset: int, last_epoch_start: int, is_learner: bool
    ) -> frozenset[int] | None: ...

    def compute_confirm_offset(
        self, max_offset: int, acks: dict[int, int], connected: frozenset[int], stored: int
    ) -> int: ...

    def acked_enough(self, next_offset: int, acks: dict[int, int], ack_nums: int) -> bool: ...


@dataclasses.dataclass(frozen=True)
class Policy:
    """The role manager's reporting rules (`broker/role.py`), as the model needs them."""

    make_manager: Callable[[int], Manager]
    send_with_proposal_epoch: bool = True
    """Today: a proposal is sent with the epoch it was made at, and dropped if a newer one came
    in meanwhile. Before issue 22: sent with whatever epoch the master knew at send time."""
    settle_refusals: bool = True
    """Today: a definitive refusal (`REFUSALS`) settles the proposal; else the master re-reads."""


def todays_manager(broker_id: int) -> Manager:
    return SyncStateSetManager(broker_id, max_time_slave_not_catchup_ms=1000, all_ack=True)


TODAY = Policy(make_manager=todays_manager)


@dataclasses.dataclass(frozen=True)
class Bounds:
    puts: int = 2
    crashes: int = 1
    lost_replies: int = 1
    disconnects: int = 1
    min_in_sync_replicas: int = 2


@dataclasses.dataclass
class World:
    logs: dict[int, tuple[Entry, ...]]
    alive: frozenset[int]
    master: int | None
    master_epoch: int
    term_start: int
    """The master's log length when its term began (the current epoch's start offset)."""
    manager: Manager | None
    confirm: dict[int, int]
    acks: dict[int, int]
    connected: frozenset[int]
    controller: ControllerState
    heartbeats: dict[int, tuple[int, int]]
    """broker -> (epoch, max offset) as the controller last heard it."""
    min_in_sync_replicas: int
    queue: tuple[tuple[frozenset[int], int, int], ...] = ()
    """Proposals the role has yet to send: (set, epoch when made, confirm offset when made)."""
    alter_reply: tuple[Any, ...] | None = None
    read_reply: tuple[int | None, int, frozenset[int], int] | None = None
    waiting: tuple[int, ...] = ()
    """Puts waiting for acks, by the log offset they end at."""
    acked: frozenset[Entry] = frozenset()
    consumable: frozenset[Entry] = frozenset()
    puts: int = 0
    crashes: int = 0
    lost: int = 0
    disconnects: int = 0

    def clone(self) -> World:
        """A copy to act on: what the actions mutate is copied, the rest is shared (faster than deepcopy).

        The controller's replica info never changes after the set-up; its sync-state info does."""
        sync = _shallow(self.controller.sync_state_info[NAME])
        sync.sync_state_set = set(sync.sync_state_set)
        world = _shallow(self)
        world.controller = ControllerState(replica_info=self.controller.replica_info, sync_state_info={NAME: sync})
        if self.manager is not None:
            manager = world.manager = _shallow(self.manager)
            for name, value in vars(manager).items():
                if isinstance(value, (dict, list, set)):
                    setattr(manager, name, copy.copy(value))
        world.logs, world.confirm, world.acks = dict(self.logs), dict(self.confirm), dict(self.acks)
        world.heartbeats = dict(self.heartbeats)
        return world

    def key(self) -> tuple[Any, ...]:
        """What identifies a state (dicts keep their insertion order across clones: no sorting)."""
        sync = self.controller.sync_state_info[NAME]
        mgr = () if self.manager is None else tuple(map(_freeze, vars(self.manager).values()))
        return (
            tuple(self.logs.values()),
            self.alive,
            self.master,
            self.master_epoch,
            self.term_start,
            mgr,
            tuple(self.confirm.values()),
            frozenset(self.acks.items()),
            self.connected,
            (sync.master_broker_id, sync.master_epoch, sync.sync_state_set_epoch, frozenset(sync.sync_state_set)),
            tuple(self.heartbeats.values()),
            self.queue,
            self.alter_reply,
            self.read_reply,
            self.waiting,
            self.acked,
            self.consumable,
            self.puts,
            self.crashes,
            self.lost,
            self.disconnects,
        )


def _shallow(obj: T) -> T:
    """`copy.copy` for plain objects, without its reduce protocol (the search's hot path)."""
    clone = object.__new__(type(obj))
    clone.__dict__.update(obj.__dict__)
    return clone


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return frozenset(value.items())
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, set):
        return frozenset(value)
    return value


def initial(policy: Policy, min_in_sync_replicas: int) -> World:
    state = ControllerState()
    for broker_id in BROKERS:
        check = f"127.0.0.1:{10000 + broker_id};1"
        request = ApplyIdRequest(
            cluster_name=CLUSTER, broker_name=NAME, applied_broker_id=broker_id, register_check_code=check
        )
        core.apply_events(state, core.apply_broker_id(state, request).events)
        register = RegisterRequest(
            cluster_name=CLUSTER, broker_name=NAME, broker_id=broker_id, broker_address=f"127.0.0.1:{10000 + broker_id}"
        )
        core.apply_events(state, core.register_broker(state, register, LivenessView()).events)
    world = World(
        logs=dict.fromkeys(BROKERS, ()),
        alive=frozenset(BROKERS),
        master=None,
        master_epoch=0,
        term_start=0,
        manager=None,
        confirm=dict.fromkeys(BROKERS, 0),
        acks={},
        connected=frozenset(),
        controller=state,
        heartbeats=dict.fromkeys(BROKERS, (0, 0)),
        min_in_sync_replicas=min_in_sync_replicas,
    )
    elected = core.elect_master(
        state, ElectMasterRequest(broker_name=NAME, broker_id=1), _live(world), enable_elect_unclean_master=False
    )
    core.apply_events(state, elected.events)
    _become_master(world, policy, 1)
    return world


def _live(world: World) -> LivenessView:
    infos = {
        (NAME, b): BrokerLiveInfo(
            cluster_name=CLUSTER,
            broker_name=NAME,
            broker_id=b,
            broker_addr=f"127.0.0.1:{10000 + b}",
            last_update_ms=0,
            heartbeat_timeout_ms=10_000,
            epoch=world.heartbeats[b][0],
            max_offset=world.heartbeats[b][1],
            confirm_offset=-1,
            election_priority=0,
        )
        for b in sorted(world.alive)
    }
    return LivenessView(brokers=infos)


def _become_master(world: World, policy: Policy, broker_id: int) -> None:
    sync = world.controller.sync_state_info[NAME]
    world.master, world.master_epoch = broker_id, sync.master_epoch
    world.term_start = len(world.logs[broker_id])
    world.manager = policy.make_manager(broker_id)
    world.manager.reset(frozenset(sync.sync_state_set), sync.sync_state_set_epoch, now_ms=0)
    world.acks, world.connected, world.queue, world.waiting = {}, frozenset(), (), ()
    world.alter_reply = world.read_reply = None


# ---- the master's reactions (HAService) -------------------------------------------------------------


def _changed(world: World) -> None:
    """`HAService._changed`: a new confirm offset, then release the puts acked enough."""
    master, mgr = world.master, world.manager
    if master is None or mgr is None:
        return
    log = world.logs[master]
    acks = {s: a for s, a in world.acks.items() if s in world.connected}
    confirm = mgr.compute_confirm_offset(len(log), acks, world.connected, world.confirm[master])
    if confirm > world.confirm[master]:
        world.confirm[master] = confirm
    world.consumable |= frozenset(log[: world.confirm[master]])
    still = []
    for offset in world.waiting:
        if mgr.acked_enough(offset, acks, ALL_ACK):
            if mgr.in_sync_replicas_nums() >= world.min_in_sync_replicas:  # the after-append check
                world.acked |= {log[offset - 1]}
        else:
            still.append(offset)
    world.waiting = tuple(still)


def _propose(world: World, proposal: frozenset[int] | None) -> None:
    """`HAService._propose` -> `RoleManager.on_sync_state_set_change`: queue with today's epoch and confirm."""
    if proposal is None or world.manager is None or world.master is None:
        return
    world.queue += ((proposal, world.manager.local_epoch, world.confirm[world.master]),)


# ---- actions --------------------------------------------------------------------------------------------


def actions(world: World, policy: Policy, bounds: Bounds) -> Iterator[tuple[str, Callable[[World], None]]]:
    master = world.master
    if master is None:
        return
    mgr = world.manager
    assert mgr is not None
    if world.puts < bounds.puts and mgr.in_sync_replicas_nums() >= bounds.min_in_sync_replicas:

        def put(w: World) -> None:
            entry = (w.master_epoch, len(w.logs[master]))
            w.logs[master] += (entry,)
            w.puts += 1
            w.waiting += (len(w.logs[master]),)

        yield "put", put
    base = mgr.latest_proposal or mgr.local
    for s in sorted(world.alive - {master}):
        if world.logs[s] != world.logs[master] or s not in base:  # a re-ack that could not propose: no-op
            yield f"replicate({s})", lambda w, s=s: _replicate(w, s)
        if s in world.connected and world.disconnects < bounds.disconnects:
            yield f"disconnect({s})", lambda w, s=s: _disconnect(w, s)
    if world.queue and world.alter_reply is None:
        yield "send", lambda w: _send(w, policy)
    if world.alter_reply is not None:
        yield "reply", lambda w: _reply(w, policy)
        if world.lost < bounds.lost_replies:
            yield "lose_reply", _lose_reply
    if world.read_reply is None:
        if mgr.synchronizing:  # otherwise the controller holds the local set: a read changes nothing
            yield "read", _read
    else:
        yield "read_reply", _read_reply
    for b in sorted(world.alive - {master}):  # the master's own heartbeat ranks nobody while it lives
        if world.heartbeats[b] != (_last_epoch(world, b), len(world.logs[b])):
            yield f"heartbeat({b})", lambda w, b=b: _heartbeat(w, b)
    if world.crashes < bounds.crashes:
        yield "crash", lambda w: _crash(w, policy)


def _last_epoch(world: World, b: int) -> int:
    log = world.logs[b]
    epoch = log[-1][0] if log else 0
    return max(epoch, world.master_epoch) if b == world.master else epoch


def _replicate(world: World, s: int) -> None:
    master, mgr = world.master, world.manager
    assert master is not None and mgr is not None
    mine, theirs = world.logs[s], world.logs[master]
    common = 0
    while common < min(len(mine), len(theirs)) and mine[common] == theirs[common]:
        common += 1
    if common < len(mine):
        world.logs[s] = mine[:common]  # truncate to the new master's history
    elif len(mine) < len(theirs):
        world.logs[s] = theirs[: len(mine) + 1]
    log = world.logs[s]
    world.confirm[s] = min(world.confirm[master], len(log))
    world.connected |= {s}
    world.acks[s] = len(log)
    if len(log) == len(theirs):  # caught up: the ack carries a catch-up time
        mgr.update_caught_up(s, 0)
        proposal = mgr.maybe_expand(
            s, len(log), confirm_offset=world.confirm[master], last_epoch_start=world.term_start, is_learner=False
        )
        _changed(world)
        _propose(world, proposal)
    else:
        _changed(world)


def _disconnect(world: World, s: int) -> None:
    assert world.manager is not None
    world.connected -= {s}
    world.acks.pop(s, None)
    world.disconnects += 1
    proposal = world.manager.maybe_shrink(0, world.connected)
    _changed(world)
    _propose(world, proposal)


def _send(world: World, policy: Policy) -> None:
    """`RoleManager._report` under its lock: send the oldest queued proposal; the controller
    computes and commits it at once."""
    master, mgr = world.master, world.manager
    assert master is not None and mgr is not None
    (proposal, made_at, confirm_offset), world.queue = world.queue[0], world.queue[1:]
    if policy.send_with_proposal_epoch:
        if made_at != mgr.local_epoch:
            return  # settled while it waited
        epoch = made_at
    else:
        epoch = mgr.local_epoch
    request = AlterSyncStateSetRequest(
        broker_name=NAME,
        master_broker_id=master,
        master_epoch=world.master_epoch,
        sync_state_set=sorted(proposal | {master}),
        sync_state_set_epoch=epoch,
        confirm_offset=confirm_offset,
    )
    result = core.alter_sync_state_set(world.controller, request, _live(world))
    core.apply_events(world.controller, result.events)
    if result.ok:
        assert isinstance(result.response, AlterSyncStateSetResponse)
        response = result.response
        world.alter_reply = ("ok", frozenset(response.sync_state_set), response.sync_state_set_epoch)
    else:
        world.alter_reply = ("refused", result.code, proposal, epoch)


def _reply(world: World, policy: Policy) -> None:
    mgr = world.manager
    assert mgr is not None and world.alter_reply is not None
    reply, world.alter_reply = world.alter_reply, None
    if reply[0] == "ok":
        mgr.confirm(reply[1], reply[2])
    elif policy.settle_refusals and reply[1] in REFUSALS:
        refused = getattr(mgr, "refused", None)
        if refused is not None:
            refused(reply[2], reply[3])
    elif world.read_reply is None:
        _read(world)  # the role pokes a re-read
    _changed(world)


def _lose_reply(world: World) -> None:
    world.alter_reply = None
    world.lost += 1
    if world.read_reply is None:
        _read(world)  # the role pokes a re-read


def _read(world: World) -> None:
    result = core.get_replica_info(world.controller, NAME)
    body = result.response
    assert body is not None
    info = body.model_dump()
    world.read_reply = (
        info["master_broker_id"],
        info["master_epoch"],
        frozenset(info["sync_state_set"]),
        info["sync_state_set_epoch"],
    )


def _read_reply(world: World) -> None:
    """`RoleManager.sync_once` while master at the same master epoch: adopt the controller's view."""
    assert world.read_reply is not None and world.manager is not None
    (master, master_epoch, members, epoch), world.read_reply = world.read_reply, None
    if master == world.master and master_epoch == world.master_epoch:
        world.manager.confirm(members, epoch)
    _changed(world)


def _heartbeat(world: World, b: int) -> None:
    world.heartbeats[b] = (_last_epoch(world, b), len(world.logs[b]))


def _crash(world: World, policy: Policy) -> None:
    """The master dies; the controller (its heartbeat from it timed out) elects from its table."""
    old = world.master
    assert old is not None
    world.alive -= {old}
    world.crashes += 1
    world.master, world.manager = None, None
    request = ElectMasterRequest(broker_name=NAME, broker_id=-1)
    result = core.elect_master(world.controller, request, _live(world), enable_elect_unclean_master=False)
    core.apply_events(world.controller, result.events)
    sync = world.controller.sync_state_info[NAME]
    if result.ok and sync.master_broker_id is not None:
        new = sync.master_broker_id
        missing = (world.acked | world.consumable) - frozenset(world.logs[new])
        if missing:
            raise Violation(f"elected {new} without acked or consumed entries {sorted(missing)}")
        _become_master(world, policy, new)
        _changed(world)


# ---- the invariant and the search ------------------------------------------------------------------------


class Violation(AssertionError):
    pass


def check(world: World) -> None:
    sync = world.controller.sync_state_info[NAME]
    needed = world.acked | world.consumable
    for member in sorted(sync.sync_state_set & world.alive):
        missing = needed - frozenset(world.logs[member])
        if missing:
            raise Violation(
                f"controller's set {sorted(sync.sync_state_set)} (epoch {sync.sync_state_set_epoch}) has {member}, "
                f"which lacks acked or consumed entries {sorted(missing)}"
            )


@dataclasses.dataclass
class Outcome:
    states: int
    violation: str | None = None
    trace: tuple[str, ...] = ()


def explore(policy: Policy = TODAY, bounds: Bounds | None = None, *, max_states: int = 2_000_000) -> Outcome:
    """Breadth-first over every interleaving within `bounds`; the first violation, with the
    shortest trace to it."""
    bounds = bounds or Bounds()
    start = initial(policy, bounds.min_in_sync_replicas)
    seen = {start.key()}
    frontier: collections.deque[tuple[World, tuple[str, ...]]] = collections.deque([(start, ())])
    while frontier:
        world, trace = frontier.popleft()
        for name, act in actions(world, policy, bounds):
            nxt = world.clone()
            steps = (*trace, name)
            try:
                act(nxt)
                check(nxt)
            except Violation as exc:
                return Outcome(len(seen), str(exc), steps)
            key = nxt.key()
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > max_states:
                raise RuntimeError(f"more than {max_states} states: tighten the bounds")
            frontier.append((nxt, steps))
    return Outcome(len(seen))


# ---- the code before issue 22, kept to show that the search finds its bug ---------------------------------


class ForgetfulManager(SyncStateSetManager):
    """The manager before issue 22: a read at the local epoch that names the local set ended every
    pending proposal (it may have been computed before one of them was committed)."""

    def confirm(self, members: frozenset[int], epoch: int) -> bool:
        if epoch == self.local_epoch and members == self.local and self.synchronizing:
            self.reset_window()
            return True
        return super().confirm(members, epoch)

    def reset_window(self) -> None:
        self._settle_all()


def forgetful_manager(broker_id: int) -> Manager:
    return ForgetfulManager(broker_id, max_time_slave_not_catchup_ms=1000, all_ack=True)


BEFORE_ISSUE_22 = Policy(make_manager=forgetful_manager, send_with_proposal_epoch=False, settle_refusals=False)
"""The manager and the role's reporting before issue 22 (`git show 23f257f:broker/ha/syncset.py`)."""
