"""Property-based conformance of a live broker master to its own OpenAPI document.

Schemathesis generates valid and invalid requests for every operation of the generated document
(except /metrics, which is not JSON) and sends them to the master of a live broker set: never a
5xx, a documented status, a documented content type, a body matching the documented schema, and
invalid data refused with a 4xx.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import schemathesis
from schemathesis import checks

from brokergroup.broker import wire
from brokergroup.broker.openapi import build_openapi
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import running_group
from tests.integration.broker.conftest import running_set
from tests.integration.conformance import DOCUMENT_CHECKS, SETTINGS
from tests.integration.conftest import ADMIN_TOKEN

pytestmark = pytest.mark.integration

CHECKS = [checks.not_a_server_error, *DOCUMENT_CHECKS]

# The binary batch is sent as the raw bytes schemathesis generates for `format: binary`.
schemathesis.serializer.alias(wire.BATCH_CONTENT_TYPE, "application/octet-stream")


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerSet]:
    base: Path = tmp_path_factory.mktemp("broker-schemathesis")
    with (
        running_group(base / "controllers", admin_token=ADMIN_TOKEN) as controllers,
        running_set(base, controllers, []) as brokers,
    ):
        yield brokers


@pytest.fixture(scope="module")
def base_url(brokers: BrokerSet) -> str:
    return f"http://{brokers.nodes[asyncio.run(brokers.master())].api}"


# Built from the generator at collection time (the set starts later, in a fixture); the first
# test checks that the live broker serves exactly this document.
schema = schemathesis.openapi.from_dict(build_openapi()).exclude(path="/metrics")


async def test_broker_serves_the_generated_document(base_url: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{base_url}/v1/openapi.json") as served:
        assert served.status == 200
        assert served.content_type == "application/json"
        assert await served.json() == build_openapi()


@schema.parametrize()
@SETTINGS
def test_api_conforms_to_its_document(case: Any, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, checks=CHECKS)
