"""`brokergroup broker`, `brokergroup produce` and `brokergroup consume`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import aiohttp

from brokergroup.broker.binary_client import BinaryConsumer, BinaryLinks, BinaryProducer
from brokergroup.broker.client import Consumer, MasterFinder, ProduceError, Producer
from brokergroup.broker.settings import BrokerSettings
from brokergroup.common import eventloop
from brokergroup.common.settings import deep_merge, load_settings, nested, parse_overrides
from brokergroup.controller.client import ControllerClient


def add_parsers(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "broker",
        help="run one broker replica",
        description="Run one broker replica. Settings: --config file, then BG_BROKER_* env, then flags.",
    )
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.add_argument("--cluster-name", dest="cluster_name")
    p.add_argument("--broker-name", dest="broker_name", help="the broker set this replica belongs to")
    p.add_argument("--data-dir", dest="data_dir", type=Path)
    p.add_argument("--host", dest="host", help="HTTP API bind address")
    p.add_argument("--port", dest="port", type=int, help="HTTP API port (0 = any free port)")
    p.add_argument("--advertise-host", dest="advertise_host")
    p.add_argument("--ha-port", dest="ha.port", type=int, help="replication port (0 = any free port)")
    p.add_argument(
        "--binary-port", dest="binary.port", type=int, help="binary client protocol port (0 = any free port)"
    )
    p.add_argument(
        "--no-binary",
        dest="binary.enabled",
        action="store_const",
        const=False,
        help="serve only the HTTP API, not the binary client protocol",
    )
    p.add_argument("--controller", dest="controller.addresses", help="controller API addresses, ';'-separated")
    p.add_argument("--flush", dest="store.flush", choices=["SYNC", "ASYNC"])
    p.add_argument(
        "--retention-ms",
        dest="store.retention_ms",
        type=int,
        help="delete whole commit-log segments last written longer ago than this (confirmed ones only)",
    )
    p.add_argument(
        "--retention-bytes",
        dest="store.retention_bytes",
        type=int,
        help="delete the oldest whole segments while the commit log is bigger than this",
    )
    p.add_argument(
        "--min-free-disk-bytes",
        dest="store.min_free_disk_bytes",
        type=int,
        help="refuse puts (SERVICE_NOT_AVAILABLE, disk full) below this much free space (0: off)",
    )
    p.add_argument(
        "--all-ack",
        dest="ha.all_ack_in_sync_state_set",
        action="store_const",
        const=True,
        help="wait for every sync-state-set member before acknowledging (sync replication)",
    )
    p.add_argument("--in-sync-replicas", dest="ha.in_sync_replicas", type=int)
    p.add_argument("--min-in-sync-replicas", dest="ha.min_in_sync_replicas", type=int)
    p.add_argument("--async-learner", dest="ha.async_learner", action="store_const", const=True)
    p.add_argument("--election-priority", dest="controller.election_priority", type=int)
    p.add_argument(
        "--kubernetes-pod-labels",
        dest="kubernetes.enabled",
        action="store_const",
        const=True,
        help="patch this broker's own Pod with its role label on every role change (needs --pod-name, --pod-namespace)",
    )
    p.add_argument("--pod-name", dest="kubernetes.pod_name", help="this broker's Pod (Kubernetes)")
    p.add_argument("--pod-namespace", dest="kubernetes.namespace", help="the Pod's namespace (Kubernetes)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting by dotted path, e.g. ha.slave_timeout_ms=1000",
    )
    p.add_argument("--log-level", dest="log_level")
    p.set_defaults(func=run_broker_cmd)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--controller", help="controller API addresses, ';'-separated (finds the master)")
    common.add_argument("--master", help="a fixed master address host:port instead of asking the controller")
    common.add_argument("--broker-name", required=True, help="broker set")
    common.add_argument("--topic", required=True)
    common.add_argument("--queue-id", type=int, default=0)
    common.add_argument(
        "--protocol",
        choices=["binary", "http"],
        default="binary",
        help="the broker's binary client port (default) or its HTTP API",
    )

    p = sub.add_parser("produce", parents=[common], help="send messages (idempotent, retries across failover)")
    p.add_argument("messages", nargs="*", help="message bodies; default: lines of standard input")
    p.add_argument("--count", type=int, help="send this many generated messages of --size bytes")
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--deadline", type=float, default=30.0, help="seconds to keep retrying one message")
    p.set_defaults(func=run_produce)

    p = sub.add_parser("consume", parents=[common], help="read messages from the committed offset")
    p.add_argument("--group", required=True, help="consumer group")
    p.add_argument("--max", type=int, default=100, help="stop after this many messages")
    p.add_argument("--commit", action="store_true", help="commit the offset after reading")
    p.set_defaults(func=run_consume)


def run_broker_cmd(args: argparse.Namespace) -> int:
    from brokergroup.broker.node import run_broker

    skip = ("config", "func", "overrides", "command")
    flags = {k: v for k, v in vars(args).items() if k not in skip}
    settings = load_settings(
        BrokerSettings, config_file=args.config, flags=deep_merge(nested(flags), parse_overrides(args.overrides))
    )
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    eventloop.run(run_broker(settings))
    return 0


def _finder(args: argparse.Namespace, controller: ControllerClient | None) -> MasterFinder:
    return MasterFinder(broker_name=args.broker_name, controller=controller, master_address=args.master)


def _controller(args: argparse.Namespace) -> ControllerClient | None:
    if not args.controller and not args.master:
        raise SystemExit("brokergroup: give --controller or --master")
    return ControllerClient(args.controller.split(";")) if args.controller else None


def run_produce(args: argparse.Namespace) -> int:
    bodies: list[bytes]
    if args.count is not None:
        if args.count < 1 or args.size < 0:
            print("brokergroup produce: --count must be >= 1 and --size >= 0", file=sys.stderr)
            return 2
        bodies = [f"{i:010d}".encode().ljust(args.size, b".")[: max(args.size, 10)] for i in range(args.count)]
    else:
        bodies = [m.encode() for m in args.messages] or [line.rstrip("\n").encode() for line in sys.stdin]

    async def go() -> int:
        controller = _controller(args)
        async with aiohttp.ClientSession() as session:
            links = BinaryLinks(session)
            producer: Producer | BinaryProducer
            if args.protocol == "binary":
                producer = BinaryProducer(_finder(args, controller), links=links, deadline_s=args.deadline)
            else:
                producer = Producer(_finder(args, controller), session=session, deadline_s=args.deadline)
            try:
                for body in bodies:
                    sent = await producer.send(args.topic, [body], queue_id=args.queue_id)
                    print(
                        json.dumps(
                            {
                                "status": sent.status,
                                "commitOffset": sent.commit_offsets[0],
                                "queueOffset": sent.queue_offsets[0],
                                "duplicate": sent.duplicates[0],
                                "attempts": sent.attempts,
                            }
                        )
                    )
            except ProduceError as exc:
                print(f"brokergroup produce: {exc}", file=sys.stderr)
                return 1
            finally:
                links.close()
                if controller is not None:
                    await controller.close()
        return 0

    return eventloop.run(go())


def run_consume(args: argparse.Namespace) -> int:
    async def go() -> int:
        controller = _controller(args)
        async with aiohttp.ClientSession() as session:
            links = BinaryLinks(session)
            consumer: Consumer | BinaryConsumer
            if args.protocol == "binary":
                consumer = BinaryConsumer(_finder(args, controller), group=args.group, links=links)
            else:
                consumer = Consumer(_finder(args, controller), group=args.group, session=session)
            seen = 0
            try:
                while seen < args.max:
                    batch = await consumer.poll(args.topic, args.queue_id, max_count=min(32, args.max - seen))
                    if not batch:
                        break
                    for m in batch:
                        print(
                            json.dumps(
                                {
                                    "queueOffset": m.queue_offset,
                                    "body": m.body.decode(errors="replace"),
                                    "producerId": m.producer_id,
                                    "seq": m.seq,
                                }
                            )
                        )
                    seen += len(batch)
                if args.commit:
                    await consumer.commit(args.topic, args.queue_id)
            except ProduceError as exc:
                print(f"brokergroup consume: {exc}", file=sys.stderr)
                return 1
            finally:
                links.close()
                if controller is not None:
                    await controller.close()
        return 0

    return eventloop.run(go())
