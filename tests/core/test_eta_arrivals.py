"""The later arrivals of the wait predictor's replays: drawn as each replay reaches them, for as
long as it runs (a year past the prediction's moment at most, and at most the first
``_MAX_ARRIVALS`` in time order), each replay run once."""

from __future__ import annotations

import random

import pytest

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.advise.executors import Processes
from cdk_gpu_share.core.advise.search import InProcess
from cdk_gpu_share.core.eta import backtest, predictor, run_eta_task
from cdk_gpu_share.core.eta.predictor import FinishedJob, History
from cdk_gpu_share.core.simulate import resume

POLL = 60.0
NOW = 100_000.0


def _borrowing_case() -> tuple[sim.Scenario, resume.QueueState, History]:
    """One GPU; b's guarantee, a's borrowed. b's job r has worked 1000 s of its 1500 (every b job
    the history knows lasts 1500 s), so a's p, waiting since 99900, starts at 100500 unless a job
    of b arrives first; it then runs 20000 s (every a job lasts that long; it saves its work every
    600 s), borrowing: a job of b arriving meanwhile (one an hour on average) takes the GPU back
    at once."""
    sc = sim.parse_scenario({
        "capacity": {"gpu": 1},
        "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
        "teams": [{"name": "a", "guarantee": {"gpu": 0}, "borrow_limit_percent": -1},
                  {"name": "b", "guarantee": {"gpu": 1}}],
    })
    state = resume.QueueState(
        now=NOW,
        running=(resume.RunningJob(id="r", team="b", gpus=1, priority=0, submit=99_000.0, start=99_000.0,
                                   borrowed=False),),
        pending=(resume.PendingJob(id="p", team="a", gpus=1, priority=0, submit=99_900.0, checkpoint_seconds=600.0),))
    finished = [FinishedJob(team="b", submit=3600.0 * i, duration_s=1500.0, gpus=1) for i in range(27)]
    finished += [FinishedJob(team="a", submit=s, duration_s=20_000.0, gpus=1) for s in (40_000.0, 60_000.0)]
    return sc, state, History(finished)


def test_a_job_running_an_hour_after_the_prediction_can_still_be_stopped_by_a_later_arrival():
    # p's first start is 600 s after its submit unless a job of b arrives first; a job of b
    # arriving in the 20000 s p then runs (nearly certain at one an hour) stops it, so its final
    # start (the wait the band gives) is later: in the replay of every seed, whether a job of b
    # arrived in the first hour or not.
    sc, state, history = _borrowing_case()
    for seed in range(8):
        band = predictor.predict(sc, state, "p", history, samples=1, seed=seed, poll_seconds=POLL)
        assert band is not None and band.wait_p50_s > 600.0, seed


def test_each_replay_runs_once(monkeypatch):
    sc, state, history = _borrowing_case()
    calls: list[str] = []
    replay = predictor.replay_start

    def counted(*args, **kwargs):
        calls.append(args[3])
        return replay(*args, **kwargs)

    monkeypatch.setattr(predictor, "replay_start", counted)
    predictor.predict(sc, state, "p", history, samples=16, seed=1, poll_seconds=POLL)
    assert calls == ["p"] * 16


def _stream(rates: dict[str, float], key: str = "7:p:0") -> list[tuple]:
    sc, state, history = _borrowing_case()
    return list(predictor._arrivals(state, history, rates, key).stream())


def test_the_arrivals_are_the_teams_streams_merged_in_time_order():
    rates = {"a": 1 / 30_000, "b": 1 / 20_000}  # about 2,600 in a year: below the cap
    merged = _stream(rates)
    assert len(merged) < predictor._MAX_ARRIVALS
    assert [item[0] for item in merged] == sorted(item[0] for item in merged)
    for team, rate in rates.items():  # each team's stream as its own generator draws it
        own = list(predictor._stream(random.Random(f"7:p:0:{team}"), rate, NOW, NOW + predictor._ARRIVAL_HORIZON_S,
                                     team, History(_borrowing_case()[2].jobs).templates[team]))
        assert [item for item in merged if item[1] == team] == own
    # a year past the moment at most
    assert NOW < merged[0][0] and merged[-1][0] <= NOW + predictor._ARRIVAL_HORIZON_S
    assert merged[-1][0] > NOW + predictor._ARRIVAL_HORIZON_S - 86400


def test_the_cap_keeps_the_first_arrivals_in_time_order(monkeypatch):
    slow = {"a": 1 / 30_000, "b": 1 / 20_000}  # about 2,600 in a year
    every = _stream(slow)
    assert 1000 < len(every) < predictor._MAX_ARRIVALS
    monkeypatch.setattr(predictor, "_MAX_ARRIVALS", 100)
    first = _stream(slow)
    assert first == every[:100] and {item[1] for item in first} == {"a", "b"}
    monkeypatch.undo()
    fast = {"a": 1 / 600, "b": 1 / 300}  # about 158,000 in a year
    capped = _stream(fast)
    assert len(capped) == predictor._MAX_ARRIVALS and capped[-1][0] < NOW + 86400 * 30
    monkeypatch.setattr(predictor, "_MAX_ARRIVALS", 10**6)
    assert _stream(fast)[:len(capped)] == capped


def test_the_made_jobs_are_named_by_team_and_number():
    sc, state, history = _borrowing_case()
    arrivals = predictor._arrivals(state, history, {"a": 1 / 3000, "b": 1 / 900}, "7:p:0")
    items = list(arrivals.stream())[:5]
    jobs = [arrivals.make(item, 10 + i) for i, item in enumerate(items)]
    assert [j.id for j in jobs] == [f"~{item[1]}~{item[2]}" for item in items]
    assert [(j.submit_time, j.team, j.position) for j in jobs] == [(item[0], item[1], 10 + i)
                                                                   for i, item in enumerate(items)]


def _busy_trace():
    sc = sim.parse_scenario({"capacity": {"gpu": 3}, "settings": {"reclaim_after_seconds": 60, "min_runtime_seconds": 0},
                             "teams": [{"name": "a", "guarantee": {"gpu": 1}}, {"name": "b", "guarantee": {"gpu": 2}}]})
    rng = random.Random(4)
    rows, t = [], 0
    for i in range(60):
        t += rng.randrange(0, 3000)  # busy (1.8 of 3 GPUs on average), not overloaded
        rows.append((f"j{i:02d}", rng.choice("ab"), t, rng.randrange(600, 3000), rng.choice((1, 2)), 0))
    return sc, sim.trace_from_rows(rows, sc)


@pytest.mark.parametrize("calibrated", [False, True])
def test_the_bands_are_the_same_with_one_worker_or_two(calibrated):
    sc, jobs = _busy_trace()
    one = backtest(sc, jobs, samples=4, seed=5, poll_seconds=POLL, calibrated=calibrated,
                   executor_of=lambda study: InProcess(study, run_eta_task))
    two = backtest(sc, jobs, samples=4, seed=5, poll_seconds=POLL, calibrated=calibrated,
                   executor_of=lambda study: Processes(study, 2, run_eta_task))
    assert one["summary"]["sampled"] >= 10
    assert one == two
