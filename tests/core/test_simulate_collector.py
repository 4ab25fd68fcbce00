"""The cyclic garbage collector is off while the engine replays from a state (it would walk the
replay's live objects again and again for nothing), on again afterwards, and what the replay
left behind is freed when it returns."""

from __future__ import annotations

import gc
import weakref

import pytest

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.simulate import resume


def _case():
    sc = sim.parse_scenario({"capacity": {"gpu": 2}, "teams": [{"name": "a", "guarantee": {"gpu": 1}},
                                                                {"name": "b", "guarantee": {"gpu": 1}}],
                             "settings": {"reclaim_after_seconds": 60}})
    jobs = sim.trace_from_rows([("r1", "a", 0, 900, 1, 0), ("r2", "a", 0, 900, 1, 0), ("p1", "b", 10, 300, 1, 0),
                                ("p2", "a", 20, 300, 1, 0)], sc)
    truth = resume.capture_states(sc, jobs, sim.RECLAIM, ["p2"], poll_seconds=30.0)
    return sc, truth.states["p2"]


@pytest.fixture
def engines(monkeypatch):
    """A weak reference to each engine a replay makes, and whether the collector was on when it ran."""
    made: list[tuple[weakref.ref, list[bool]]] = []
    run = resume._Resumed.run

    def watched(self):
        seen: list[bool] = []
        made.append((weakref.ref(self), seen))
        seen.append(gc.isenabled())
        return run(self)

    monkeypatch.setattr(resume._Resumed, "run", watched)
    return made


def _later(k: int) -> list[sim.Job]:
    return [sim.Job(id=f"x{i}", team="b", submit_time=30.0 + 20 * i, duration_s=100.0, gpus=1.0) for i in range(k)]


@pytest.mark.parametrize("arrivals", [0, 40])
def test_a_replay_runs_with_the_collector_off_and_leaves_nothing_behind(engines, arrivals):
    sc, state = _case()
    durations = {j.id: 600.0 for j in (*state.running, *state.pending)}
    assert gc.isenabled()
    start = resume.replay_start(sc, sim.RECLAIM, state, "p2", durations, poll_seconds=30.0, arrivals=_later(arrivals))
    assert start > state.now
    assert gc.isenabled()
    (engine, seen), = engines
    assert seen == [False]
    assert engine() is None  # freed on return, not at some later collection


def test_a_replay_leaves_the_collector_off_when_it_was_off(engines):
    sc, state = _case()
    durations = {j.id: 600.0 for j in (*state.running, *state.pending)}
    gc.disable()
    try:
        resume.replay_start(sc, sim.RECLAIM, state, "p2", durations, poll_seconds=30.0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_replay_releases_its_engine_so_that_no_collection_is_needed(engines):
    # the collector would otherwise walk every object of every replay to free them
    sc, state = _case()
    durations = {j.id: 600.0 for j in (*state.running, *state.pending)}
    gc.collect()
    gc.disable()
    try:
        resume.replay_start(sc, sim.RECLAIM, state, "p2", durations, poll_seconds=30.0, arrivals=_later(40))
        (engine, _), = engines
        assert engine() is None
    finally:
        gc.enable()
