"""The producers' one retry loop (`client.send_until_acked`), driven by scripted attempts: the protocols
(HTTP, binary) differ only in how one attempt is made."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from brokergroup.broker.client import Attempt, MasterFinder, ProduceError, Sent, send_until_acked

OK = Sent(status="PUT_OK", commit_offsets=(0,), queue_offsets=(0,), duplicates=(False,), attempts=1, master="m2")


class ScriptedFinder:
    """The controller's answers, one per round trip; `hint` as `MasterFinder.hint`."""

    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers
        self.asked: list[bool] = []
        self.cached: str | None = None

    def hint(self, address: str | None) -> None:
        if address:
            self.cached = address

    def known(self, *, refresh: bool = False) -> str | None:
        return None if refresh else self.cached

    async def find(self, *, refresh: bool = False) -> str | None:
        self.asked.append(refresh)
        if self.cached and not refresh:
            return self.cached
        self.cached = self.answers.pop(0) if self.answers else None
        return self.cached


def run(finder: ScriptedFinder, outcomes: list[Attempt], deadline_s: float = 5.0) -> tuple[Sent, list[str]]:
    tried: list[str] = []

    async def attempt(master: str, left: float) -> Attempt:
        assert 0 < left <= deadline_s
        tried.append(master)
        return outcomes.pop(0)

    found = cast(MasterFinder, finder)
    return asyncio.run(send_until_acked(found, attempt, deadline_s=deadline_s)), tried


def test_a_refusal_naming_the_master_is_followed_and_the_attempts_are_counted() -> None:
    finder = ScriptedFinder(["m1"])
    sent, tried = run(
        finder,
        [Attempt("SERVICE_NOT_AVAILABLE", "not the master", master_hint="m2"), Attempt("PUT_OK", "", sent=OK)],
    )
    assert (sent.attempts, sent.master, tried) == (2, "m2", ["m1", "m2"])
    assert finder.asked == [False]  # the hint was enough: no second controller round trip


def test_a_send_acknowledged_at_once_counts_one_attempt_and_asks_the_controller_once() -> None:
    finder = ScriptedFinder(["m2"])
    sent, tried = run(finder, [Attempt("PUT_OK", "", sent=OK)])
    assert (sent.attempts, tried, finder.asked) == (1, ["m2"], [False])
    sent, tried = run(finder, [Attempt("PUT_OK", "", sent=OK)])  # the master known: no controller round trip
    assert (sent.attempts, tried, finder.asked) == (1, ["m2"], [False])


def test_an_unreachable_master_makes_the_next_try_ask_the_controller_again() -> None:
    finder = ScriptedFinder(["m1", "m2"])
    sent, tried = run(finder, [Attempt("UNREACHABLE", "m1: refused", refresh=True), Attempt("PUT_OK", "", sent=OK)])
    assert (tried, finder.asked, sent.attempts) == (["m1", "m2"], [False, True], 2)


def test_a_bad_request_is_not_retried() -> None:
    finder = ScriptedFinder(["m1"])
    with pytest.raises(ProduceError, match="topic") as caught:
        run(finder, [Attempt("BAD_REQUEST", "batch header: topic", fatal=True)])
    assert caught.value.status == "BAD_REQUEST"


def test_the_deadline_ends_the_retries_with_the_last_answer() -> None:
    finder = ScriptedFinder([])  # no master is ever known
    with pytest.raises(ProduceError, match=r"not acknowledged within 0\.3 s after 0 attempts: no master known"):
        run(finder, [], deadline_s=0.3)
