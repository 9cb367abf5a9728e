"""`brokergroup admin`: mqadmin's controller commands, with mqadmin's options.

Each command prints a readable table, or JSON with `--json`. The admin token comes from
`--token` or `BG_ADMIN_TOKEN`. `-a` takes one controller address or several separated by
`;`; any node answers because followers forward to the leader.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from rich.console import Console
from rich.table import Table

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError, ResponseCode

Command = Callable[[argparse.Namespace, ControllerClient], Awaitable[Any]]


def _addresses(text: str) -> list[str]:
    addresses = [a.strip() for a in text.split(";") if a.strip()]
    if not addresses:
        raise ValueError("-a needs at least one controller address host:port")
    return addresses


def add_parser(sub: Any) -> None:
    admin = sub.add_parser("admin", help="controller admin commands (mqadmin's controller commands)")
    cmds = admin.add_subparsers(dest="admin_command", metavar="ADMIN_COMMAND", required=True)

    def command(name: str, help_text: str, fn: Command) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = cmds.add_parser(name, help=help_text, description=help_text)
        p.add_argument(
            "-a",
            "--controller-address",
            dest="address",
            required=True,
            help="controller address(es) host:port, ';'-separated",
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        p.add_argument("--token", default=os.environ.get("BG_ADMIN_TOKEN"), help="admin token (env BG_ADMIN_TOKEN)")
        p.add_argument(
            "--timeout",
            type=_seconds,
            default=10.0,
            help="seconds each command may take; a hung controller node is skipped within it (default 10)",
        )
        p.set_defaults(func=run, admin_fn=fn)
        return p

    command("get-controller-metadata", "show the controller group, its leader and peers", get_metadata)
    p = command("get-sync-state-set", "show master, epochs and sync-state-set of broker sets", get_sync_state_set)
    p.add_argument("-b", "--broker-name", dest="broker_name", help="broker set name(s), ','-separated")
    p.add_argument("-c", "--cluster-name", dest="cluster_name", help="every broker set of this cluster")
    p.add_argument("-i", "--interval", type=float, help="repeat every N seconds until interrupted")
    p = command("elect-master", "elect a designated broker as master (admin-triggered)", elect_master)
    p.add_argument("-b", "--broker-id", dest="broker_id", type=int, required=True, help="broker id to elect")
    p.add_argument("-bn", "--broker-name", dest="broker_name", required=True, help="broker set name")
    p.add_argument("-c", "--cluster-name", dest="cluster_name", required=True, help="cluster name")
    p = command("clean-broker-metadata", "remove broker ids (or a whole set) from the controller", clean_metadata)
    p.add_argument("-bn", "--broker-name", dest="broker_name", required=True, help="broker set name")
    p.add_argument("-b", "--broker-ids", dest="broker_ids", help="broker ids to clean, ';'-separated: '1;2'")
    p.add_argument("-c", "--cluster-name", dest="cluster_name", help="cluster name (required unless -l)")
    p.add_argument(
        "-l",
        "--clean-living-broker",
        dest="clean_living",
        action="store_true",
        help="also clean living brokers (ignores -b: the whole set is removed)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="clean the ids even if that empties the sync-state-set while other replicas remain (refused without)",
    )
    p = command("get-broker-epoch", "show each replica's epoch entries, asked from the brokers", get_broker_epoch)
    p.add_argument("-b", "--broker-name", dest="broker_name", help="broker set name(s), ','-separated")
    p.add_argument("-c", "--cluster-name", dest="cluster_name", help="every broker set of this cluster")
    from brokergroup.broker import epoch_compare_cmd  # asks brokers or reads files, never a controller

    epoch_compare_cmd.add_parser(cmds)
    command("get-controller-config", "show each node's config", get_config)
    p = command("update-controller-config", "change one config key on each node", update_config)
    p.add_argument("-k", "--key", required=True, help="config key, e.g. enableElectUncleanMaster")
    p.add_argument("-v", "--value", required=True, help="new value")


def run(args: argparse.Namespace) -> int:
    console = Console()
    try:
        addresses = _addresses(args.address)
    except ValueError as exc:
        print(f"brokergroup admin: {exc}", file=sys.stderr)
        return 2
    if args.admin_command == "clean-broker-metadata" and not args.clean_living and not args.cluster_name:
        print(
            "brokergroup admin clean-broker-metadata: -c/--cluster-name is required unless -l is given",
            file=sys.stderr,
        )
        return 2

    async def go() -> Any:
        async with ControllerClient(addresses, token=args.token, timeout=args.timeout) as client:
            return await args.admin_fn(args, client)

    try:
        while True:
            result = asyncio.run(go())
            if args.json:
                print(json.dumps(result, indent=2, sort_keys=True))
            else:
                render(console, args.admin_command, result)
            interval = getattr(args, "interval", None)
            if not interval:
                return 0
            asyncio.run(asyncio.sleep(interval))
    except ControllerError as exc:
        print(
            f"brokergroup admin {args.admin_command}: command failed: {exc.code.name} ({int(exc.code)}): {exc.remark}",
            file=sys.stderr,
        )
        return 1


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout must be a number of seconds (got {text!r})") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"--timeout must be within (0, 3600] seconds (got {text})")
    return value


async def get_metadata(_args: argparse.Namespace, client: ControllerClient) -> Any:
    return (await client.metadata()).wire()  # the first node to answer: a hung one is skipped


async def _broker_names(args: argparse.Namespace, client: ControllerClient) -> list[str]:
    names = [n for n in (args.broker_name or "").split(",") if n]
    if args.cluster_name:
        state = await client.state()
        names += [n for n, s in state["state"]["syncStateInfo"].items() if s["clusterName"] == args.cluster_name]
    if not names:
        raise ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, "give -b broker names or -c a cluster name")
    return sorted(set(names))


async def get_sync_state_set(args: argparse.Namespace, client: ControllerClient) -> Any:
    return (await client.sync_state_data(await _broker_names(args, client))).wire()


async def get_broker_epoch(args: argparse.Namespace, client: ControllerClient) -> Any:
    data = await client.sync_state_data(await _broker_names(args, client))
    out: dict[str, Any] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        for name, info in sorted(data.replicas_info_table.items()):
            for replica in info.in_sync_replicas + info.not_in_sync_replicas:
                key = f"{name}/{replica.broker_id}"
                try:
                    async with http.get(f"http://{replica.broker_address}/v1/epochs") as r:
                        out[key] = await r.json() if r.status == 200 else {"error": f"HTTP {r.status}"}
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    out[key] = {"error": f"{replica.broker_address}: {str(exc) or type(exc).__name__}"}
    return out


async def elect_master(args: argparse.Namespace, client: ControllerClient) -> Any:
    req = protocol.ElectMasterRequest(
        cluster_name=args.cluster_name,
        broker_name=args.broker_name,
        broker_id=args.broker_id,
        designate_elect=True,
    )
    return (await client.elect_master(req)).wire()


async def clean_metadata(args: argparse.Namespace, client: ControllerClient) -> Any:
    req = protocol.CleanBrokerDataRequest(
        cluster_name=args.cluster_name,
        broker_name=args.broker_name,
        broker_controller_ids_to_clean=args.broker_ids,
        is_clean_living_broker=args.clean_living,
        force=args.force,
    )
    await client.clean_broker_data(req)
    return {"result": f"clear broker {args.broker_name} metadata from controller success!"}


async def _each_node(client: ControllerClient, fn: Callable[[str], Awaitable[Any]]) -> dict[str, Any]:
    """`fn` on every node at once; a node that fails or hangs shows as {"error": ...}."""
    answers = await asyncio.gather(*(fn(addr) for addr in client.addresses), return_exceptions=True)
    out: dict[str, Any] = {}
    for addr, answer in zip(client.addresses, answers, strict=True):
        if isinstance(answer, ControllerError):
            out[addr] = {"error": f"{answer.code.name}: {answer.remark}"}
        elif isinstance(answer, BaseException):
            raise answer
        else:
            out[addr] = answer
    return out


async def get_config(_args: argparse.Namespace, client: ControllerClient) -> Any:
    return await _each_node(client, lambda addr: client.get_config(address=addr))


async def update_config(args: argparse.Namespace, client: ControllerClient) -> Any:
    out = await _each_node(client, lambda addr: client.update_config({args.key: args.value}, address=addr))
    failed = {addr: r["error"] for addr, r in out.items() if isinstance(r, dict) and set(r) == {"error"}}
    if failed:
        done = sorted(set(out) - set(failed)) or ["none"]
        raise ControllerError(
            ResponseCode.SYSTEM_ERROR,
            f"{args.key} changed on {', '.join(done)}; not on "
            + "; ".join(f"{addr} ({error})" for addr, error in sorted(failed.items())),
        )
    return out


def render(console: Console, command: str, result: Any) -> None:
    if command == "get-sync-state-set":
        for name, info in sorted(result["replicasInfoTable"].items()):
            table = Table(
                title=f"{name}: master {info['masterBrokerId']} @ {info['masterAddress']}, "
                f"masterEpoch {info['masterEpoch']}, syncStateSetEpoch {info['syncStateSetEpoch']}"
            )
            for col in ("brokerId", "address", "inSync", "alive"):
                table.add_column(col)
            for key, in_sync in (("inSyncReplicas", True), ("notInSyncReplicas", False)):
                for r in info[key]:
                    table.add_row(str(r["brokerId"]), str(r["brokerAddress"]), str(in_sync), str(r["alive"]))
            console.print(table)
        return
    if command == "get-broker-epoch":
        for key, body in result.items():
            table = Table(title=f"{key} @ {body.get('brokerAddr', '?')}")
            table.add_column("epoch")
            table.add_column("startOffset")
            table.add_column("endOffset")
            if "error" in body:
                table.add_row("-", "-", body["error"])
            for e in body.get("epochs", []):
                table.add_row(str(e["epoch"]), str(e["startOffset"]), str(e["endOffset"]))
            console.print(table)
        return
    if command in ("get-controller-config", "update-controller-config"):
        for addr, config in result.items():
            table = Table(title=addr)
            table.add_column("key")
            table.add_column("value")
            for key, value in sorted(config.items()):
                table.add_row(key, str(value))
            console.print(table)
        return
    table = Table(show_header=False)
    for key, value in result.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        table.add_row(key, str(value))
    console.print(table)
