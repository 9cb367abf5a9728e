"""`brokergroup bench produce` reads each broker's flush counter from its /metrics, by role."""

from __future__ import annotations

import dataclasses
from typing import cast

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry, Counter, generate_latest

from brokergroup.bench import produce
from brokergroup.local.brokers import BrokerSet


@dataclasses.dataclass
class Proc:
    pid: int


@dataclasses.dataclass
class Node:
    api: str
    proc: Proc | None


@dataclasses.dataclass
class Brokers:
    nodes: list[Node]


def metrics_app(flushes: dict[str, int]) -> web.Application:
    """One /metrics per broker name, as the broker's prometheus registry writes it."""

    async def handle(request: web.Request) -> web.Response:
        registry = CollectorRegistry()
        Counter("brokergroup_broker_flushes", "flushes", registry=registry).inc(flushes[request.match_info["name"]])
        return web.Response(body=generate_latest(registry), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{name}/metrics", handle)
    return app


async def test_flush_counts_are_read_by_role_and_a_stopped_broker_is_left_out() -> None:
    async with TestServer(metrics_app({"a": 7, "b": 3, "c": 12})) as server, aiohttp.ClientSession() as session:
        base = f"{server.host}:{server.port}"
        brokers = Brokers(
            [Node(f"{base}/a", Proc(1)), Node(f"{base}/b", Proc(2)), Node(f"{base}/c", Proc(3)), Node("", None)]
        )
        counts = await produce.flush_counts(cast(BrokerSet, brokers), 1, session)
    assert counts == {"slave1": 7.0, "master": 3.0, "slave2": 12.0}
    assert produce.broker_roles(cast(BrokerSet, brokers), 1) == {"slave1": 0, "master": 1, "slave2": 2}
