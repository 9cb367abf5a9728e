"""Model check of the sync-state-set protocol (issue 22): every interleaving up to a bound, on the
real `SyncStateSetManager` and controller core (`syncset_model` has the state machine).

Each search is exhaustive within its bounds; together they stay well under a minute of CPU. The
last tests run the same search on the code before issue 22 and must find its two races."""

from __future__ import annotations

import pytest
from syncset_model import BEFORE_ISSUE_22, TODAY, Bounds, Policy, explore, forgetful_manager, todays_manager

BOUNDS = [
    pytest.param(Bounds(puts=2, crashes=1, lost_replies=0, disconnects=0), id="two-puts-a-crash-and-an-election"),
    pytest.param(Bounds(puts=1, crashes=0, lost_replies=1, disconnects=1), id="a-lost-reply-and-a-shrink"),
    pytest.param(Bounds(puts=1, crashes=1, lost_replies=0, disconnects=1), id="a-shrink-then-a-crash"),
    pytest.param(Bounds(puts=1, crashes=1, lost_replies=1, disconnects=0, min_in_sync_replicas=1), id="min-isr-1"),
]


@pytest.mark.parametrize("bounds", BOUNDS)
def test_no_interleaving_loses_an_acked_or_consumed_entry(bounds: Bounds) -> None:
    outcome = explore(TODAY, bounds)
    assert outcome.violation is None, f"{outcome.violation} after {' -> '.join(outcome.trace)}"
    assert outcome.states > 1000  # the search did explore


def test_the_search_finds_the_stale_read_that_ended_an_in_flight_proposal() -> None:
    """Issue 22, item 1, second race: a read computed before the controller committed {1, 2}
    ended the window, and a waiting put was released with only the master's copy."""
    outcome = explore(Policy(make_manager=forgetful_manager), Bounds(puts=1, crashes=0, lost_replies=0, disconnects=0))
    assert outcome.violation is not None
    assert "has 2, which lacks acked or consumed entries" in outcome.violation
    assert outcome.trace == ("replicate(2)", "put", "read", "send", "read_reply")


def test_the_search_finds_the_expansion_committed_after_the_first_answer() -> None:
    """Issue 22, item 1, first race: P1 = {1, 2} and P2 = {1, 2, 3}; P1's answer ended the window
    and P2, sent with the new epoch, was committed while the master acked without broker 3."""
    before = Policy(make_manager=todays_manager, send_with_proposal_epoch=False, settle_refusals=False)
    outcome = explore(before, Bounds(puts=1, crashes=0, lost_replies=0, disconnects=0))
    assert outcome.violation is not None
    assert "has 3, which lacks acked or consumed entries" in outcome.violation
    assert outcome.trace[-3:] == ("send", "reply", "send")


def test_the_search_finds_a_violation_in_the_code_before_issue_22() -> None:
    outcome = explore(BEFORE_ISSUE_22, Bounds())
    assert outcome.violation is not None
