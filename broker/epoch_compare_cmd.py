"""`brokergroup admin compare-epochs`: two replicas' epoch caches, their shared epochs and the
consistent point (`broker.epoch_compare`), read live or from copied files.

A replica is either a broker's HTTP address (`http://host:port`: its `GET /v1/status` gives role,
offsets and epochs) or a path: a broker's data directory, its `store/` directory, or the
`epochFileCheckpoint` file itself. From files the epochs come from `epochFileCheckpoint` (or its
`.bak`, as the broker reads them), the confirm offset from `confirm.checkpoint` (optional), the
log's extent from the segment files under `commitlog/` (optional; their bytes on disk before
recovery, a pending `truncate.marker` applied). Nothing is written: a running broker's directory
can be read too, at the price of a snapshot that may be a moment stale.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console
from rich.table import Table

from brokergroup.broker.epoch_compare import Comparison, Replica, compare, parse_entries, wire
from brokergroup.broker.errors import EpochFileError
from brokergroup.broker.store.checkpoint import decode_checkpoint
from brokergroup.broker.store.epoch import OPEN, EpochFile
from brokergroup.broker.store.message_store import COMMITLOG_DIR, CONFIRM_FILE, EPOCH_FILE
from brokergroup.broker.store.segments import MARKER_NAME, data_size

_SEGMENT = re.compile(r"[0-9]{20}")
_MARKER = re.compile(rb"([0-9]{1,19})\n[0-9]{1,10}\n")


class SourceError(Exception):
    """A replica could not be read; the message names the source and what was wrong."""


def add_parser(cmds: Any) -> None:
    help_text = (
        "compare two replicas' epoch caches (live brokers or copied data directories): their shared epochs "
        "and the consistent point a slave would truncate to"
    )
    p: argparse.ArgumentParser = cmds.add_parser("compare-epochs", help=help_text, description=help_text)
    p.add_argument("--a", dest="a", required=True, metavar="URL|DIR", help="a broker http://host:port or a data dir")
    p.add_argument("--b", dest="b", required=True, metavar="URL|DIR", help="the other replica, likewise")
    p.add_argument(
        "--master",
        choices=["a", "b"],
        help="which one plays the master (default: a live master, else the newer last epoch, else a)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for a live broker (default 5)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.timeout <= 3600:
        print(
            f"brokergroup admin compare-epochs: --timeout must be within (0, 3600] seconds (got {args.timeout})",
            file=sys.stderr,
        )
        return 2
    try:
        a, b = asyncio.run(_load_both(args.a, args.b, args.timeout))
        result = compare(a, b, master=args.master)
    except (SourceError, ValueError) as exc:
        print(f"brokergroup admin compare-epochs: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(wire(result), indent=2, sort_keys=True))
    else:
        render(Console(), result)
    return 0


async def _load_both(a: str, b: str, timeout: float) -> tuple[Replica, Replica]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
        return await load(a, http), await load(b, http)


async def load(source: str, http: aiohttp.ClientSession) -> Replica:
    if source.startswith(("http://", "https://")):
        return await load_live(source, http)
    return load_files(source)


async def load_live(url: str, http: aiohttp.ClientSession) -> Replica:
    status_url = url.rstrip("/") + "/v1/status"
    try:
        async with http.get(status_url) as response:
            raw = await response.read()
            if response.status != 200:
                raise SourceError(f"{status_url} answered HTTP {response.status}: {raw[:200]!r}")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise SourceError(f"cannot reach {status_url}: {str(exc) or type(exc).__name__}") from None
    try:
        return _replica_of_status(url, json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise SourceError(
            f"{status_url} did not answer like a broker's /v1/status ({type(exc).__name__}: {exc}): {raw[:120]!r}"
        ) from None


def _int(value: Any, what: str) -> int:
    if type(value) is not int:
        raise TypeError(f"{what} must be an integer, got {value!r}")
    return value


def _replica_of_status(url: str, body: Any) -> Replica:
    store = body["store"]
    rows = store["epochs"]
    if not isinstance(rows, list):
        raise TypeError(f"store.epochs must be a list, got {rows!r}")
    confirm, role, broker_id = store.get("confirmOffset"), body.get("role"), body.get("brokerId")
    return Replica(
        source=url,
        entries=parse_entries(url, rows),
        max_offset=_int(store["maxOffset"], "store.maxOffset"),
        min_offset=_int(store["minOffset"], "store.minOffset"),
        confirm_offset=confirm if type(confirm) is int else None,
        role=role if isinstance(role, str) else None,
        broker_id=broker_id if type(broker_id) is int else None,
    )


def _store_dir(source: str) -> tuple[Path, Path]:
    """(store directory, epoch file) for a data dir, a store dir or the epoch file itself."""
    path = Path(source)
    if not path.exists():
        raise SourceError(f"{source}: no such file or directory (give http://host:port, a data dir or its store/)")
    if path.is_file():
        return path.parent, path
    for store in (path / "store", path):
        epoch_file = store / EPOCH_FILE
        if epoch_file.exists() or epoch_file.with_name(EPOCH_FILE + ".bak").exists():
            return store, epoch_file
    raise SourceError(
        f"{source}: holds no {EPOCH_FILE} (nor store/{EPOCH_FILE}): not a broker's data or store directory"
    )


def load_files(source: str) -> Replica:
    store, epoch_file = _store_dir(source)
    try:
        entries = EpochFile(epoch_file).read()
        confirm_path = store / CONFIRM_FILE
        confirm = decode_checkpoint(confirm_path.read_bytes()) if confirm_path.exists() else None
        extent = commit_log_extent(store / COMMITLOG_DIR)
    except EpochFileError as exc:
        raise SourceError(f"{epoch_file}: {exc}") from None
    except OSError as exc:
        raise SourceError(f"{source}: cannot read {exc.filename or ''}: {exc.strerror or exc}") from None
    min_offset, max_offset = extent if extent is not None else (0, None)
    return Replica(
        source=source,
        entries=tuple(entries),
        max_offset=max_offset,
        min_offset=min_offset,
        confirm_offset=confirm,
    )


def commit_log_extent(directory: Path) -> tuple[int, int] | None:
    """(min, max) offset of the segment files in `directory`; None when there is no such directory.

    Bytes on disk, before recovery: a torn tail the broker would cut on open is counted. A pending
    truncation marker is applied, as the broker applies it first thing on open.
    """
    if not directory.is_dir():
        return None
    segments = sorted(p for p in directory.iterdir() if _SEGMENT.fullmatch(p.name))
    if not segments:
        return 0, 0
    first, last = int(segments[0].name), int(segments[-1].name)
    max_offset = last + data_size(segments[-1])  # without the zeros a running broker writes ahead
    marker = directory / MARKER_NAME
    if marker.exists():
        match = _MARKER.fullmatch(marker.read_bytes())
        if match is None:
            raise SourceError(f"{marker} is damaged: cannot tell where an interrupted truncation stops")
        max_offset = min(max_offset, int(match[1]))
    return first, max(first, max_offset)


def _describe(r: Replica) -> str:
    role = f"{r.role} " if r.role else ""
    ident = f"broker {r.broker_id} " if r.broker_id is not None else ""
    log = f"[{r.min_offset}, {r.max_offset})" if r.max_offset is not None else f"[{r.min_offset}, ?)"
    confirm = f", confirm {r.confirm_offset}" if r.confirm_offset is not None else ""
    return f"{role}{ident}{r.source}: log {log}{confirm}"


def render(console: Console, c: Comparison) -> None:
    console.print(f"master: {_describe(c.master)} ({c.master_because})", highlight=False, soft_wrap=True)
    console.print(f"slave:  {_describe(c.slave)}", highlight=False, soft_wrap=True)
    table = Table(title="epochs")
    for column in ("epoch", "master start", "master end", "slave start", "slave end", "shared"):
        table.add_column(column)
    master = {e.epoch: (e.start_offset, end) for e, end in zip(c.master.entries, c.master.ends(), strict=True)}
    slave = {e.epoch: (e.start_offset, end) for e, end in zip(c.slave.entries, c.slave.ends(), strict=True)}
    shared = {x.epoch for x in c.shared}

    def cells(side: dict[int, tuple[int, int]], epoch: int) -> tuple[str, str]:
        if epoch not in side:
            return "-", "-"
        start, end = side[epoch]
        return str(start), "?" if end == OPEN else str(end)

    for epoch in sorted(master.keys() | slave.keys()):
        table.add_row(str(epoch), *cells(master, epoch), *cells(slave, epoch), "yes" if epoch in shared else "no")
    console.print(table)
    console.print(f"first difference: {c.first_difference or 'none'}", highlight=False, soft_wrap=True)
    point = "-" if c.point is None else str(c.point)
    console.print(f"consistent point: {point}; the slave {c.outcome.value}", highlight=False, soft_wrap=True)
    for reason in c.reasons:
        console.print(f"  - {reason}", highlight=False, soft_wrap=True)
