"""`brokergroup local status`: a cluster snapshot as tables (rendering is pure; `show` does I/O).

Three tables: the controllers (who leads, in which Raft term), the broker sets (master,
masterEpoch, sync-state-set as the controller holds it) and every replica (role,
masterEpoch, maxOffset, confirmOffset and lag behind its master, from each broker's own
/v1/status).
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from brokergroup.local import attach, snapshot
from brokergroup.local.snapshot import ClusterSnapshot, SetView
from brokergroup.local.state import ClusterState

ROLE_STYLE = {"master": "bold green", "slave": "cyan", "down": "red", "unreachable": "red", "none": "yellow"}


def headline(state: ClusterState, snap: ClusterSnapshot) -> Text:
    leader = snap.leader()
    who = f"controller leader {leader.name} (term {leader.term})" if leader else "no controller leader"
    return Text.assemble(
        (f"cluster {state.name}", "bold"),
        f" · profile {state.profile} · mode {state.mode} · {who}",
    )


def _table(title: str, columns: tuple[str, ...], *, left: tuple[str, ...] | None = None) -> Table:
    """A titled table; with `left`, only those columns are left-aligned and the rest right-aligned."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for column in columns:
        table.add_column(column, justify="left" if left is None or column in left else "right", no_wrap=True)
    return table


def controllers_table(snap: ClusterSnapshot) -> Table:
    table = _table("controllers", ("node", "api", "state", "term", "knows leader"))
    for c in snap.controllers:
        state = "unreachable" if c.status is None else "leader" if c.serving else "follower"
        style = {"leader": "bold green", "unreachable": "red"}.get(state, "")
        table.add_row(c.name, c.api, Text(state, style), _s(c.term), _s(c.leader_id))
    return table


def sets_table(snap: ClusterSnapshot) -> Table:
    table = _table("broker sets", ("set", "master", "masterEpoch", "sync-state-set", "sssEpoch"))
    for s in snap.sets:
        if s.info is None:
            table.add_row(s.name, Text("unknown to the controller", "yellow"), "-", "-", "-")
            continue
        members = [f"{r.broker_id}{'' if r.alive else ' (dead)'}" for r in s.info.in_sync_replicas]  # broker ids
        table.add_row(
            s.name,
            master_name(s),
            str(s.info.master_epoch),
            ", ".join(members) or "-",
            str(s.info.sync_state_set_epoch),
        )
    return table


def replicas_table(snap: ClusterSnapshot) -> Table:
    columns = ("replica", "id", "role", "epoch", "maxOffset", "confirmOffset", "lag")
    table = _table("replicas", columns, left=("replica", "role"))
    for s in snap.sets:
        for r in s.replicas:
            table.add_row(
                r.name,
                _s(r.broker_id),
                Text(r.role, ROLE_STYLE.get(r.role, "")),
                _s(r.master_epoch),
                _s(r.store("maxOffset")),
                _s(r.store("confirmOffset")),
                _s(s.lag(r)) if r.status is not None else "-",
            )
    table.caption = "epoch: master epoch followed; lag: bytes behind the master"
    return table


def masters_table(snap: ClusterSnapshot) -> Table:
    """The short table `local up` prints: one row per set."""
    table = _table("masters", ("set", "master", "api", "masterEpoch", "in sync"))
    for s in snap.sets:
        m = s.master()
        table.add_row(
            s.name,
            master_name(s),
            m.api if m else "-",
            _s(s.info.master_epoch if s.info else None),
            str(s.in_sync_alive()),
        )
    return table


def render(state: ClusterState, snap: ClusterSnapshot) -> Group:
    return Group(headline(state, snap), controllers_table(snap), sets_table(snap), replicas_table(snap))


def master_name(s: SetView) -> Text:
    if s.info is None or s.info.master_address is None:
        return Text("none", "bold red")
    name = replica_name(s, s.info.master_address)
    if s.master() is None:
        return Text(f"{name} (not serving)", "yellow")
    return Text(name, "bold green")


def replica_name(s: SetView, address: str | None) -> str:
    return next((r.name for r in s.replicas if r.api == address), address or "?")


def _s(value: object) -> str:
    return "-" if value is None else str(value)


async def take(state: ClusterState) -> ClusterSnapshot:
    async with aiohttp.ClientSession(timeout=snapshot.STATUS_TIMEOUT) as session:
        return await snapshot.take(state, session=session, alive=attach.alive)


def show(state: ClusterState, console: Console, *, watch: bool, interval: float = 1.0) -> None:
    """Print the tables once, or keep them live until Ctrl-C."""
    if not watch:
        console.print(render(state, asyncio.run(take(state))))
        return

    async def loop() -> None:
        with Live(console=console, auto_refresh=False) as live:
            while True:
                live.update(render(state, await take(state)), refresh=True)
                await asyncio.sleep(interval)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(loop())
