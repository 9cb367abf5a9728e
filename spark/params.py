"""The audit's thresholds, as plain Python: the Spark transforms and the plain-Python
invariants take the same object."""

from __future__ import annotations

import dataclasses

from brokergroup.common.settings import SettingsError


@dataclasses.dataclass(frozen=True)
class AuditParams:
    """Thresholds of the audit."""

    min_in_sync_replicas: int = 1
    """A sync-state-set smaller than max(2, this) with a master is a risk window."""
    long_risk_window_s: float = 600.0
    """A risk window at least this long is a `long_risk_window` warning."""
    flap_window_s: float = 600.0
    """Sliding window for counting a broker's lost/active transitions."""
    flap_threshold: int = 6
    """A broker with this many transitions within one window is flapping."""

    def validate(self) -> AuditParams:
        problems = []
        if self.min_in_sync_replicas < 1:
            problems.append(f"min-in-sync-replicas ({self.min_in_sync_replicas}) must be at least 1")
        if self.long_risk_window_s <= 0:
            problems.append(f"long-risk-window ({self.long_risk_window_s} s) must be positive")
        if self.flap_window_s <= 0:
            problems.append(f"flap-window ({self.flap_window_s} s) must be positive")
        if self.flap_threshold < 2:
            problems.append(f"flap-threshold ({self.flap_threshold}) must be at least 2 (one loss and one return)")
        if problems:
            raise SettingsError("; ".join(problems))
        return self

    @property
    def long_risk_window_ms(self) -> int:
        return round(self.long_risk_window_s * 1000)

    @property
    def flap_window_ms(self) -> int:
        return round(self.flap_window_s * 1000)
