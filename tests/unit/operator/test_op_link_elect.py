"""`ControllerLink.elect` tells a controller group with no answer (unreachable, or no node knowing a leader, as
while the Raft group elects one after a restart) from a controller's refusal: the operator keeps an elect-master
request Pending and asks again on the first, and answers Failed on the second. The servers speak the controller's
HTTP error contract (`ControllerError.to_body`) on loopback."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from brokergroup.controller.codes import ControllerError, ResponseCode, http_status
from brokergroup.operator.controller_link import ControllerLink, ControllerLinkError, ControllerUnreachable

Serve = Callable[[ResponseCode, str], Awaitable[str]]


@pytest.fixture
def controller(aiohttp_server: Any) -> Serve:
    """A controller address whose elect-master answers `code` (pytest-aiohttp's server, closed by the fixture)."""

    async def serve(code: ResponseCode, remark: str) -> str:
        async def refuse(_: web.Request) -> web.Response:
            return web.json_response(ControllerError(code, remark).to_body(), status=http_status(code))

        app = web.Application()
        app.router.add_post("/v1/elect-master", refuse)
        server = await aiohttp_server(app, host="127.0.0.1")
        return f"127.0.0.1:{server.port}"

    return serve


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"  # closed again when the block ends: nothing listens there


async def test_no_controller_knowing_a_leader_is_unreachable(controller: Serve) -> None:
    leaderless = await controller(ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state")
    with pytest.raises(ControllerUnreachable, match="not in leader state"):
        await ControllerLink(leaderless, token="admin", timeout=5).elect("bg-broker-0", 2)


async def test_nothing_listening_is_unreachable() -> None:
    with pytest.raises(ControllerUnreachable, match="elect bg-broker-0 broker 2"):
        await ControllerLink(closed_port(), token="admin", timeout=5).elect("bg-broker-0", 2)


async def test_a_refusal_is_not_unreachable(controller: Serve) -> None:
    refusing = await controller(ResponseCode.CONTROLLER_INVALID_REQUEST, "designateElect needs brokerId")
    with pytest.raises(ControllerLinkError, match="designateElect needs brokerId") as caught:
        await ControllerLink(refusing, token="admin", timeout=5).elect("bg-broker-0", 2)
    assert not isinstance(caught.value, ControllerUnreachable)
