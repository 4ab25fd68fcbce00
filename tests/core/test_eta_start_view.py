"""The replays of one state share the planner's view of the starting state (``SHARE_START_VIEW``):
the first builds it, the next ones take a copy. Each taken view is the one the replay would have
built, every replay starts the job when it would have, every band is the same, and the copy is
taken by every replay after the first."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from cdk_gpu_share.core import eta
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.eta import predictor
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.records import trace
from cdk_gpu_share.core.scenario import scenario_from_config
from cdk_gpu_share.core.simulate import planner_view, resume
from tests.core.test_eta_shortcuts import busy_rows

ROOT = Path(__file__).resolve().parents[2]


def _random_case(seed: int):
    """A seeded busy scenario (a reserve team, an entitled team, fractional sizes, a borrow cap,
    in-team preemption, one of the victim orders) and its trace."""
    rng = random.Random(seed)
    teams = [{"name": "a", "guarantee": {"gpu": 2}, "in_team_preemption": rng.random() < 0.5},
             {"name": "b", "guarantee": {"gpu": 1}, "borrow_limit_percent": rng.choice((-1, 100, 300))},
             {"name": "c", "guarantee": {"gpu": 2}, "sharing": rng.choice(("reserve", "lend"))}]
    if rng.random() < 0.5:
        teams[1]["objectives"] = {"entitlement": {"gpu": 2}}
    settings = {"reclaim_after_seconds": rng.choice((0, 120, 600)), "min_runtime_seconds": rng.choice((0, 300)),
                "victim_order": rng.choice(("youngest", "checkpoint"))}
    sc = sim.parse_scenario({"capacity": {"gpu": 5}, "teams": teams, "settings": settings})
    return sc, sim.trace_from_rows(busy_rows(rng, 150), sc)


def _sample_case():
    """The shipped sample trace under the ``fairshare`` backend of the repository's platform.yaml."""
    config = load_config(ROOT / "platform.yaml")
    scenario = sim.parse_scenario(scenario_from_config(config, "fairshare"))
    return scenario, sim.parse_jobs(io.StringIO(trace.trace_text(trace.sample_jobs())), scenario)


def _switched(value: bool, run, name: str = "SHARE_START_VIEW"):
    saved = getattr(resume, name)
    setattr(resume, name, value)
    try:
        return run()
    finally:
        setattr(resume, name, saved)


def _states(sc, jobs, n: int):
    """Up to ``n`` states at the arrival of a job that waited, with the history known then."""
    truth = eta.capture_states(sc, jobs, sim.RECLAIM, [j.id for j in jobs], poll_seconds=60.0)
    out = []
    for job in jobs:
        state = truth.states[job.id]
        if truth.first_start[job.id] > job.submit_time and len(state.pending) > 1:
            finished = [predictor.FinishedJob(team=j.team, submit=j.submit_time, duration_s=j.duration_s,
                                              gpus=j.gpus, gpus_exact=j.gpus_exact)
                        for j in jobs if truth.completion[j.id] < state.now]
            if finished:
                out.append((job.id, state, predictor.History(finished)))
    return out[::max(1, len(out) // n)][:n]


def _starts(sc, job_id, state, history, samples: int) -> list:
    """Each replay's start of the job, the replays drawn as the predictor draws them, sharing one dict."""
    rates = predictor._rates(state, history)
    shared: dict = {}
    starts = []
    for k in range(samples):
        key = f"1:{job_id}:{k}"
        rng = random.Random(key)
        durations = {j.id: predictor._draw(history.durations(j.team), j.worked(state.now), rng) for j in state.running}
        durations.update({j.id: predictor._draw(history.durations(j.team), j.progress_s, rng) for j in state.pending})
        later = predictor._arrivals(state, history, rates, key)
        for final in (True, False):
            starts.append(resume.replay_start(sc, sim.RECLAIM, state, job_id, durations, arrivals=later,
                                              poll_seconds=60.0, final=final, shared=shared))
    return starts


SWITCHES = ["SHARE_START_VIEW", "SHARE_START_JOBS"]


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_replays_taking_the_start_view_start_each_job_when_replays_building_it_do(seed, switch):
    sc, jobs = _random_case(seed)
    states = _states(sc, jobs, 4)
    assert states
    for job_id, state, history in states:
        taken = _starts(sc, job_id, state, history, 5)
        built = _switched(False, lambda j=job_id, s=state, h=history: _starts(sc, j, s, h, 5), switch)
        assert taken == built


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize("case", ["random", "sample"])
def test_the_bands_are_those_of_replays_building_the_start_view(case, switch):
    sc, jobs = _random_case(7) if case == "random" else _sample_case()
    taken = eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=12)
    built = _switched(False, lambda: eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=12),
                      switch)
    assert taken["summary"]["sampled"] >= 8
    assert taken == built


