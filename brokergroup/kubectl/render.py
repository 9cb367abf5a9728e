"""A `GroupSnapshot` as text (rich tables; colours only when asked) or as JSON (pure)."""

from __future__ import annotations

import io
import json

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from brokergroup.kubectl.snapshot import BrokerSet, GroupSnapshot

WIDTH = 120


def _table(console: Console, *columns: str) -> Table:
    """kubectl-style columns; a rule under the header only on a terminal (plain text stays ASCII)."""
    style = box.SIMPLE_HEAD if console.is_terminal else None
    table = Table(box=style, show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, no_wrap=True, overflow="fold")
    return table


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _yes(flag: bool, bad_style: str) -> Text:
    return Text("yes", style="green") if flag else Text("no", style=bad_style)


def _set_lines(console: Console, entry: BrokerSet) -> None:
    head = Text(f"Set {entry.name}", style="bold")
    head.append(f"  master {_dash(entry.master)}", style="green" if entry.master else "red")
    head.append(f"  epoch {_dash(entry.master_epoch)}")
    head.append(f"  sync-state-set epoch {_dash(entry.sync_state_set_epoch)}")
    head.append(f"  ready {entry.ready}/{entry.desired}", style="" if entry.ready == entry.desired else "yellow")
    console.print(head)
    console.print(f"  sync-state-set: {', '.join(entry.sync_state_set) or '(empty)'}")
    table = _table(console, "POD", "BROKER-ID", "ROLE", "IN-SYNC", "ALIVE", "LAG", "FENCED")
    for r in entry.replicas:
        role = Text(r.role, style="bold green" if r.role == "master" else "")
        fenced = "-" if r.fenced is None else Text("yes", style="bold red") if r.fenced else Text("no")
        table.add_row(
            r.pod, _dash(r.broker_id), role, _yes(r.in_sync, "yellow"), _yes(r.alive, "red"), _dash(r.lag), fenced
        )
    if entry.replicas:
        console.print(Padding(table, (0, 0, 0, 2)))
    else:
        console.print("  replicas: not reported yet (the operator has no view of the controllers)")
    e = entry.last_election
    if e is None:
        console.print("  last election: none requested")
    else:
        line = Text(f"  last election: {e.result}", style="green" if e.result == "Elected" else "yellow")
        line.append(f" request {e.request}")
        if e.target:
            line.append(f" target {e.target}")
        line.append(f" epoch {_dash(e.master_epoch)} at {_dash(e.time)}")
        if e.reason:
            line.append(f" ({e.reason}{': ' + e.message if e.message else ''})")
        console.print(line)
    roll = entry.rollout
    if roll is None:
        console.print("  rollout: up to date")
    else:
        console.print(
            Text(
                f"  rollout: {roll.step} pod {_dash(roll.pod)} updated {_dash(roll.updated_replicas)}/{entry.desired}"
                + (f": {roll.message}" if roll.message else ""),
                style="yellow",
            )
        )


def text(snapshot: GroupSnapshot, *, colour: bool = False, width: int = WIDTH) -> str:
    """The status report; the same snapshot always gives the same text (colour=False has no escapes)."""
    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        color_system="standard" if colour else None,
        force_terminal=colour,
        no_color=not colour,
        highlight=False,
        soft_wrap=True,
        emoji=False,
    )
    head = Text(f"BrokerGroup {snapshot.namespace}/{snapshot.name}", style="bold")
    head.append(f"  phase {snapshot.phase}")
    head.append(f"  paused {'yes' if snapshot.paused else 'no'}", style="yellow" if snapshot.paused else "")
    console.print(head)
    if snapshot.pending_election:
        console.print(Text(f"election requested, waiting for the operator: {snapshot.pending_election}", "yellow"))
    console.print()
    if not snapshot.sets:
        console.print("No broker sets in status yet (the operator has not reconciled this group).")
    for entry in snapshot.sets:
        _set_lines(console, entry)
        console.print()
    console.print(Text("Conditions", style="bold"))
    conditions = _table(console, "TYPE", "STATUS", "REASON", "MESSAGE")
    for c in snapshot.conditions:
        good = (c.status == "True") != (c.type in {"ReconciliationPaused", "Degraded"})
        conditions.add_row(c.type, Text(c.status, style="green" if good else "yellow"), c.reason, c.message)
    console.print(Padding(conditions, (0, 0, 0, 2)) if snapshot.conditions else "  none")
    console.print()
    console.print(Text("Controllers", style="bold"))
    nodes = _table(console, "POD", "NODE", "RAFT", "LEADER", "TERM", "COMMIT", "SERVING", "ERROR")
    for n in snapshot.controllers:
        if n.error is not None:
            nodes.add_row(n.pod, "-", Text("unreachable", style="red"), "-", "-", "-", "-", Text(n.error, style="red"))
            continue
        raft = Text("leader", style="bold green") if n.raft_leader else Text("follower")
        serving = "-" if n.serving is None else ("yes" if n.serving else "no")
        nodes.add_row(n.pod, _dash(n.node_id), raft, _dash(n.leader_id), _dash(n.term), _dash(n.commit_index), serving)
    console.print(Padding(nodes, (0, 0, 0, 2)) if snapshot.controllers else "  none")
    # rich pads the last column; trailing blanks would make the golden output fragile.
    return "\n".join(line.rstrip() for line in out.getvalue().split("\n"))


def as_json(snapshot: GroupSnapshot) -> str:
    return json.dumps(snapshot.to_json(), indent=2, sort_keys=True) + "\n"
