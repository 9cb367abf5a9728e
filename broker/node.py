"""Wiring of one broker process: store, flusher, role manager, replication, HTTP API."""

from __future__ import annotations

import asyncio
import logging
import signal

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry

from brokergroup.broker import podlabels
from brokergroup.broker.api import BrokerContext, create_app
from brokergroup.broker.binary_server import BinaryServer
from brokergroup.broker.cleaner import RetentionTask
from brokergroup.broker.controller_dns import ControllerDns
from brokergroup.broker.ha.service import HAService
from brokergroup.broker.metrics import BrokerMetrics
from brokergroup.broker.role import RoleManager
from brokergroup.broker.service import PutPath
from brokergroup.broker.settings import BrokerSettings
from brokergroup.broker.store.flusher import GroupCommitFlusher
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.common import lasting
from brokergroup.controller.client import ControllerClient

logger = logging.getLogger(__name__)


async def run_broker(settings: BrokerSettings, *, stop: asyncio.Event | None = None) -> None:
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    failures = lasting.Failures("broker", stop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    store = MessageStore.open(settings.data_dir / "store", settings.store)
    flusher = GroupCommitFlusher(
        store,
        settings.store.flush,
        interval_ms=settings.store.flush_interval_ms,
        timeout_ms=settings.store.sync_flush_timeout_ms,
    )
    retention = RetentionTask(store, interval_ms=settings.store.retention_check_interval_ms)
    metrics = BrokerMetrics(CollectorRegistry())
    metrics.track_flushes(flushed_offset=lambda: store.flushed_offset, flushes=lambda: flusher.flush_count)
    link = settings.controller
    dns = ControllerDns(link.addresses, interval_ms=link.dns_lookup_interval_ms) if link.dns_lookup else None
    if dns is not None:
        await dns.refresh()  # before the first call; a name that answers nothing stands for itself until it does
    async with (
        aiohttp.ClientSession() as session,
        ControllerClient(
            dns.addresses if dns is not None else link.addresses,
            token=settings.controller.broker_token or settings.controller.admin_token,
            timeout=5.0,
        ) as controller,
    ):
        host = settings.advertise_host or settings.host
        role: RoleManager | None = None

        def make_ha(broker_id: int) -> HAService:
            assert role is not None
            return HAService(
                store, broker_id=broker_id, settings=settings.ha, on_sync_state_set_change=role.on_sync_state_set_change
            )

        role = RoleManager(
            settings=settings, store=store, make_ha=make_ha, controller=controller, session=session, address=""
        )
        labeler = podlabels.attach(role, settings.kubernetes, metrics)  # off outside Kubernetes
        puts = PutPath(store=store, flusher=flusher, role=role, metrics=metrics)
        ctx = BrokerContext(settings=settings, store=store, role=role, puts=puts, metrics=metrics, address="")
        runner = web.AppRunner(create_app(ctx), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        # The API's address is the broker's identity at the controller: known once bound (port 0 in tests).
        port = runner.addresses[0][1]
        role.address = ctx.address = f"{host}:{port}"
        binary = BinaryServer(ctx, settings.binary) if settings.binary.enabled else None
        if binary is not None:
            bound = await binary.start(settings.binary.host or settings.host)
            ctx.binary_address = f"{host}:{bound}"
        flusher.start(failures)
        retention.start()
        role.on_failure = failures
        role.start()
        if dns is not None:
            role.set_controller_addresses(dns.addresses)  # the names' first answer
            dns.on_change = role.set_controller_addresses
            dns.degraded = role.controllers_unreachable
            dns.start()
        logger.info(
            "broker %s/%s: api http://%s, binary %s, data %s",
            settings.cluster_name,
            settings.broker_name,
            role.address,
            ctx.binary_address or "off",
            settings.data_dir,
        )
        try:
            await stop.wait()
        finally:
            if dns is not None:
                await dns.stop()
            await role.close()
            if labeler is not None:
                await asyncio.to_thread(labeler.stop)
            await retention.stop()
            await flusher.stop()
            if binary is not None:
                await binary.close()
            await runner.cleanup()
            store.close()
            logger.info("broker stopped")
    failures.check()
