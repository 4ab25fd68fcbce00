"""core.frozen's makers make the objects the frozen dataclasses' own __init__ makes, and the
replays that use them give the same bands."""

from __future__ import annotations

import dataclasses
import pickle
from fractions import Fraction

import pytest

from cdk_gpu_share.core import eta, frozen
from cdk_gpu_share.core.policy.reclaim_state import JobSpec, PendingGroup, Settings, State
from cdk_gpu_share.core.simulate.inputs import Job
from tests.core.test_eta_shortcuts import _busy_case


@pytest.mark.parametrize("cls, fields", [
    (JobSpec, dict(id="a", team="t", state="pending", demand={"gpu": 1.0}, priority=2, since=3.5)),
    (JobSpec, dict(id="b", team="t", state="running", demand={"gpu": 0.5}, since=1.0, borrowed=True,
                   checkpoint_seconds=600.0)),
    (Job, dict(id="j", team="t", submit_time=1.0, duration_s=60.0, gpus=1.0)),
    (Job, dict(id="k", team="u", submit_time=2.0, duration_s=9.0, gpus=0.5, priority=1, position=4,
               gpus_exact=Fraction(1, 2), checkpoint_seconds=300.0)),
    (PendingGroup, dict(team="t", demand={"gpu": 1.0}, jobs=[], keys=[])),
    (State, dict(now=5.0, capacity={"gpu": 4}, settings=Settings(reclaim_after_seconds=60), teams=(), jobs=())),
])
def test_a_maker_makes_what_the_class_makes(cls, fields):
    made, usual = frozen.maker(cls)(**fields), cls(**fields)
    assert type(made) is cls
    assert made == usual and repr(made) == repr(usual)
    assert dataclasses.astuple(made) == dataclasses.astuple(usual)
    assert pickle.loads(pickle.dumps(made)) == usual
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, dataclasses.fields(cls)[0].name, "changed")


def test_a_maker_refuses_a_field_left_out_or_unknown():
    make = frozen.maker(Job)
    with pytest.raises(TypeError):
        make(id="j", team="t", submit_time=1.0, duration_s=60.0)  # gpus missing
    with pytest.raises(TypeError):
        make(id="j", team="t", submit_time=1.0, duration_s=60.0, gpus=1.0, colour="red")


def test_a_maker_refuses_what_it_cannot_make():
    @dataclasses.dataclass(frozen=True)
    class Later:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class Listed:
        xs: list = dataclasses.field(default_factory=list)

    for cls in (Later, Listed, int):
        with pytest.raises(TypeError):
            frozen.maker(cls)


@pytest.mark.parametrize("entitled", [False, True])
def test_the_replays_give_the_same_bands_with_the_classes_own_init(entitled):
    sc, jobs = _busy_case(entitled)
    fast = eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=25)
    frozen.FAST = False
    try:
        slow = eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=25)
    finally:
        frozen.FAST = True
    assert fast["summary"]["sampled"] >= 20
    assert fast == slow