def _view_of(view: planner_view.PlannerView, runs) -> tuple:
    """What a view holds, by value."""
    index = view.running_jobs
    return (view.specs, index.keys, index.jobs, index.team, index.ids, index.demands, index.priorities,
            {gkey: (g.team, g.demand, g.jobs, g.keys) for gkey, g in view.groups.items()},
            [(r.job.position, r.pending_spec, r.pkey, r.grouped, r.running_spec) for r in runs],
            view.touched)


@pytest.mark.parametrize("seed", [1, 4])
def test_a_taken_start_view_is_the_view_the_replay_builds(seed, monkeypatch):
    sc, jobs = _random_case(seed)
    engines = []
    # The engines as made, not run: the views are compared as the replays start.
    monkeypatch.setattr(resume, "_replayed", lambda engine, clock: engines.append(engine))
    for job_id, state, _ in _states(sc, jobs, 3):
        durations = {j.id: 600.0 + i for i, j in enumerate((*state.running, *state.pending))}
        shared: dict = {}
        for _ in range(2):
            resume.replay_start(sc, sim.RECLAIM, state, job_id, durations, poll_seconds=60.0, shared=shared)
        _switched(False, lambda s=state, j=job_id, d=durations: resume.replay_start(
            sc, sim.RECLAIM, s, j, d, poll_seconds=60.0, shared={}))
        first, taker, builder = engines[-3:]
        n = len(state.running) + len(state.pending)
        builder.view.state(state.now)  # as its first planner call would
        assert taker.view.touched == {}
        assert _view_of(taker.view, taker.runs[:n]) == _view_of(builder.view, builder.runs[:n])
        assert _view_of(first.view, first.runs[:n]) == _view_of(builder.view, builder.runs[:n])
        # The lists are the taker's own: the first replay's moves leave them alone.
        assert taker.view.running_jobs.jobs is not first.view.running_jobs.jobs
        assert all(taker.view.groups[k].jobs is not g.jobs for k, g in first.view.groups.items())


def test_every_replay_after_the_first_takes_the_start_view(monkeypatch):
    sc, jobs = _random_case(2)
    job_id, state, history = max(_states(sc, jobs, 100), key=lambda s: len(s[1].pending))
    taken, specs = [], []
    take, pending_key = planner_view.PlannerView.take, reclaim.pending_key
    monkeypatch.setattr(planner_view.PlannerView, "take", lambda self, *a: taken.append(1) or take(self, *a))
    # A pending job's spec is made with its rule-2 key: one call each.
    monkeypatch.setattr(reclaim, "pending_key", lambda spec: specs.append(spec.id) or pending_key(spec))
    _starts(sc, job_id, state, history, 4)
    assert len(taken) == 7  # 8 replays (4 draws, first and final start): the first builds the view
    pending = {p.id for p in state.pending}
    with_copy = sum(1 for i in specs if i in pending)
    specs.clear()
    _switched(False, lambda: _starts(sc, job_id, state, history, 4))
    built = sum(1 for i in specs if i in pending)
    # Building, each replay makes the spec of every pending job of the state that its first
    # planner call (or a tick's test) reads; taking, only the first replay makes them.
    assert with_copy == len(pending) and built > 2 * with_copy


def test_the_replays_of_one_state_make_its_jobs_once_and_each_run_carries_its_duration(monkeypatch):
    sc, jobs = _random_case(3)
    job_id, state, history = max(_states(sc, jobs, 100), key=lambda s: len(s[1].pending))
    made, engines = [], []
    start_jobs = resume._start_jobs
    monkeypatch.setattr(resume, "_start_jobs", lambda *a: made.append(a[2]) or start_jobs(*a))
    _starts(sc, job_id, state, history, 4)
    assert made == [None]  # 8 replays, the jobs made once, with no duration
    replayed = resume._replayed
    # Each engine's runs (the engine is released once its replay has answered).
    monkeypatch.setattr(resume, "_replayed", lambda engine, *a: engines.append(engine.runs) or replayed(engine, *a))
    durations = {j.id: 600.0 + i for i, j in enumerate((*state.running, *state.pending))}
    shared: dict = {}
    for _ in range(2):
        resume.replay_start(sc, sim.RECLAIM, state, job_id, durations, poll_seconds=60.0, shared=shared)
    first, second = engines
    n = len(state.running) + len(state.pending)
    assert all(a.job is b.job for a, b in zip(first[:n], second[:n]))
    assert [r.duration for r in second[:len(state.running)]] == [
        max(durations[j.id], j.worked(state.now)) for j in state.running]
    assert [r.duration for r in second[len(state.running):n]] == [
        max(durations[j.id], j.progress_s) for j in state.pending]
