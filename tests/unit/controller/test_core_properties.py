"""Properties of compute-then-apply over generated states, liveness views and requests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from controller_factories import (
    CLUSTER,
    PROPERTY_SETTINGS,
    SET_A,
    SET_B,
    check_code,
    live_info,
    make_state,
    view_of,
)
from hypothesis import given
from hypothesis import strategies as st

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import ControllerState, LivenessView, Result
from brokergroup.controller.protocol import (
    AlterSyncStateSetRequest,
    AlterSyncStateSetResponse,
    ApplyIdRequest,
    CleanBrokerDataRequest,
    ElectMasterRequest,
    ElectMasterResponse,
    Message,
    NextIdRequest,
    RegisterRequest,
    SyncStateDataRequest,
)

M = TypeVar("M", bound=Message)


def _kw(model: type[M]) -> Callable[..., M]:
    """Hide the pydantic signature from `st.builds`, which would otherwise inspect every field."""

    def build(**fields: Any) -> M:
        return model(**fields)

    return build


NAMES = st.sampled_from([SET_A, SET_B])
IDS = st.integers(1, 5)
EPOCHS = st.integers(0, 4)


@st.composite
def states(draw: st.DrawFn) -> ControllerState:
    state = ControllerState()
    for name in draw(st.lists(NAMES, unique=True, max_size=2)):
        registered = draw(st.sets(IDS, min_size=1))
        master_epoch = draw(EPOCHS)
        master = draw(st.none() | IDS) if master_epoch > 0 else None  # may dangle (cleaned master id)
        in_sync = draw(st.sets(st.sampled_from(sorted(registered))))
        if master is not None:
            in_sync.add(master)
        make_state(
            name,
            ids=registered,
            master=master,
            master_epoch=master_epoch,
            sync_state_set=in_sync,
            sync_state_set_epoch=draw(EPOCHS),
            state=state,
        )
    drop_one_sync_entry = draw(st.booleans())
    if drop_one_sync_entry and state.sync_state_info:
        del state.sync_state_info[sorted(state.sync_state_info)[0]]  # the "set became unknown" quirk
    return state


views = st.lists(
    st.builds(
        live_info,
        IDS,
        NAMES,
        epoch=st.integers(-1, 3),
        max_offset=st.sampled_from([-1, 0, 7, 2**31, 2**33]),
        priority=st.integers(0, 2),
    ),
    unique_by=lambda i: (i.broker_name, i.broker_id),
).map(view_of)

elect_requests = st.builds(
    _kw(ElectMasterRequest),
    cluster_name=st.just(CLUSTER),
    broker_name=NAMES,
    broker_id=st.integers(-1, 5),
    designate_elect=st.booleans(),
)
alter_requests = st.builds(
    _kw(AlterSyncStateSetRequest),
    broker_name=NAMES,
    master_broker_id=IDS,
    master_epoch=EPOCHS,
    sync_state_set=st.lists(IDS, min_size=1, max_size=6),
    sync_state_set_epoch=EPOCHS,
)
requests = st.one_of(
    elect_requests,
    alter_requests,
    st.builds(_kw(NextIdRequest), cluster_name=st.just(CLUSTER), broker_name=NAMES),
    st.builds(
        _kw(ApplyIdRequest),
        cluster_name=st.just(CLUSTER),
        broker_name=NAMES,
        applied_broker_id=IDS,
        register_check_code=st.sampled_from([check_code(1), check_code(2), "h:1;5"]),
    ),
    st.builds(
        _kw(RegisterRequest),
        cluster_name=st.just(CLUSTER),
        broker_name=NAMES,
        broker_id=IDS,
        broker_address=st.sampled_from(["10.0.0.1:10911", "10.0.0.2:10911", "h:1"]),
    ),
    st.builds(
        _kw(CleanBrokerDataRequest),
        cluster_name=st.just(CLUSTER),
        broker_name=NAMES,
        broker_controller_ids_to_clean=st.sampled_from([None, "", "1", "2;3", ";", "x", "1;5"]),
        is_clean_living_broker=st.booleans(),
    ),
    st.builds(_kw(SyncStateDataRequest), broker_names=st.lists(NAMES, min_size=1, max_size=3)),
    NAMES,
)


def compute(state: ControllerState, req: Any, live: LivenessView, unclean: bool) -> Result:
    match req:
        case ElectMasterRequest():
            return core.elect_master(state, req, live, enable_elect_unclean_master=unclean)
        case AlterSyncStateSetRequest():
            return core.alter_sync_state_set(state, req, live)
        case NextIdRequest():
            return core.next_broker_id(state, req)
        case ApplyIdRequest():
            return core.apply_broker_id(state, req)
        case RegisterRequest():
            return core.register_broker(state, req, live)
        case CleanBrokerDataRequest():
            return core.clean_broker_data(state, req, live)
        case SyncStateDataRequest():
            return core.get_sync_state_data(state, req, live)
        case str():
            return core.get_replica_info(state, req)
    raise AssertionError(f"unexpected request {req!r}")


@PROPERTY_SETTINGS
@given(state=states(), req=requests, live=views, unclean=st.booleans())
def test_compute_never_mutates_state(state: ControllerState, req: Any, live: LivenessView, unclean: bool) -> None:
    before, deep = state.to_dict(), copy.deepcopy(state)
    result = compute(state, req, live, unclean)
    assert state.to_dict() == before
    assert state == deep
    assert result.ok == (result.code == ResponseCode.SUCCESS)
    if not result.ok and result.code != ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE:
        assert result.events == ()


@PROPERTY_SETTINGS
@given(state=states(), req=requests, live=views, unclean=st.booleans())
def test_apply_is_deterministic(state: ControllerState, req: Any, live: LivenessView, unclean: bool) -> None:
    result = compute(state, req, live, unclean)
    one, two = copy.deepcopy(state), copy.deepcopy(state)
    core.apply_events(one, result.events)
    core.apply_events(two, list(result.events))
    assert one == two and one.to_dict() == two.to_dict()


@PROPERTY_SETTINGS
@given(state=states(), req=elect_requests, live=views, unclean=st.booleans())
def test_applying_an_election_yields_what_the_response_announced(
    state: ControllerState, req: ElectMasterRequest, live: LivenessView, unclean: bool
) -> None:
    result = core.elect_master(state, req, live, enable_elect_unclean_master=unclean)
    before = copy.deepcopy(state)
    core.apply_events(state, result.events)
    name = req.broker_name
    if result.code == ResponseCode.SUCCESS:
        assert isinstance(result.response, ElectMasterResponse)
        sync = state.sync_state_info[name]
        announced = result.response
        assert sync.master_broker_id == announced.master_broker_id
        assert sync.master_epoch == announced.master_epoch == before.sync_state_info[name].master_epoch + 1
        assert sync.sync_state_set_epoch == announced.sync_state_set_epoch
        assert sorted(sync.sync_state_set) == announced.sync_state_set == [announced.master_broker_id]
        first_time = before.sync_state_info[name].master_epoch == 0 and req.broker_id != -1
        assert first_time or live.is_active(name, sync.master_broker_id or 0)
    elif result.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE:
        old, new = before.sync_state_info[name], state.sync_state_info[name]
        assert req.broker_id == -1
        assert (new.master_broker_id, new.master_epoch) == (None, old.master_epoch + 1)
        assert (new.sync_state_set, new.sync_state_set_epoch) == (old.sync_state_set, old.sync_state_set_epoch)
    else:
        assert state == before
    if result.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
        assert isinstance(result.response, ElectMasterResponse)
        assert result.response.master_epoch == state.sync_state_info[name].master_epoch


@PROPERTY_SETTINGS
@given(state=states(), req=alter_requests, live=views)
def test_applying_an_alter_yields_what_the_response_announced(
    state: ControllerState, req: AlterSyncStateSetRequest, live: LivenessView
) -> None:
    result = core.alter_sync_state_set(state, req, live)
    before = copy.deepcopy(state)
    core.apply_events(state, result.events)
    if not result.ok:
        assert state == before
        return
    assert isinstance(result.response, AlterSyncStateSetResponse)
    sync, old = state.sync_state_info[req.broker_name], before.sync_state_info[req.broker_name]
    assert sorted(sync.sync_state_set) == result.response.sync_state_set
    assert sync.sync_state_set_epoch == result.response.sync_state_set_epoch == old.sync_state_set_epoch + 1
    assert (sync.master_broker_id, sync.master_epoch) == (old.master_broker_id, old.master_epoch)
    assert sync.master_broker_id in sync.sync_state_set
    assert all(live.is_active(req.broker_name, bid) for bid in sync.sync_state_set)


@PROPERTY_SETTINGS
@given(state=states(), live=views)
def test_every_set_the_scan_reports_gets_a_real_election(state: ControllerState, live: LivenessView) -> None:
    for name in core.scan_need_reelect_broker_sets(state, live):
        master = state.sync_state_info[name].master_broker_id
        assert master is not None and not live.is_active(name, master)
        result = core.elect_master(state, ElectMasterRequest(broker_name=name), live, enable_elect_unclean_master=True)
        assert result.code == ResponseCode.SUCCESS
