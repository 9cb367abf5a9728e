"""The broker pods' identity: patch on the group's broker pods by name, nothing else."""

from __future__ import annotations

from builder_factories import OWNER, children, spec


def test_the_broker_role_grants_patch_on_the_groups_broker_pods_by_name_only() -> None:
    built = children(spec(brokers={"sets": 2, "replicas": 2}))
    role = built[("Role", "demo-broker")]
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["patch"],
            "resourceNames": ["demo-broker-0-0", "demo-broker-0-1", "demo-broker-1-0", "demo-broker-1-1"],
        }
    ]
    binding = built[("RoleBinding", "demo-broker")]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "demo-broker"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo-broker", "namespace": OWNER.namespace}]
    account = built[("ServiceAccount", "demo-broker")]
    # Only pods that ask for the token get it (the broker pods); the controllers' pods get none.
    assert account["automountServiceAccountToken"] is False
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        assert built[(kind, "demo-broker")]["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid


def test_broker_pods_run_as_the_broker_account_and_know_their_pod() -> None:
    built = children(spec())
    pod = built[("StatefulSet", "demo-broker-0")]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "demo-broker"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["BG_BROKER_KUBERNETES__ENABLED"]["value"] == "true"
    assert env["BG_BROKER_KUBERNETES__POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["BG_BROKER_KUBERNETES__NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
