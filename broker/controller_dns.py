"""Controller addresses given as DNS names, re-resolved periodically (RocketMQ `fetchControllerAddrByDnsLookup`).

With `controller.dns_lookup`, each configured address is `name:port`; a name stands for every
controller node it resolves to (on Kubernetes, the controllers' headless Service: one A record
per pod). The broker talks to `ip:port` for each resolved address: controller calls go to any of
them, and each gets its own heartbeat stream (brokers heartbeat every controller node).

`ControllerDns` resolves every `dns_lookup_interval_ms`; when the set of addresses changes it
calls `on_change` with the new list (the role manager then opens streams to new nodes and closes
those to vanished ones). A name whose lookup fails or answers nothing keeps the addresses it had
(RocketMQ #6873: a DNS failure emptied the list), and is retried every second until it answers.
While `degraded()` says a node it gave does not answer (the role manager: a heartbeat stream is
down), the names are resolved every second too: a controller pod that came back with a new IP is
heard from within about a second, not a whole interval.
Before the first answer the name itself (`name:port`) stands in, resolved by each connection.

`controller_addrs` is the pure part; the resolver is a seam (`Resolver`): by default the
system's (`getaddrinfo`: /etc/hosts, then DNS, as nsswitch says).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

from brokergroup.broker.controller_addrs import flatten, resolve_addresses, split_address

logger = logging.getLogger(__name__)

Resolver = Callable[[str], Awaitable[Sequence[str]]]
"""host name -> its IP addresses (empty: no answer); may raise OSError."""

RETRY_S = 1.0
"""Seconds before a name that answered nothing is asked again."""


async def system_resolver(host: str) -> list[str]:
    """The system's answer for `host` (getaddrinfo, so /etc/hosts and DNS as nsswitch says)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _never() -> bool:
    return False


class ControllerDns:
    """Resolves the configured names now and then; tells `on_change` when the addresses change."""

    def __init__(
        self,
        configured: Sequence[str],
        *,
        interval_ms: int,
        resolver: Resolver = system_resolver,
    ) -> None:
        for address in configured:
            split_address(address)
        self.configured = list(configured)
        self.interval_s = interval_ms / 1000
        self._resolver = resolver
        self._resolved: dict[str, list[str]] = {}
        self._unanswered: set[str] = set()
        self.on_change: Callable[[list[str]], None] | None = None
        self.degraded: Callable[[], bool] = _never
        """True while some resolved node does not answer: resolve every second meanwhile."""
        self._task: asyncio.Task[None] | None = None

    @property
    def addresses(self) -> list[str]:
        return flatten(self._resolved) if self._resolved else list(self.configured)

    async def refresh(self) -> list[str]:
        """Resolve every name once; returns the addresses (and calls `on_change` if they changed)."""
        hosts = list(dict.fromkeys(split_address(a)[0] for a in self.configured))
        results = await asyncio.gather(*(self._lookup(h) for h in hosts))
        answers = dict(zip(hosts, results, strict=True))
        self._unanswered = {h for h, ips in answers.items() if not ips}
        before = self.addresses
        self._resolved = resolve_addresses(self.configured, answers, self._resolved)
        after = self.addresses
        if after != before:
            logger.info("controller addresses now %s (were %s)", ";".join(after), ";".join(before))
            if self.on_change is not None:
                self.on_change(after)
        return after

    async def _lookup(self, host: str) -> list[str]:
        try:
            ips = list(await self._resolver(host))
        except OSError as exc:
            logger.warning("controller name %s does not resolve (%s); keeping its last addresses", host, exc)
            return []
        if not ips:
            logger.warning("controller name %s resolved to nothing; keeping its last addresses", host)
        return ips

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.next_wait())
            try:
                await self.refresh()
            except Exception:  # a bug here must not stop the refreshes
                logger.exception("controller address refresh failed")

    def next_wait(self) -> float:
        """Seconds to the next lookup: the interval, or at most a second while something is missing."""
        return min(self.interval_s, RETRY_S) if self._unanswered or self.degraded() else self.interval_s

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
