"""The Secret `<bg>-controller-auth`: the Raft password, the controller's admin token and the
brokers' token.

The broker token is the brokers' credential at the controllers: heartbeats, registration and
sync-state-set changes carry it, so nobody else who reaches the controller API can make a replica
electable. Controller pods and broker pods read it from this Secret (env, `secretKeyRef`).

Created once, when it does not exist; never regenerated (a new Raft password would split a running
group). The shell creates it with `secrets.token_urlsafe` as `token`; tests pass a deterministic
function. A Secret that exists but lacks a key is reported (`auth_secret_problems`), not repaired,
except a key added in a later release (`ADDED_KEYS`): `missing_keys_patch` adds it, leaving every
value already there untouched.
It carries no spec hash: there is nothing to compare, and no digest of secret material should
sit in an annotation.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any, Final

from brokergroup.operator import labels, names
from brokergroup.operator.builders.meta import Owner, object_meta

RAFT_PASSWORD_KEY: Final = "raftPassword"  # noqa: S105 (a key name, not a password)
ADMIN_TOKEN_KEY: Final = "adminToken"  # noqa: S105 (a key name)
BROKER_TOKEN_KEY: Final = "brokerToken"  # noqa: S105 (a key name)
KEYS: Final = (RAFT_PASSWORD_KEY, ADMIN_TOKEN_KEY, BROKER_TOKEN_KEY)
ADDED_KEYS: Final = (BROKER_TOKEN_KEY,)
"""Keys a Secret created by an older operator may lack; generating them changes no existing value."""
TOKEN_BYTES: Final = 32


def new_auth_secret(owner: Owner, token: Callable[[int], str]) -> dict[str, Any]:
    """A fresh auth Secret; `token(32)` is called once per key (e.g. `secrets.token_urlsafe`)."""
    values = {key: token(TOKEN_BYTES) for key in KEYS}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(
            owner, names.controller_auth(owner.name), labels.common(owner.name, labels.COMPONENT_CONTROLLER)
        ),
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode("utf-8")).decode("ascii") for key, value in values.items()},
    }


def missing_keys_patch(secret: Mapping[str, Any], token: Callable[[int], str]) -> dict[str, Any] | None:
    """A merge patch adding the `ADDED_KEYS` the Secret lacks (fresh values), or None if it has them all.
    Only a Secret that holds every original key gets one (one an older operator made, or a user's own
    made for it): an incomplete Secret is reported by `auth_secret_problems` and left as it is."""
    data = secret.get("data") or {}
    if any(key not in data for key in KEYS if key not in ADDED_KEYS):
        return None
    added = {key: token(TOKEN_BYTES) for key in ADDED_KEYS if key not in data}
    if not added:
        return None
    return {"data": {key: base64.b64encode(value.encode("utf-8")).decode("ascii") for key, value in added.items()}}


def auth_secret_problems(secret: Mapping[str, Any]) -> list[str]:
    """What makes an existing auth Secret unusable, one sentence per key; empty when it is fine.

    Only `data` counts: the API server turns `stringData` into `data` when it stores a Secret."""
    name = (secret.get("metadata") or {}).get("name") or "<unnamed>"
    data = secret.get("data") or {}
    problems = []
    for key in KEYS:
        raw = _decode(data.get(key))
        if key not in data:
            problems.append(f"Secret {name}: key {key!r} is missing")
        elif raw is None:
            problems.append(f"Secret {name}: key {key!r} is not valid base64")
        elif not raw.strip():
            problems.append(f"Secret {name}: key {key!r} is empty")
    return problems


def admin_token(secret: Mapping[str, Any]) -> str | None:
    """The admin token of an auth Secret, or None when it has none that `auth_secret_problems` accepts."""
    raw = _decode((secret.get("data") or {}).get(ADMIN_TOKEN_KEY))
    return raw.decode("utf-8") if raw is not None and raw.strip() else None


def _decode(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
