"""A stand-in broker process for controller tests: the seam is the controller's published API.

It heartbeats every controller over the persistent stream and records the role changes the
controller pushes to `POST /v1/role-change` into a JSON-lines file. Usage:
`python fake_broker.py <cluster> <set> <broker_id> <http_port> <timeout_ms> <notify_file> <controller> ...`
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import aiohttp
from aiohttp import web

from brokergroup.controller import protocol
from brokergroup.controller.client import HeartbeatStream


def append_line(path: Path, line: str) -> None:
    with path.open("a") as f:
        f.write(line)


async def main(argv: list[str]) -> None:
    cluster, name, broker_id, port, timeout_ms, notify_file, *controllers = argv
    address = f"127.0.0.1:{port}"
    notifications = Path(notify_file)

    async def role_change(request: web.Request) -> web.Response:
        body = await request.json()
        line = json.dumps(body) + "\n"
        await asyncio.to_thread(append_line, notifications, line)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/role-change", role_change)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(port)).start()
    beat = protocol.HeartbeatRequest(
        cluster_name=cluster,
        broker_name=name,
        broker_addr=address,
        broker_id=int(broker_id),
        epoch=1,
        max_offset=100 * int(broker_id),
        heartbeat_timeout_mills=int(timeout_ms),
    )
    async with aiohttp.ClientSession() as session:
        streams = [HeartbeatStream(c, session=session) for c in controllers]
        print("ready", flush=True)
        while True:
            for stream in streams:
                try:
                    await stream.send(beat)
                except (aiohttp.ClientError, OSError):
                    continue
            await asyncio.sleep(0.2)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
