"""The auth Secret: built once from an injected token function; problems of an existing one named."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from builder_factories import OWNER

from brokergroup.operator.builders import auth_secret_problems, new_auth_secret
from brokergroup.operator.builders.secret import admin_token, missing_keys_patch


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_new_secret_holds_one_fresh_token_per_key() -> None:
    calls: list[int] = []

    def token(size: int) -> str:
        calls.append(size)
        return f"t{len(calls)}"

    secret = new_auth_secret(OWNER, token)
    assert calls == [32, 32, 32]
    assert secret["apiVersion"] == "v1" and secret["kind"] == "Secret" and secret["type"] == "Opaque"
    assert secret["metadata"]["name"] == "demo-controller-auth"
    assert secret["metadata"]["namespace"] == "mq"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "0b7f6c1e-uid"
    assert secret["metadata"]["labels"]["app.kubernetes.io/component"] == "controller"
    assert secret["data"] == {"raftPassword": b64("t1"), "adminToken": b64("t2"), "brokerToken": b64("t3")}
    assert "annotations" not in secret["metadata"]
    assert auth_secret_problems(secret) == []


@pytest.mark.parametrize(
    ("secret", "problems"),
    [
        (
            {"metadata": {"name": "s"}},
            [
                "Secret s: key 'raftPassword' is missing",
                "Secret s: key 'adminToken' is missing",
                "Secret s: key 'brokerToken' is missing",
            ],
        ),
        (
            {"metadata": {"name": "s"}, "data": {"raftPassword": b64("x"), "adminToken": "", "brokerToken": b64("b")}},
            ["Secret s: key 'adminToken' is empty"],
        ),
        (
            {"metadata": {"name": "s"}, "data": {"raftPassword": b64("  \n"), "adminToken": "%%%", "brokerToken": " "}},
            [
                "Secret s: key 'raftPassword' is empty",
                "Secret s: key 'adminToken' is not valid base64",
                "Secret s: key 'brokerToken' is not valid base64",
            ],
        ),
        (  # what the API server returns holds only `data`; a `stringData` left in a dict counts for nothing
            {"metadata": {"name": "s"}, "stringData": {"raftPassword": "x", "adminToken": "y", "brokerToken": "z"}},
            [
                "Secret s: key 'raftPassword' is missing",
                "Secret s: key 'adminToken' is missing",
                "Secret s: key 'brokerToken' is missing",
            ],
        ),
        (
            {"data": {"raftPassword": b64("x"), "brokerToken": b64("b")}},
            ["Secret <unnamed>: key 'adminToken' is missing"],
        ),
    ],
    ids=["no-data", "empty", "blank-and-garbled", "string-data", "unnamed"],
)
def test_problems_of_an_existing_secret(secret: dict[str, Any], problems: list[str]) -> None:
    assert auth_secret_problems(secret) == problems


def test_admin_token_reads_only_a_usable_data_key() -> None:
    assert admin_token({"data": {"adminToken": b64("t0k")}}) == "t0k"
    for broken in (
        {},
        {"data": {}},
        {"data": {"adminToken": "%%%"}},
        {"data": {"adminToken": b64(" ")}},
        {"stringData": {"adminToken": "t0k"}},
    ):
        assert admin_token(broken) is None, broken


def test_a_secret_from_an_older_operator_gets_the_broker_token_and_keeps_its_values() -> None:
    old = {"metadata": {"name": "s"}, "data": {"raftPassword": b64("pw"), "adminToken": b64("adm")}}
    patch = missing_keys_patch(old, lambda size: f"fresh-{size}")
    assert patch == {"data": {"brokerToken": b64("fresh-32")}}  # only the added key: no value is regenerated
    patched = {**old, "data": {**old["data"], **patch["data"]}}
    assert auth_secret_problems(patched) == []
    assert missing_keys_patch(patched, lambda size: "never") is None


def test_an_incomplete_secret_is_left_as_it_is_and_reported() -> None:
    old = {"metadata": {"name": "s"}, "data": {"adminToken": b64("adm")}}
    assert missing_keys_patch(old, lambda size: "x") is None
    assert auth_secret_problems(old) == [
        "Secret s: key 'raftPassword' is missing",
        "Secret s: key 'brokerToken' is missing",
    ]
