"""Controller addresses given as DNS names (`controller.dns_lookup`): resolution, keeping the last answer
when a lookup fails, and the periodic refresh, with the resolver as the seam."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from ha_fakes import until

from brokergroup.broker.controller_addrs import resolve_addresses, split_address
from brokergroup.broker.controller_dns import ControllerDns, system_resolver
from brokergroup.broker.settings import ControllerLinkSettings


def test_each_name_stands_for_every_address_it_resolves_to() -> None:
    got = resolve_addresses(
        ["ctl.ns.svc:9878", "10.0.0.9:9000"], {"ctl.ns.svc": ["10.0.0.2", "10.0.0.1", "fd00::1"]}, {}
    )
    assert got == {
        "ctl.ns.svc:9878": ["10.0.0.1:9878", "10.0.0.2:9878", "[fd00::1]:9878"],
        "10.0.0.9:9000": ["10.0.0.9:9000"],  # never resolved: stands for itself
    }


def test_a_name_without_an_answer_keeps_its_last_addresses() -> None:
    previous = {"ctl:9878": ["10.0.0.1:9878"]}
    assert resolve_addresses(["ctl:9878"], {"ctl": []}, previous) == previous
    assert resolve_addresses(["ctl:9878"], {}, previous) == previous


@pytest.mark.parametrize("bad", ["ctl", "ctl:", ":9878", "ctl:port", "ctl:70000"])
def test_an_address_without_a_port_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match=f"controller address {bad!r}: expected name:port"):
        split_address(bad)


def test_dns_lookup_settings_check_the_names() -> None:
    assert ControllerLinkSettings(addresses="ctl.ns.svc:9878", dns_lookup=True).dns_lookup_interval_ms == 120_000
    with pytest.raises(ValueError, match=r"controller address 'ctl\.ns\.svc': expected name:port"):
        ControllerLinkSettings(addresses="ctl.ns.svc", dns_lookup=True)
    with pytest.raises(ValueError, match="dns_lookup_interval_ms"):
        ControllerLinkSettings(dns_lookup=True, dns_lookup_interval_ms=10)


class Answers:
    """A resolver whose answers the test changes; an exception as the answer is raised."""

    def __init__(self, **answers: Sequence[str] | OSError) -> None:
        self.answers = dict(answers)
        self.asked = 0

    async def __call__(self, host: str) -> Sequence[str]:
        self.asked += 1
        answer = self.answers.get(host.replace(".", "_"), [])
        if isinstance(answer, OSError):
            raise answer
        return answer


async def test_the_refresh_reports_changes_and_survives_failures() -> None:
    resolver = Answers(ctl=["10.0.0.1", "10.0.0.2"])
    dns = ControllerDns(["ctl:9878"], interval_ms=100, resolver=resolver)
    assert dns.addresses == ["ctl:9878"]  # before the first answer
    assert await dns.refresh() == ["10.0.0.1:9878", "10.0.0.2:9878"]
    seen: list[list[str]] = []
    dns.on_change = seen.append
    dns.start()
    try:
        resolver.answers["ctl"] = ["10.0.0.2", "10.0.0.3"]
        await until(lambda: seen == [["10.0.0.2:9878", "10.0.0.3:9878"]], "the new answer reported")
        resolver.answers["ctl"] = OSError("Name or service not known")
        asked = resolver.asked
        await until(lambda: resolver.asked >= asked + 3, "asked again after a failure")
        resolver.answers["ctl"] = []
        await until(lambda: resolver.asked >= asked + 6, "asked again after an empty answer")
        assert dns.addresses == ["10.0.0.2:9878", "10.0.0.3:9878"] and len(seen) == 1
        resolver.answers["ctl"] = ["10.0.0.3"]
        await until(lambda: len(seen) == 2, "the next answer reported")
        assert seen[-1] == ["10.0.0.3:9878"]
    finally:
        await dns.stop()


async def test_a_name_that_never_answered_is_retried_every_second_not_every_interval() -> None:
    resolver = Answers()
    dns = ControllerDns(["ctl:9878"], interval_ms=3_600_000, resolver=resolver)
    await dns.refresh()
    dns.start()
    try:
        resolver.answers["ctl"] = ["10.0.0.1"]
        await until(lambda: dns.addresses == ["10.0.0.1:9878"], "resolved on a retry", timeout_s=10)
    finally:
        await dns.stop()


async def test_names_are_asked_every_second_while_a_node_does_not_answer() -> None:
    resolver = Answers(ctl=["10.0.0.1"])
    dns = ControllerDns(["ctl:9878"], interval_ms=3_600_000, resolver=resolver)
    await dns.refresh()
    down = True
    dns.degraded = lambda: down
    dns.start()
    try:
        resolver.answers["ctl"] = ["10.0.0.2"]  # the node came back elsewhere
        await until(lambda: dns.addresses == ["10.0.0.2:9878"], "the new address within seconds", timeout_s=10)
        assert dns.next_wait() == 1.0
        down = False
        assert dns.next_wait() == 3600.0  # all nodes answer: back to the interval
    finally:
        await dns.stop()


async def test_the_system_resolver_answers_for_localhost() -> None:
    assert "127.0.0.1" in await system_resolver("localhost")
    with pytest.raises(OSError):
        await asyncio.wait_for(system_resolver("no-such-name.invalid"), timeout=30)
