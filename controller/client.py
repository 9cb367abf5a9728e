"""The controller's published client: what brokers, the operator, the CLI and tests use.

Any node answers (followers forward leader-only calls), and a hung node (SIGSTOPped, or a
blackholed route) must not hold a caller past its deadline, so:

- a read (GET, or a POST that changes nothing) is *hedged*: it goes to the node that answered
  last; if no answer came within `hedge_after` seconds, the next node is asked too, and so on;
  the first answer wins and the others are cancelled;
- a write goes to one node at a time (a hedged write would be applied twice), each attempt
  bounded by its share of what is left of `timeout`;
- the whole call never takes longer than `timeout`.

The client sticks to the last node that answered. Errors come back as `ControllerError` with
RocketMQ's code and remark.

An address is `host:port` (plain HTTP) or a base URL whose path prefixes every request's, such as
the Kubernetes API server's service proxy
`https://<apiserver>/api/v1/namespaces/<ns>/services/<bg>-controller-api:9878/proxy`; `headers` and
`ssl` are then the API server's credentials and TLS settings. The token goes in the `X-Brokergroup-Token`
header (`protocol.TOKEN_HEADER`), which such a proxy passes on, and with `bearer` (the default, for controllers
before the header, which read only that) in `Authorization: Bearer` as well. Through a proxy `bearer` is off:
`Authorization` is then the proxy's credential, or absent (a client certificate), never our token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl as tls
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel

from brokergroup.controller import protocol
from brokergroup.controller.codes import ControllerError, ResponseCode

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)

# POSTs that change nothing: safe to send to several nodes at once.
READ_ONLY_POSTS = frozenset({"/v1/sync-state-data", "/v1/broker/next-id"})
CLOSE_WAIT = 0.1
"""Seconds a heartbeat stream waits for the peer's close frame before cutting the connection."""


class ControllerUnavailable(ControllerError):
    def __init__(self, remark: str) -> None:
        super().__init__(ResponseCode.SYSTEM_ERROR, remark)


class _NoAnswer(Exception):
    """One node did not answer (connection error, timeout, or it knows no leader); try another."""


def error_from_body(status: int, body: bytes) -> ControllerError:
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("kind") == "Status":  # a Kubernetes API server's (proxy's) own refusal
            return ControllerError(
                ResponseCode.SYSTEM_ERROR, f"HTTP {status} from the Kubernetes API server: {data.get('message')}"
            )
        code = ResponseCode(int(data.pop("code")))
        data.pop("name", None)
        remark = str(data.pop("remark", ""))
        return ControllerError(code, remark, data)
    except (ValueError, KeyError, TypeError, AttributeError):
        return ControllerError(ResponseCode.SYSTEM_ERROR, f"HTTP {status}: {body[:200]!r}")


def url(address: str, path: str) -> str:
    """The URL of `path` at `address` (`host:port`, or a base URL whose path prefixes `path`)."""
    return f"{address}{path}" if "://" in address else f"http://{address}{path}"


def request_headers(
    token: str | None, extra: Mapping[str, str] | None = None, *, bearer: bool = True
) -> dict[str, str]:
    """`extra` (a proxy's own credentials) and the controller token in `X-Brokergroup-Token`, and with `bearer`
    in `Authorization: Bearer` too."""
    headers = dict(extra or {})
    if token:
        headers[protocol.TOKEN_HEADER] = token
        if bearer:
            if any(k.lower() == "authorization" for k in headers):
                raise ValueError(
                    "headers carry an Authorization of their own: the token cannot go there (bearer=False)"
                )
            headers["Authorization"] = f"Bearer {token}"
    return headers


