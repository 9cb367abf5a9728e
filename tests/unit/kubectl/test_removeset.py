"""remove-set's reading of a broker's consumer lag."""

from __future__ import annotations

import pytest

from brokergroup.kubectl.removeset import lag_summary, unclaimed_topics
from brokergroup.kubectl.targets import PluginError


def row(group: str, lag: int, queue: int = 0) -> dict[str, object]:
    return {"group": group, "topic": "orders", "queueId": queue, "consumerOffset": 0, "maxOffset": lag, "lag": lag}


def test_the_queues_behind_are_named_and_the_list_is_cut() -> None:
    reply = {"totalLag": 21, "groups": 2, "queues": [row("a", 0), *(row("b", i + 1, i) for i in range(6))]}
    total, words = lag_summary(reply, limit=2)
    assert total == 21
    assert words == "group b topic orders queue 0: 1; group b topic orders queue 1: 2, and 4 more"


def test_nothing_behind() -> None:
    assert lag_summary({"totalLag": 0, "groups": 1, "queues": [row("a", 0)]}) == (0, "")


@pytest.mark.parametrize("reply", [None, [], {"queues": []}, {"totalLag": "3"}, "<html>"])
def test_an_unexpected_reply_is_one_clear_error(reply: object) -> None:
    with pytest.raises(PluginError, match="unexpected consumer-lag reply"):
        lag_summary(reply)


def test_topics_with_messages_no_group_read_are_named() -> None:
    topics = {
        "topics": {
            "orders": [{"queueId": 0, "minOffset": 0, "maxOffset": 5}],
            "audit": [{"queueId": 0, "minOffset": 0, "maxOffset": 0}, {"queueId": 1, "minOffset": 2, "maxOffset": 9}],
            "expired": [{"queueId": 0, "minOffset": 7, "maxOffset": 7}],  # retention removed everything
        }
    }
    lag = {"totalLag": 0, "groups": 1, "queues": [row("app", 0)]}
    assert unclaimed_topics(topics, lag) == ["audit"]
    with pytest.raises(PluginError, match="unexpected topics reply"):
        unclaimed_topics({"topics": []}, lag)
