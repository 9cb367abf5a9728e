"""operator/follow.py: projecting the controller's view onto pod labels (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokergroup.controller.protocol import ReplicaIdentity, ReplicasInfo
from brokergroup.operator import follow, labels, roles
from brokergroup.operator.follow import MASTER, SLAVE, LabelStep, PodMeta
from brokergroup.operator.roles import Member, SetView

STS = "bg-broker-0"
ROLE = labels.ROLE_LABEL
BID = labels.BROKER_ID_LABEL
EPOCH = labels.MASTER_EPOCH_ANNOTATION


def pod_name(ordinal: int) -> str:
    return f"{STS}-{ordinal}"


def member(ordinal: int, *, alive: bool = True, in_sync: bool = True, broker_id: int | None = None) -> Member:
    return Member(
        pod=pod_name(ordinal),
        broker_id=ordinal + 1 if broker_id is None else broker_id,
        alive=alive,
        in_sync=in_sync,
    )


def view(
    master: int | None,
    members: list[Member] | None = None,
    *,
    epoch: int = 5,
    master_broker_id: int | None = None,
    sync_state_set_epoch: int = 9,
) -> SetView:
    if members is None:
        members = [member(i) for i in range(3)]
    if master_broker_id is None and master is not None:
        master_broker_id = master + 1
    return SetView(
        name=STS,
        master_pod=None if master is None else pod_name(master),
        master_broker_id=master_broker_id,
        master_epoch=epoch,
        sync_state_set_epoch=sync_state_set_epoch,
        members=tuple(members),
    )


def pod(
    ordinal: int | str,
    *,
    role: str | None = None,
    broker_id: str | None = None,
    epoch: str | None = None,
    terminating: bool = False,
    extra: dict[str, str] | None = None,
) -> PodMeta:
    pod_labels = {labels.BROKER_SET_LABEL: STS, **(extra or {})}
    if role is not None:
        pod_labels[ROLE] = role
    if broker_id is not None:
        pod_labels[BID] = broker_id
    annotations = {} if epoch is None else {EPOCH: epoch}
    name = ordinal if isinstance(ordinal, str) else pod_name(ordinal)
    return PodMeta(name=name, labels=pod_labels, annotations=annotations, terminating=terminating)


def converged(v: SetView, ordinals: range = range(3)) -> list[PodMeta]:
    """Pods labelled exactly as `v` says."""
    out = []
    for i in ordinals:
        role, broker_id = follow.wanted(v, pod_name(i))
        out.append(pod(i, role=role, broker_id=broker_id, epoch=str(v.master_epoch)))
    return out


def apply(meta: PodMeta, step: LabelStep) -> PodMeta:
    """Apply a step's JSON merge patch (None removes the key) to a pod's metadata."""
    patch = step.patch()["metadata"]
    new_labels = dict(meta.labels)
    new_annotations = dict(meta.annotations)
    for target, changes in ((new_labels, patch.get("labels") or {}), (new_annotations, patch.get("annotations") or {})):
        for key, value in changes.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
    return PodMeta(meta.name, new_labels, new_annotations, meta.terminating)


def apply_all(pods: list[PodMeta], steps: list[LabelStep]) -> list[PodMeta]:
    by_name = {p.name: p for p in pods}
    for step in steps:
        by_name[step.pod] = apply(by_name[step.pod], step)
    return [by_name[p.name] for p in pods]


def step_for(steps: list[LabelStep], name: str) -> LabelStep:
    (found,) = [s for s in steps if s.pod == name]
    return found


# ---- PodMeta ------------------------------------------------------------------------------------


def test_pod_meta_of_reads_name_labels_annotations_and_deletion() -> None:
    raw: dict[str, Any] = {
        "metadata": {
            "name": "bg-broker-0-1",
            "labels": {ROLE: "slave"},
            "annotations": {EPOCH: "3"},
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        }
    }
    meta = PodMeta.of(raw)
    assert meta == PodMeta("bg-broker-0-1", {ROLE: "slave"}, {EPOCH: "3"}, terminating=True)
    assert meta.epoch == 3


def test_pod_meta_of_tolerates_missing_and_null_fields() -> None:
    meta = PodMeta.of({"metadata": {"name": "p", "labels": None, "annotations": None}})
    assert meta == PodMeta("p", {}, {}, terminating=False)
    assert PodMeta.of({}) == PodMeta("", {}, {}, terminating=False)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("7", 7), ("0", 0), (None, None), ("", None), ("-1", None), ("x", None), ("²", None), (" 3", None)],
)
def test_pod_meta_epoch_parses_only_plain_digits(raw: str | None, expected: int | None) -> None:
    assert pod(0, epoch=raw).epoch == expected


def test_label_step_patch_removes_keys_with_none_and_omits_empty_sections() -> None:
    step = LabelStep("p", labels={ROLE: None, BID: "2"})
    assert step.patch() == {"metadata": {"labels": {ROLE: None, BID: "2"}}}
    assert LabelStep("p", annotations={EPOCH: "4"}).patch() == {"metadata": {"annotations": {EPOCH: "4"}}}
    assert LabelStep("p").patch() == {"metadata": {}}


# ---- wanted -------------------------------------------------------------------------------------


def test_wanted_master_slave_and_unknown() -> None:
    v = view(1)
    assert follow.wanted(v, pod_name(1)) == (MASTER, "2")
    assert follow.wanted(v, pod_name(0)) == (SLAVE, "1")
    assert follow.wanted(v, pod_name(7)) == (None, None)


def test_wanted_master_uses_the_views_master_broker_id_else_the_members() -> None:
    assert follow.wanted(view(1, master_broker_id=42), pod_name(1)) == (MASTER, "42")
    no_id = SetView(STS, pod_name(1), None, 5, 9, (member(0), member(1)))
    assert follow.wanted(no_id, pod_name(1)) == (MASTER, "2")
    # master pod that is not (yet) a member and has no broker id: master without an id
    bare = SetView(STS, pod_name(1), None, 5, 9, (member(0),))
    assert follow.wanted(bare, pod_name(1)) == (MASTER, None)


# ---- plan_set -----------------------------------------------------------------------------------


def test_no_view_plans_nothing() -> None:
    pods = [pod(0, role=MASTER, broker_id="1", epoch="2"), pod(1), pod(2, role="bogus")]
    assert follow.plan_set(None, pods) == []


def test_converged_pods_plan_nothing() -> None:
    v = view(0)
    assert follow.plan_set(v, converged(v)) == []


def test_fresh_pods_get_role_broker_id_and_epoch() -> None:
    v = view(0, epoch=3)
    steps = follow.plan_set(v, [pod(0), pod(1), pod(2)])
    assert [s.pod for s in steps] == [pod_name(1), pod_name(2), pod_name(0)]  # promotion last
    assert step_for(steps, pod_name(0)).labels == {ROLE: MASTER, BID: "1"}
    assert step_for(steps, pod_name(1)).labels == {ROLE: SLAVE, BID: "2"}
    assert all(s.annotations == {EPOCH: "3"} for s in steps)
    assert step_for(steps, pod_name(0)).why.startswith("promote ")


def test_switchover_demotes_before_promoting() -> None:
    old = view(0, epoch=4)
    new = view(2, epoch=5)
    steps = follow.plan_set(new, converged(old))
    assert [s.pod for s in steps] == [pod_name(0), pod_name(1), pod_name(2)]
    demote, update, promote = steps
    assert demote.labels == {ROLE: SLAVE} and demote.why.startswith("demote ")
    assert update.labels == {} and update.annotations == {EPOCH: "5"}
    assert promote.labels == {ROLE: MASTER} and promote.why.startswith("promote ")


def test_demotions_come_first_even_when_names_sort_the_other_way() -> None:
    # The new master sorts first by name; the demoted pod sorts last: order must still be demote -> promote.
    steps = follow.plan_set(view(0, epoch=5), converged(view(2, epoch=4)))
    kinds = [s.why.split()[0] for s in steps]
    assert kinds == ["demote", "update", "promote"]
    assert steps[0].pod == pod_name(2) and steps[-1].pod == pod_name(0)


def test_stale_view_is_ignored() -> None:
    pods = converged(view(2, epoch=7))
    assert follow.plan_set(view(0, epoch=6), pods) == []
    # one pod with a newer epoch is enough to call the view stale
    mixed = [pod(0, role=SLAVE, broker_id="1", epoch="5"), pod(1, epoch="8"), pod(2)]
    assert follow.plan_set(view(0, epoch=6), mixed) == []
    assert follow.stale_pods(view(0, epoch=6), mixed) == 0


def test_equal_epoch_is_not_stale_and_garbage_epoch_is_rewritten() -> None:
    v = view(0, epoch=6)
    pods = converged(v)
    pods[1] = pod(1, role=SLAVE, broker_id="2", epoch="not-a-number")
    steps = follow.plan_set(v, pods)
    assert steps == [LabelStep(pod_name(1), {}, {EPOCH: "6"}, f"update {pod_name(1)}")]


def test_unknown_pods_lose_role_and_broker_id_labels() -> None:
    v = view(0, members=[member(0), member(1)], epoch=5)
    pods = [*converged(v, range(2)), pod(2, role=SLAVE, broker_id="3", epoch="5")]
    steps = follow.plan_set(v, pods)
    assert steps == [LabelStep(pod_name(2), {ROLE: None, BID: None}, {}, f"update {pod_name(2)}")]


def test_unknown_pod_labelled_master_is_demoted_first() -> None:
    v = view(0, members=[member(0), member(1)], epoch=5)
    pods = [pod(0, epoch="5"), converged(v, range(2))[1], pod(2, role=MASTER, broker_id="3", epoch="5")]
    steps = follow.plan_set(v, pods)
    assert [s.pod for s in steps] == [pod_name(2), pod_name(0)]
    assert steps[0].labels == {ROLE: None, BID: None}
    assert steps[-1].labels == {ROLE: MASTER, BID: "1"}


def test_unknown_pod_without_labels_only_gets_the_epoch() -> None:
    v = view(0, members=[member(0)], epoch=5)
    steps = follow.plan_set(v, [*converged(v, range(1)), pod(1)])
    assert steps == [LabelStep(pod_name(1), {}, {EPOCH: "5"}, f"update {pod_name(1)}")]


def test_epoch_annotation_kept_current_on_every_pod() -> None:
    v = view(1, epoch=12)
    pods = [pod(i, role=r, broker_id=str(i + 1), epoch="11") for i, r in enumerate([SLAVE, MASTER, SLAVE])]
    steps = follow.plan_set(v, pods)
    assert sorted(s.pod for s in steps) == [pod_name(i) for i in range(3)]
    assert all(s.annotations == {EPOCH: "12"} and s.labels == {} for s in steps)


def test_terminating_pods_are_still_patched() -> None:
    v = view(1, epoch=5)
    pods = [*converged(view(0, epoch=4))]
    pods[0] = pod(0, role=MASTER, broker_id="1", epoch="4", terminating=True)
    steps = follow.plan_set(v, pods)
    assert steps[0].pod == pod_name(0) and steps[0].labels == {ROLE: SLAVE}
    assert steps[-1].pod == pod_name(1) and steps[-1].labels == {ROLE: MASTER}


def test_no_master_removes_every_master_label() -> None:
    v = view(None, epoch=6)
    pods = [
        pod(0, role=MASTER, broker_id="1", epoch="5"),
        pod(1, role=SLAVE, broker_id="2", epoch="5"),
        pod(2, role=MASTER, broker_id="3", epoch="5"),
    ]
    steps = follow.plan_set(v, pods)
    after = apply_all(pods, steps)
    assert all(p.labels.get(ROLE) != MASTER for p in after)
    assert [s.why.split()[0] for s in steps] == ["demote", "demote", "update"]
    assert "none" in steps[0].why


def test_no_master_and_unknown_master_pod_loses_its_labels() -> None:
    v = view(None, members=[member(0)], epoch=6)
    steps = follow.plan_set(v, [pod(0, role=SLAVE, broker_id="1", epoch="6"), pod(1, role=MASTER, broker_id="2")])
    assert steps == [LabelStep(pod_name(1), {ROLE: None, BID: None}, {EPOCH: "6"}, steps[0].why)]
    assert steps[0].why.startswith("demote ")


def test_broker_id_change_is_updated() -> None:
    v = view(0, members=[member(0), member(1, broker_id=9)], epoch=5)
    pods = [pod(0, role=MASTER, broker_id="1", epoch="5"), pod(1, role=SLAVE, broker_id="2", epoch="5")]
    assert follow.plan_set(v, pods) == [LabelStep(pod_name(1), {BID: "9"}, {}, f"update {pod_name(1)}")]


def test_master_without_broker_id_drops_a_stale_broker_id_label() -> None:
    v = SetView(STS, pod_name(0), None, 5, 1, ())
    steps = follow.plan_set(v, [pod(0, role=SLAVE, broker_id="4", epoch="5")])
    assert steps[0].labels == {ROLE: MASTER, BID: None}


def test_other_labels_are_never_touched() -> None:
    v = view(0, epoch=5)
    pods = [pod(i, extra={"app": "x", labels.GROUP_LABEL: "bg"}) for i in range(3)]
    for step in follow.plan_set(v, pods):
        assert set(step.labels) <= {ROLE, BID}
        assert set(step.annotations) <= {EPOCH}


@pytest.mark.parametrize(
    ("old_master", "new_master", "old_epoch", "new_epoch"),
    [(0, 2, 4, 5), (None, 1, 0, 1), (1, None, 3, 4), (0, 0, 5, 5), (0, 0, 5, 6)],
)
def test_applying_the_steps_converges(
    old_master: int | None, new_master: int | None, old_epoch: int, new_epoch: int
) -> None:
    new = view(new_master, epoch=new_epoch)
    pods = converged(view(old_master, epoch=old_epoch))
    after = apply_all(pods, follow.plan_set(new, pods))
    assert follow.plan_set(new, after) == []
    assert after == converged(new)


# property: idempotence and never two master labels at once ------------------------------------

_ROLES = st.sampled_from([None, MASTER, SLAVE, "junk"])
_IDS = st.sampled_from([None, "1", "2", "3", "9", ""])
_EPOCHS = st.sampled_from([None, "0", "1", "2", "3", "x"])


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[SetView, list[PodMeta]]:
    n = draw(st.integers(min_value=1, max_value=4))
    ordinals = range(n)
    members = [
        Member(pod_name(i), draw(st.integers(1, 5)), draw(st.booleans()), draw(st.booleans()))
        for i in ordinals
        if draw(st.booleans())
    ]
    master = draw(st.one_of(st.none(), st.sampled_from(list(ordinals))))
    master_id = draw(st.one_of(st.none(), st.integers(1, 5)))
    v = SetView(
        STS, None if master is None else pod_name(master), master_id, draw(st.integers(0, 3)), 1, tuple(members)
    )
    # at most one pod starts labelled master (what the follower maintains)
    first_master = draw(st.one_of(st.none(), st.sampled_from(list(ordinals))))
    pods = []
    for i in ordinals:
        role = draw(_ROLES)
        if role == MASTER and i != first_master:
            role = SLAVE
        if i == first_master:
            role = MASTER
        pods.append(pod(i, role=role, broker_id=draw(_IDS), epoch=draw(_EPOCHS), terminating=draw(st.booleans())))
    return v, pods


@settings(max_examples=300, deadline=None)
@given(_scenario())
def test_property_replanning_after_applying_gives_nothing(scenario: tuple[SetView, list[PodMeta]]) -> None:
    v, pods = scenario
    steps = follow.plan_set(v, pods)
    if follow.is_stale(v, pods):
        assert steps == []
        return
    assert len({s.pod for s in steps}) == len(steps)  # one step per pod
    state = {p.name: p for p in pods}
    for step in steps:
        state[step.pod] = apply(state[step.pod], step)
        # the master Service never selects two pods
        assert sum(1 for p in state.values() if p.labels.get(ROLE) == MASTER) <= 1
    after = [state[p.name] for p in pods]
    assert follow.plan_set(v, after) == []
    assert all(p.annotations.get(EPOCH) == str(v.master_epoch) for p in after)
    assert follow.stale_pods(v, after) == 0
    assert follow.stale_pods(v, pods) == len(steps)


# ---- stale_pods ---------------------------------------------------------------------------------


def test_stale_pods_counts_pods_to_patch_and_is_zero_without_a_view() -> None:
    v = view(2, epoch=5)
    pods = converged(view(0, epoch=5))
    assert follow.stale_pods(v, pods) == 2  # 0 demoted, 2 promoted; 1 already right
    assert follow.stale_pods(v, converged(v)) == 0
    assert follow.stale_pods(None, pods) == 0
    assert follow.stale_pods(None, []) == 0


# ---- set_status ---------------------------------------------------------------------------------


def test_set_status_full_entry() -> None:
    v = view(1, [member(0), member(1), member(2, alive=False, in_sync=False)], epoch=5, sync_state_set_epoch=9)
    assert follow.set_status(v) == {
        "masterPod": pod_name(1),
        "masterBrokerId": 2,
        "masterEpoch": 5,
        "syncStateSet": [pod_name(0), pod_name(1)],
        "syncStateSetEpoch": 9,
        "replicas": [
            {"pod": pod_name(0), "brokerId": 1, "role": SLAVE, "inSync": True, "alive": True},
            {"pod": pod_name(1), "brokerId": 2, "role": MASTER, "inSync": True, "alive": True},
            {"pod": pod_name(2), "brokerId": 3, "role": SLAVE, "inSync": False, "alive": False},
        ],
    }


def test_set_status_omits_none_values() -> None:
    v = view(None, [member(0, in_sync=False)], epoch=3, sync_state_set_epoch=4)
    entry = follow.set_status(v)
    assert "masterPod" not in entry and "masterBrokerId" not in entry
    assert None not in entry.values()
    assert entry["masterEpoch"] == 3 and entry["syncStateSetEpoch"] == 4
    assert entry["syncStateSet"] == []  # empty, not None: kept
    assert entry["replicas"] == [{"pod": pod_name(0), "brokerId": 1, "role": SLAVE, "inSync": False, "alive": True}]


def test_set_status_master_without_broker_id() -> None:
    entry = follow.set_status(SetView(STS, pod_name(0), None, 1, 1, ()))
    assert entry == {
        "masterPod": pod_name(0),
        "masterEpoch": 1,
        "syncStateSet": [],
        "syncStateSetEpoch": 1,
        "replicas": [],
    }


# ---- from the controller's ReplicasInfo ---------------------------------------------------------


def test_plan_from_a_replicas_info_view() -> None:
    def addr(i: int) -> str:
        return f"{pod_name(i)}.{STS}.ns.svc:10911"

    def ident(i: int, alive: bool = True) -> ReplicaIdentity:
        return ReplicaIdentity(broker_name=STS, broker_id=i + 1, broker_address=addr(i), alive=alive)

    info = ReplicasInfo(
        master_broker_id=2,
        master_address=addr(1),
        master_epoch=8,
        sync_state_set_epoch=3,
        in_sync_replicas=[ident(0), ident(1)],
        not_in_sync_replicas=[ident(2, alive=False)],
    )
    v = roles.set_view(STS, info)
    pods = [pod(0, role=MASTER, broker_id="1", epoch="7"), pod(1, role=SLAVE, broker_id="2", epoch="7"), pod(2)]
    steps = follow.plan_set(v, pods)
    assert [s.pod for s in steps] == [pod_name(0), pod_name(2), pod_name(1)]
    assert apply_all(pods, steps) == converged(v)
    assert follow.set_status(v)["syncStateSet"] == [pod_name(0), pod_name(1)]
