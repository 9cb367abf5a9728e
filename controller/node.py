"""Wiring of one controller process: Raft node, service, event log, HTTP API."""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web
from prometheus_client import CollectorRegistry

from brokergroup.common import lasting
from brokergroup.controller.api import create_app
from brokergroup.controller.bridge import Bridge
from brokergroup.controller.eventlog import EventFeed, EventLogWriter
from brokergroup.controller.metrics import ControllerMetrics
from brokergroup.controller.replicated import Applied, RaftNode, StateMachine, build_conf, snapshot_path
from brokergroup.controller.service import ControllerService
from brokergroup.controller.settings import ControllerSettings

logger = logging.getLogger(__name__)


async def run_node(settings: ControllerSettings, *, stop: asyncio.Event | None = None) -> None:
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    failures = lasting.Failures("controller", stop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bridge = Bridge(loop, max_group=1)  # the service groups once every node applies group entries
    metrics = ControllerMetrics(CollectorRegistry())
    event_log = EventLogWriter(
        settings.data_dir / "events", node_id=settings.node_id, max_bytes=settings.event_log_max_bytes
    )
    feed = EventFeed(wake=bridge.call_soon)  # applies publish on pysyncobj's thread, no loop wake-up
    had_snapshot = snapshot_path(settings.data_dir).exists()
    first = [True]

    def on_applied(applied: Applied) -> None:  # runs on pysyncobj's thread
        records = [{**r, "node": settings.node_id} for r in applied.records]  # one entry: maybe several sets
        if records:
            event_log.append(records)
        if first[0] and had_snapshot:
            feed.note_gap(applied.index - 1)
        first[0] = False
        feed.publish(applied.index, records)

    machine = StateMachine(on_applied)
    node = RaftNode(
        settings,
        machine,
        build_conf(settings, machine, on_state_changed=lambda _old, _new: None, before_snapshot=event_log.sync),
    )
    service = ControllerService(
        settings=settings, node=node, bridge=bridge, event_log=event_log, feed=feed, metrics=metrics
    )
    runner = web.AppRunner(create_app(service), access_log=None)
    try:
        service.start(failures)
        await runner.setup()
        site = web.TCPSite(runner, settings.api.host, settings.api.port)
        await site.start()
        logger.info(
            "controller %s: raft %s, api http://%s:%s, data %s",
            settings.node_id,
            settings.me.raft,
            settings.api.host,
            settings.api.port,
            settings.data_dir,
        )
        await stop.wait()
    finally:
        await service.close()
        await runner.cleanup()
        node.close()
        event_log.close()
        logger.info("controller %s stopped", settings.node_id)
    failures.check()
