"""A heartbeat load generator: many brokers heartbeating every controller node at their interval.

`python3 -m brokergroup.bench.heartbeat_load < config.json` (the config on stdin; run by `brokergroup bench controller
--heartbeat-load-s`): every broker of the bench's sets (3 per set) sends one heartbeat to every
node per `interval_ms`, spread evenly over the interval, over the heartbeat WebSocket streams
(`/v1/broker/heartbeat-stream`, the path brokers use). Brokers share `connections` streams per node
(a broker's own stream each would need 3 times as many sockets as brokers in this one process); the controller's
per-heartbeat work is the same. After `stop_after_s` one broker's heartbeats stop (the stream
stays open, as with a hung broker), and its time is printed, for the failover to be timed against.
At the end every other broker sends one last heartbeat with `farewell_timeout_ms`, so the sets
keep live brokers after the load.

Prints one JSON line at the end: heartbeats sent, the rate against the target, how far the sender
fell behind its schedule, its own CPU, and when the stopped broker sent its last heartbeat
(`time.monotonic()`, the same clock in every process of the machine)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import sys
import time
from typing import Any

import aiohttp

from brokergroup.common.eventloop import run as run_loop

TICK_S = 0.02
"""The sender's slot: every 20 ms each stream sends the heartbeats due in that slot."""
YIELD_EVERY = 64
"""Streams served between two yields to the event loop (a yield per stream cost the sender a third more CPU)."""


def heartbeat_text(cluster: str, name: str, broker_id: int, timeout_ms: int) -> str:
    return json.dumps(
        {
            "clusterName": cluster,
            "brokerName": name,
            "brokerAddr": f"127.0.0.1:{20000 + broker_id}",
            "brokerId": broker_id,
            "heartbeatTimeoutMills": timeout_ms,
        },
        separators=(",", ":"),
    )


async def load(config: dict[str, Any]) -> dict[str, Any]:
    addresses: list[str] = config["addresses"]
    names: list[str] = config["names"]
    interval_s = config["interval_ms"] / 1000
    duration_s = float(config["duration_s"])
    connections = max(1, int(config["connections"]))
    stop_name, stop_id = config.get("stop_broker") or (None, None)
    brokers = [(name, broker_id) for name in names for broker_id in (1, 2, 3)]
    texts = {b: heartbeat_text(config["cluster"], b[0], b[1], config["timeout_ms"]) for b in brokers}
    farewell_ms = int(config.get("farewell_timeout_ms") or config["timeout_ms"])
    farewells = {b: heartbeat_text(config["cluster"], b[0], b[1], farewell_ms) for b in brokers}
    headers = {"Authorization": f"Bearer {config['token']}"} if config.get("token") else {}
    slots = max(1, round(interval_s / TICK_S))
    sent = [0]
    behind: list[float] = []
    errors = [0]
    closed = [0]
    stopped: dict[str, float | None] = {"at": None, "last_sent": None}
    stop_at = time.monotonic() + float(config["stop_after_s"]) if stop_name else float("inf")

    async def open_stream(session: aiohttp.ClientSession, address: str) -> aiohttp.ClientWebSocketResponse:
        return await session.ws_connect(f"http://{address}/v1/broker/heartbeat-stream", headers=headers, heartbeat=10.0)

    async def reader(ws: aiohttp.ClientWebSocketResponse) -> None:  # answers the server's pings; counts refusals
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                errors[0] += 1

    async def drive(streams: list[tuple[aiohttp.ClientWebSocketResponse, list[tuple[str, int]]]]) -> None:
        """One task sends for every stream: each tick, the brokers of that slot (position modulo `slots`)."""
        by_slot = [[(ws, share[k::slots]) for ws, share in streams] for k in range(slots)]
        started = time.monotonic()
        tick = 0
        while True:
            due = started + tick * TICK_S
            if due - started >= duration_s:
                break
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
            else:
                behind.append(now - due)
            for n, (ws, due_brokers) in enumerate(by_slot[tick % slots]):
                if n % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)  # let the readers run: they answer the controllers' pings
                if ws.closed:
                    continue
                for broker in due_brokers:
                    if broker == (stop_name, stop_id) and time.monotonic() >= stop_at:
                        if stopped["at"] is None:
                            stopped["at"] = time.monotonic()
                        continue
                    try:
                        await ws.send_str(texts[broker])
                    except aiohttp.ClientError:  # the controller closed it (e.g. our pong came too late)
                        closed[0] += 1
                        break
                    sent[0] += 1
                    if broker == (stop_name, stop_id):
                        stopped["last_sent"] = time.monotonic()
            await asyncio.sleep(0)
            tick += 1
        # a last heartbeat with `farewell_timeout_ms`: the brokers stay alive after the load ends
        for ws, share in streams:
            for broker in share:
                if broker != (stop_name, stop_id) and not ws.closed:
                    with contextlib.suppress(aiohttp.ClientError):
                        await ws.send_str(farewells[broker])

    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        shares = [brokers[c::connections] for c in range(connections) if brokers[c::connections]]
        opened = await asyncio.gather(*(open_stream(session, a) for a in addresses for _ in shares))
        readers = [asyncio.create_task(reader(ws)) for ws in opened]
        began = time.monotonic()
        await drive([(ws, shares[i % len(shares)]) for i, ws in enumerate(opened)])
        took = time.monotonic() - began
        await asyncio.gather(*(ws.close() for ws in opened))
        for task in readers:
            task.cancel()
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    behind.sort()

    def pct(q: float) -> float:
        return round(behind[min(len(behind) - 1, int(q * len(behind)))] * 1000, 1) if behind else 0.0

    return {
        "brokers": len(brokers),
        "nodes": len(addresses),
        "streams": len(opened),
        "target_per_s": round(len(brokers) * len(addresses) / interval_s, 1),
        "sent": sent[0],
        "seconds": round(took, 3),
        "sent_per_s": round(sent[0] / took, 1),
        "slots_late": len(behind),
        "late_ms_p50_p99_max": [pct(0.5), pct(0.99), round(behind[-1] * 1000, 1) if behind else 0.0],
        "refusals": errors[0],
        "streams_closed_by_controller": closed[0],
        "generator_cpu_s": round(cpu, 3),
        "stopped_broker": [stop_name, stop_id],
        "stopped_last_sent_monotonic": stopped["last_sent"],
    }


def main() -> int:
    config = json.loads(sys.stdin.read())  # not in argv: it holds the token
    print(json.dumps(run_loop(load(config))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
