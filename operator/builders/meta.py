"""Object metadata shared by every child: owner reference, labels, and the spec-hash annotation.

The spec hash is how the I/O shell avoids needless writes: it builds the desired object, and when
the live object carries the same `brokergroup.io/spec-hash` it leaves it alone. The hash covers
the whole object as the operator built it (never what the apiserver defaulted), so any change the
operator would make changes the hash, and nothing else does.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from brokergroup.operator import labels, names

HASH_LENGTH: Final = 16
"""Hex digits kept of a sha256 (64 bits: collisions between two versions of one object are moot)."""


@dataclasses.dataclass(frozen=True)
class Owner:
    """The BrokerGroup that owns the children (from the CR's metadata)."""

    name: str
    namespace: str
    uid: str
    api_version: str = f"{names.GROUP}/{names.VERSION}"
    kind: str = names.KIND


def owner_reference(owner: Owner) -> dict[str, Any]:
    """The owner reference that makes the BrokerGroup the children's controller (garbage collection
    deletes them with it; `blockOwnerDeletion` keeps foreground deletion waiting for them)."""
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(
    owner: Owner, name: str, object_labels: Mapping[str, str], annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`metadata` of a namespaced child of `owner`."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": owner.namespace,
        "labels": dict(object_labels),
        "ownerReferences": [owner_reference(owner)],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def short_hash(value: Any) -> str:
    """First 16 hex digits of the sha256 of `value`'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def without_spec_hash(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `obj` without the spec-hash annotation (and without an emptied `annotations`)."""
    out = copy.deepcopy(dict(obj))
    meta = out.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        meta["annotations"].pop(labels.SPEC_HASH_ANNOTATION, None)
        if not meta["annotations"]:
            del meta["annotations"]
    return out


def spec_hash(obj: Mapping[str, Any]) -> str:
    """Hash of the object as built, ignoring any spec-hash annotation it already carries."""
    return short_hash(without_spec_hash(obj))


def with_spec_hash(obj: dict[str, Any]) -> dict[str, Any]:
    """Put the object's own spec hash on it (in place, replacing a stale one) and return it.

    In place so that a caller who adjusts a built object (say, the replicas of a StatefulSet that
    is waiting to scale down) can re-stamp it; the builders call it on objects they just made.
    """
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(labels.SPEC_HASH_ANNOTATION, None)
        if not annotations:
            del meta["annotations"]
    value = spec_hash(obj)
    meta.setdefault("annotations", {})[labels.SPEC_HASH_ANNOTATION] = value
    return obj


def live_spec_hash(obj: Mapping[str, Any]) -> str | None:
    """The spec hash a live object carries, or None."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(labels.SPEC_HASH_ANNOTATION)
    return value if isinstance(value, str) else None
