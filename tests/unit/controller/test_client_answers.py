"""A node that answers 200 with a body that is not JSON (a proxy's or load balancer's page in front of a
controller, a body cut short) is a node that did not answer: the client asks the next, and with none left
says which node answered what, as `ControllerUnavailable` (a broker retries that), not a JSON error."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from brokergroup.controller.client import ControllerClient, ControllerUnavailable

Serve = Callable[[web.Response], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    runners: list[web.AppRunner] = []

    async def start(answer: web.Response) -> str:
        async def handle(_: web.Request) -> web.Response:
            return answer

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


def proxy_page() -> web.Response:
    return web.Response(status=200, text="<html><body>upstream connect error</body></html>", content_type="text/html")


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/broker/replica-info"), ("POST", "/v1/broker/register")])
async def test_a_node_answering_a_page_that_is_not_json_is_skipped_for_the_next(
    serve: Serve, method: str, path: str
) -> None:
    page = await serve(proxy_page())
    good = await serve(web.json_response({"masterAddress": "10.0.0.1:8080"}))
    async with ControllerClient([page, good], timeout=5) as client:
        assert await client.call(method, path, body={} if method == "POST" else None) == {
            "masterAddress": "10.0.0.1:8080"
        }


async def test_only_pages_that_are_not_json_make_the_controllers_unavailable_naming_the_node(serve: Serve) -> None:
    page = await serve(proxy_page())
    cut = await serve(web.Response(status=200, body=b'{"masterAddress": "10.0', content_type="application/json"))
    async with ControllerClient([page, cut], timeout=5) as client:
        with pytest.raises(ControllerUnavailable) as caught:
            await client.call("POST", "/v1/broker/register", body={})
    message = str(caught.value)
    assert f"{page}: HTTP 200 with a body that is not JSON: b'<html>" in message
    assert f"{cut}: HTTP 200 with a body that is not JSON" in message
