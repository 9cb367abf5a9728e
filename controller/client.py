"""The controller's published client: what brokers, the operator, the CLI and tests use.

Any node answers (followers forward leader-only calls), so the client tries the given
addresses in order and sticks to the first that answers. Errors come back as
`ControllerError` with RocketMQ's code and remark.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel

from brokergroup.controller import protocol
from brokergroup.controller.codes import ControllerError, ResponseCode

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


class ControllerUnavailable(ControllerError):
    def __init__(self, remark: str) -> None:
        super().__init__(ResponseCode.SYSTEM_ERROR, remark)


def error_from_body(status: int, body: bytes) -> ControllerError:
    try:
        data = json.loads(body)
        code = ResponseCode(int(data.pop("code")))
        data.pop("name", None)
        remark = str(data.pop("remark", ""))
        return ControllerError(code, remark, data)
    except (ValueError, KeyError, TypeError, AttributeError):
        return ControllerError(ResponseCode.SYSTEM_ERROR, f"HTTP {status}: {body[:200]!r}")


class ControllerClient:
    def __init__(
        self,
        addresses: Sequence[str],
        *,
        token: str | None = None,
        timeout: float = 10.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        if not addresses:
            raise ValueError("at least one controller address is required")
        self.addresses = [a.removeprefix("http://").rstrip("/") for a in addresses]
        self._token = token
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session = session
        self._owns_session = session is None
        self._preferred = 0

    async def __aenter__(self) -> ControllerClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._owns_session:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        address: str | None = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        order = [address] if address else self.addresses[self._preferred :] + self.addresses[: self._preferred]
        errors = []
        for addr in order:
            try:
                async with self._http().request(
                    method, f"http://{addr}{path}", json=body, headers=headers, params=params
                ) as response:
                    raw = await response.read()
                    if response.status >= 400:
                        error = error_from_body(response.status, raw)
                        if error.code == ResponseCode.CONTROLLER_NOT_LEADER and addr != order[-1]:
                            errors.append(f"{addr}: {error.remark}")
                            continue  # this node knows no leader yet; another may
                        raise error
                    if address is None:
                        self._preferred = self.addresses.index(addr)
                    return json.loads(raw) if raw else {}
            except (aiohttp.ClientError, TimeoutError) as exc:
                errors.append(f"{addr}: {str(exc) or type(exc).__name__}")
        raise ControllerUnavailable("no controller answered: " + "; ".join(errors))

    async def _typed(self, model: type[M], method: str, path: str, request: BaseModel | None = None) -> M:
        body = request.model_dump(mode="json", by_alias=True) if request is not None else None
        return model.model_validate(await self.call(method, path, body=body))

    # ---- RocketMQ requests ----------------------------------------------------------------------
    async def next_id(self, req: protocol.NextIdRequest) -> protocol.NextIdResponse:
        return await self._typed(protocol.NextIdResponse, "POST", "/v1/broker/next-id", req)

    async def apply_id(self, req: protocol.ApplyIdRequest) -> protocol.ApplyIdResponse:
        return await self._typed(protocol.ApplyIdResponse, "POST", "/v1/broker/apply-id", req)

    async def register(self, req: protocol.RegisterRequest) -> protocol.RegisterResponse:
        return await self._typed(protocol.RegisterResponse, "POST", "/v1/broker/register", req)

    async def heartbeat(self, req: protocol.HeartbeatRequest, *, address: str | None = None) -> None:
        await self.call("POST", "/v1/broker/heartbeat", body=req.wire(), address=address)

    async def elect_master(self, req: protocol.ElectMasterRequest) -> protocol.ElectMasterResponse:
        return await self._typed(protocol.ElectMasterResponse, "POST", "/v1/elect-master", req)

    async def alter_sync_state_set(self, req: protocol.AlterSyncStateSetRequest) -> protocol.AlterSyncStateSetResponse:
        return await self._typed(protocol.AlterSyncStateSetResponse, "POST", "/v1/alter-sync-state-set", req)

    async def replica_info(self, broker_name: str) -> protocol.ReplicaInfoResponse:
        data = await self.call("GET", "/v1/replica-info", params={"brokerName": broker_name})
        return protocol.ReplicaInfoResponse.model_validate(data)

    async def sync_state_data(self, broker_names: Sequence[str]) -> protocol.SyncStateDataResponse:
        req = protocol.SyncStateDataRequest(broker_names=list(broker_names))
        return await self._typed(protocol.SyncStateDataResponse, "POST", "/v1/sync-state-data", req)

    async def metadata(self, *, address: str | None = None) -> protocol.MetadataResponse:
        return protocol.MetadataResponse.model_validate(await self.call("GET", "/v1/metadata", address=address))

    async def clean_broker_data(self, req: protocol.CleanBrokerDataRequest) -> None:
        await self.call("POST", "/v1/clean-broker-data", body=req.wire())

    async def get_config(self, *, address: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("GET", "/v1/config", address=address)
        return result

    async def update_config(self, changes: dict[str, Any], *, address: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("POST", "/v1/config", body=changes, address=address)
        return result

    async def events(self, *, after: int = 0, wait_seconds: int = 0, address: str | None = None) -> dict[str, Any]:
        params = {"after": str(after), "waitSeconds": str(wait_seconds)}
        result: dict[str, Any] = await self.call("GET", "/v1/events", params=params, address=address)
        return result

    async def status(self, *, address: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("GET", "/v1/status", address=address)
        return result

    async def state(self, *, address: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("GET", "/v1/state", address=address)
        return result

    async def find_leader(self) -> str | None:
        """The API address of the serving leader, asking each node."""
        for addr in self.addresses:
            try:
                meta = await self.metadata(address=addr)
            except ControllerError:
                continue
            if meta.controller_leader_address:
                return meta.controller_leader_address
        return None


class HeartbeatStream:
    """A persistent heartbeat WebSocket to one controller node (`/v1/broker/heartbeat-stream`).

    The controller treats the broker as inactive as soon as this stream closes, so a killed
    broker is seen dead at once. `send` reconnects when the stream dropped.
    """

    def __init__(self, address: str, *, session: aiohttp.ClientSession) -> None:
        self.address = address.removeprefix("http://").rstrip("/")
        self._session = session
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    @property
    def connected(self) -> bool:
        return self._ws is not None and not self._ws.closed

    async def send(self, req: protocol.HeartbeatRequest) -> None:
        if not self.connected:
            self._ws = await self._session.ws_connect(
                f"http://{self.address}/v1/broker/heartbeat-stream",
                heartbeat=10.0,
                timeout=aiohttp.ClientWSTimeout(ws_close=2.0),
            )
        assert self._ws is not None
        await self._ws.send_str(req.model_dump_json(by_alias=True))

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None