class ControllerClient:
    def __init__(
        self,
        addresses: Sequence[str],
        *,
        token: str | None = None,
        timeout: float = 10.0,
        hedge_after: float = 0.25,
        session: aiohttp.ClientSession | None = None,
        headers: Mapping[str, str] | None = None,
        ssl: tls.SSLContext | None = None,
        bearer: bool = True,
        proxy: str | None = None,
        server_hostname: str | None = None,
    ) -> None:
        if not addresses:
            raise ValueError("at least one controller address is required")
        if timeout <= 0 or hedge_after <= 0:
            raise ValueError(f"timeout ({timeout}) and hedge_after ({hedge_after}) must be positive seconds")
        self.addresses = [a.removeprefix("http://").rstrip("/") for a in addresses]
        self._token = token
        self._headers = request_headers(token, headers, bearer=bearer)
        self._ssl: tls.SSLContext | bool = True if ssl is None else ssl
        self._proxy = proxy  # an HTTP(S) proxy for every request (a kubeconfig's proxy-url)
        self._server_hostname = server_hostname  # the TLS name to expect (a kubeconfig's tls-server-name)
        self.timeout = timeout
        self.hedge_after = hedge_after
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
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        address: str | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """One request, answered within `timeout` seconds (default: the client's) or `ControllerUnavailable`."""
        timeout = self.timeout if timeout is None else timeout
        headers = self._headers
        errors: list[str] = []

        async def attempt(addr: str, limit: float | None = None) -> tuple[str, Any]:
            try:
                async with (
                    asyncio.timeout(limit),
                    self._http().request(
                        method,
                        url(addr, path),
                        json=body,
                        headers=headers,
                        params=params,
                        ssl=self._ssl,
                        proxy=self._proxy,
                        server_hostname=self._server_hostname,
                    ) as response,
                ):
                    raw = await response.read()
            except TimeoutError as exc:
                errors.append(f"{addr}: no answer within {limit if limit is not None else timeout:.2f} s")
                raise _NoAnswer from exc
            except aiohttp.ClientError as exc:
                errors.append(f"{addr}: {str(exc) or type(exc).__name__}")
                raise _NoAnswer from exc
            if response.status >= 400:
                error = error_from_body(response.status, raw)
                if error.code == ResponseCode.CONTROLLER_NOT_LEADER and address is None:
                    errors.append(f"{addr}: {error.remark}")
                    raise _NoAnswer  # this node knows no leader yet; another may
                raise error
            try:
                return addr, json.loads(raw) if raw else {}
            except ValueError as exc:  # a proxy's or load balancer's page, a truncated body: not a controller's answer
                errors.append(f"{addr}: HTTP {response.status} with a body that is not JSON: {raw[:80]!r}")
                raise _NoAnswer from exc

        order = [address] if address else self.addresses[self._preferred :] + self.addresses[: self._preferred]
        try:
            async with asyncio.timeout(timeout):
                if len(order) == 1:
                    addr, result = await attempt(order[0])
                elif method == "GET" or path in READ_ONLY_POSTS:
                    addr, result = await self._hedged(order, attempt)
                else:
                    addr, result = await self._one_at_a_time(order, attempt, timeout)
        except _NoAnswer:
            raise ControllerUnavailable("no controller answered: " + "; ".join(errors)) from None
        except TimeoutError:
            errors.append(f"no answer within the {timeout} s timeout")
            raise ControllerUnavailable("no controller answered: " + "; ".join(errors)) from None
        if address is None and addr in self.addresses:  # (the list may have changed meanwhile)
            self._preferred = self.addresses.index(addr)
        return result

    def set_addresses(self, addresses: Sequence[str]) -> None:
        """Replace the nodes (a DNS name re-resolved); the node that answered last stays preferred if listed."""
        if not addresses:
            raise ValueError("at least one controller address is required")
        preferred = self.addresses[self._preferred] if self._preferred < len(self.addresses) else None
        self.addresses = [a.removeprefix("http://").rstrip("/") for a in addresses]
        self._preferred = self.addresses.index(preferred) if preferred in self.addresses else 0

    async def _hedged(self, order: list[str], attempt: Any) -> tuple[str, Any]:
        """Ask `order[0]`; every `hedge_after` seconds without an answer, ask the next node too."""
        pending: set[asyncio.Task[tuple[str, Any]]] = set()
        try:
            for i, addr in enumerate(order):
                pending.add(asyncio.ensure_future(attempt(addr)))
                last = i == len(order) - 1
                while pending:
                    done, pending = await asyncio.wait(
                        pending, timeout=None if last else self.hedge_after, return_when=asyncio.FIRST_COMPLETED
                    )
                    if not done:
                        break  # nobody answered yet: ask the next node as well
                    for task in done:
                        if not isinstance(task.exception(), _NoAnswer):
                            return task.result()  # an answer, or a definitive ControllerError
                    if not last:
                        break  # a node failed fast: go on to the next at once
            raise _NoAnswer
        finally:
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, _NoAnswer, ControllerError):
                    await task

    async def _one_at_a_time(self, order: list[str], attempt: Any, timeout: float) -> tuple[str, Any]:
        """Each node in turn, each bounded by an equal share of the time left."""
        end = time.monotonic() + timeout
        for i, addr in enumerate(order):
            share = (end - time.monotonic()) / (len(order) - i)
            with contextlib.suppress(_NoAnswer):
                result: tuple[str, Any] = await attempt(addr, share)
                return result
        raise _NoAnswer

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

    async def replica_info(
        self, broker_name: str, *, broker_id: int | None = None, timeout: float | None = None
    ) -> protocol.ReplicaInfoResponse:
        """With `broker_id`, the answer's heartbeat_age_ms says how long ago the leader heard that broker."""
        params = {"brokerName": broker_name} | ({"brokerId": str(broker_id)} if broker_id is not None else {})
        data = await self.call("GET", "/v1/replica-info", params=params, timeout=timeout)
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

    async def state(self, *, address: str | None = None) -> dict[str, Any]:
        """A node's applied state (node-local: a follower may lag); without `address`, the first to answer."""
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
    broker is seen dead at once. `send` reconnects when the stream dropped, and never takes
    longer than `timeout` seconds: a node that stopped answering (SIGSTOP, a blackholed route)
    would otherwise hold a reconnect for aiohttp's default 300 s. A send that timed out drops
    the stream, so the next send reconnects.
    """

    def __init__(
        self, address: str, *, session: aiohttp.ClientSession, timeout: float = 1.0, token: str | None = None
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"heartbeat send timeout must be positive seconds (got {timeout})")
        self.address = address.removeprefix("http://").rstrip("/")
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = session
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    @property
    def connected(self) -> bool:
        return self._ws is not None and not self._ws.closed

    async def send(self, req: protocol.HeartbeatRequest) -> None:
        """Send one heartbeat; raises `TimeoutError`, `aiohttp.ClientError` or `OSError` on failure."""
        try:
            async with asyncio.timeout(self.timeout):
                if not self.connected:
                    self._ws = await self._session.ws_connect(
                        f"http://{self.address}/v1/broker/heartbeat-stream",
                        headers=self._headers,
                        heartbeat=10.0,
                        timeout=aiohttp.ClientWSTimeout(ws_close=self.timeout),
                    )
                assert self._ws is not None
                await self._ws.send_str(req.model_dump_json(by_alias=True))
        except (TimeoutError, aiohttp.ClientError, OSError):
            await self.close()
            raise

    async def close(self) -> None:
        """Close the stream; a peer that does not answer the close within 0.1 s is cut off (aiohttp
        closes the connection when the close is cancelled)."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(TimeoutError, aiohttp.ClientError, OSError):
                async with asyncio.timeout(CLOSE_WAIT):
                    await ws.close()
