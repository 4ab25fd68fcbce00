"""The replays' shortcuts move no band: arrivals drawn with the generator's methods written out
(the same times and the same copied jobs as ``expovariate`` and ``randrange`` give), a flat
replay from a state that keeps no owed-wait clocks (it reads only when the job starts), and the
replays of one state sharing dispatch's answers to the rules (every size the arrivals may copy
indexed, so that they share them)."""

from __future__ import annotations

import random

import pytest

from cdk_gpu_share.core import eta
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.eta import predictor
from cdk_gpu_share.core.eta.predictor import FinishedJob
from cdk_gpu_share.core.simulate import resume


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 1000, 1025])
@pytest.mark.parametrize("rate", [1e-4, 0.01, 3.0])
def test_the_written_out_draws_are_the_generators_own(n, rate):
    templates = [FinishedJob(team="a", submit=float(i), duration_s=60.0 + i, gpus=1) for i in range(n)]
    for seed in range(5):
        by_methods = list(predictor._stream(random.Random(f"{seed}:a"), rate, 100.0, 100.0 + 50 / rate, "a",
                                            templates))
        written_out = list(predictor._stream_inline(random.Random(f"{seed}:a"), rate, 100.0, 100.0 + 50 / rate, "a",
                                                    templates))
        assert by_methods and written_out == by_methods


def _busy_case(entitled: bool):
    teams = [{"name": "a", "guarantee": {"gpu": 2}}, {"name": "b", "guarantee": {"gpu": 1}},
             {"name": "c", "guarantee": {"gpu": 2}, "sharing": "reserve"}]
    if entitled:
        teams[1]["objectives"] = {"entitlement": {"gpu": 2}}
    sc = sim.parse_scenario({"capacity": {"gpu": 5}, "teams": teams,
                             "settings": {"reclaim_after_seconds": 120, "min_runtime_seconds": 0}})
    return sc, sim.trace_from_rows(busy_rows(random.Random(11), 160), sc)


def busy_rows(rng: random.Random, n: int) -> list[tuple]:
    """``n`` trace rows of teams a (twice as likely as the others), b and c, up to a quarter of an
    hour apart, of 1 to 40 minutes, 0.5 to 2 GPUs, one in three of priority 1."""
    rows, t = [], 0
    for i in range(n):
        t += rng.randrange(0, 900)
        rows.append((f"j{i:03d}", rng.choice("aabc"), t, rng.randrange(60, 2400), rng.choice((0.5, 1, 1, 2)),
                     rng.choice((0, 0, 1))))
    return rows


@pytest.mark.parametrize("entitled", [False, True])
@pytest.mark.parametrize("switch", [("KEEP_OWED_CLOCKS", True), ("SHARE_RULE_ANSWERS", False),
                                    ("SHARE_START_VIEW", False)])
def test_the_replays_shortcuts_give_the_bands_of_replays_without_them(entitled, switch):
    sc, jobs = _busy_case(entitled)
    fast = eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=25)
    name, value = switch
    saved = getattr(resume, name)
    setattr(resume, name, value)
    try:
        slow = eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=25)
    finally:
        setattr(resume, name, saved)
    assert fast["summary"]["sampled"] >= 20
    assert fast == slow


def test_the_replays_of_one_state_share_one_table_of_answers():
    sc, jobs = _busy_case(False)
    truth = eta.capture_states(sc, jobs, sim.RECLAIM, [j.id for j in jobs], poll_seconds=60.0)
    job = next(j for j in jobs[40:] if truth.first_start[j.id] > j.submit_time)
    state = truth.states[job.id]
    finished = [predictor.FinishedJob(team=j.team, submit=j.submit_time, duration_s=j.duration_s, gpus=j.gpus,
                                      gpus_exact=j.gpus_exact) for j in jobs if truth.completion[j.id] < state.now]
    history = predictor.History(finished)
    shared: dict = {}
    for k in range(3):
        later = predictor._arrivals(state, history, predictor._rates(state, history), f"1:{job.id}:{k}")
        durations = {j.id: 600.0 for j in (*state.running, *state.pending)}
        resume.replay_start(sc, sim.RECLAIM, state, job.id, durations, arrivals=later, poll_seconds=60.0,
                            shared=shared)
    tables = [key for key in shared if not isinstance(key[0], str)]  # the others: ("start view", ...), ...
    assert len(tables) == 1  # every replay indexed the same sizes
