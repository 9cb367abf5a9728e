"""How the operator talks to a BrokerGroup's controllers: through the controller's published client
only (import-linter checks it). Reads the sync-state data; asks for designated elections."""

from __future__ import annotations

import logging
from typing import Any

from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.controller.protocol import ElectMasterRequest, ElectMasterResponse
from brokergroup.operator.roles import SetView, set_view

logger = logging.getLogger(__name__)


class ControllerLinkError(RuntimeError):
    """The controller could not be reached or refused; the message says which and why."""


class ControllerLink:
    def __init__(self, address: str, *, token: str | None, timeout: float) -> None:
        self.address = address
        self._token = token
        self._timeout = timeout

    def _client(self) -> ControllerClient:
        return ControllerClient([self.address], token=self._token, timeout=self._timeout)

    async def views(self, broker_sets: list[str]) -> dict[str, SetView]:
        """The controller's view of each named set; a set the controller does not know is absent."""
        try:
            async with self._client() as client:
                data = await client.sync_state_data(broker_sets)
        except (ControllerError, OSError) as exc:
            raise ControllerLinkError(f"controller {self.address}: {exc}") from exc
        return {name: set_view(name, info) for name, info in data.replicas_info_table.items() if name in broker_sets}

    async def snapshot(self, broker_sets: list[str]) -> tuple[dict[str, SetView], str | None]:
        """The controller's view of each named set (a set it does not know is absent) and the id of the
        Raft leader (its pod name on Kubernetes; None when there is none), over one connection."""
        try:
            async with self._client() as client:
                data = await client.sync_state_data(broker_sets)
                leader = (await client.metadata()).controller_leader_id
        except (ControllerError, OSError) as exc:
            raise ControllerLinkError(f"controller {self.address}: {exc}") from exc
        views = {name: set_view(name, info) for name, info in data.replicas_info_table.items() if name in broker_sets}
        return views, leader or None

    async def events(self, *, after: int, wait_seconds: int) -> dict[str, Any]:
        """Long-poll the controller's event feed (`/v1/events`) for records after Raft index `after`."""
        try:
            async with ControllerClient([self.address], token=self._token, timeout=self._timeout + wait_seconds) as c:
                return await c.events(after=after, wait_seconds=wait_seconds)
        except (ControllerError, OSError) as exc:
            raise ControllerLinkError(f"controller {self.address} events: {exc}") from exc

    async def elect(self, broker_set: str, broker_id: int) -> ElectMasterResponse:
        """Designated election (`designateElect=true`, needs the admin token)."""
        request = ElectMasterRequest(broker_name=broker_set, broker_id=broker_id, designate_elect=True)
        try:
            async with self._client() as client:
                return await client.elect_master(request)
        except (ControllerError, OSError) as exc:
            raise ControllerLinkError(f"elect {broker_set} broker {broker_id} via {self.address}: {exc}") from exc
