"""The controller's part of the brokers' write-lease margin (issue 22, item 3).

A deposed leader keeps answering for pysyncobj's leaderFallbackTimeout, max(3 s, 2 x raft.max_timeout),
and may renew a master's write lease all that time; the brokers' settings allow for
`controller.leader_fallback_ms` (3000 by default). A controller whose fallback is longer refuses to start
and says what to change.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from brokergroup.broker.settings import BrokerSettings
from brokergroup.controller.settings import ControllerSettings

DEV = {"raft": {"insecure_dev": True}}


def test_the_default_raft_timings_fit_the_brokers_default_margin() -> None:
    settings = ControllerSettings.model_validate(DEV)
    assert settings.leader_fallback_timeout == 3.0
    assert settings.leader_fallback_timeout * 1000 <= BrokerSettings().controller.leader_fallback_ms


def test_a_slower_election_timeout_than_the_brokers_allow_for_is_refused_with_the_remedy() -> None:
    with pytest.raises(ValidationError) as refused:
        ControllerSettings.model_validate({"raft": {"insecure_dev": True, "max_timeout": 2.0}})
    message = str(refused.value)
    assert "max(3 s, 2 x raft.max_timeout (2.0 s)) = 4000 ms, exceeds api.brokers_leader_fallback_ms (3000)" in message
    assert "controller.leader_fallback_ms" in message


def test_brokers_configured_for_the_longer_fallback_let_it_start() -> None:
    settings = ControllerSettings.model_validate(
        {"raft": {"insecure_dev": True, "max_timeout": 2.0}, "api": {"brokers_leader_fallback_ms": 4000}}
    )
    assert settings.leader_fallback_timeout == 4.0
    # ... and such brokers need a heartbeat timeout that covers it (their own check):
    broker = BrokerSettings.model_validate({"controller": {"leader_fallback_ms": 4000, "heartbeat_timeout_ms": 11_000}})
    assert broker.controller.max_heartbeat_age_ms == 11_000 - 5000 - 4000
    with pytest.raises(ValidationError, match=r"must be at least write_lease_ms \(5000\) \+ leader_fallback_ms \(4000"):
        BrokerSettings.model_validate({"controller": {"leader_fallback_ms": 4000}})
