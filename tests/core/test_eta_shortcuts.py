"""The replays' shortcuts move no band: arrivals drawn with the generator's methods written out
(the same times and the same copied jobs as ``expovariate`` and ``randrange`` give), and a flat
replay from a state that keeps no owed-wait clocks (it reads only when the job starts)."""

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
        by_methods: list = []
        written_out: list = []
        predictor._stream(by_methods, random.Random(f"{seed}:a"), rate, 100.0, 100.0 + 50 / rate, "a", templates)
        predictor._stream_inline(written_out, random.Random(f"{seed}:a"), rate, 100.0, 100.0 + 50 / rate, "a",
                                 templates)
        assert by_methods and written_out == by_methods


def test_both_stop_at_the_most_arrivals_a_replay_draws():
    templates = [FinishedJob(team="a", submit=0.0, duration_s=60.0, gpus=1)]
    for draw in (predictor._stream, predictor._stream_inline):
        drawn: list = [None] * (predictor._MAX_ARRIVALS - 3)
        draw(drawn, random.Random("s"), 1.0, 0.0, 1e9, "a", templates)
        assert len(drawn) == predictor._MAX_ARRIVALS


@pytest.mark.parametrize("entitled", [False, True])
def test_replays_without_owed_clocks_give_the_bands_of_replays_with_them(entitled):
    teams = [{"name": "a", "guarantee": {"gpu": 2}}, {"name": "b", "guarantee": {"gpu": 1}},
             {"name": "c", "guarantee": {"gpu": 2}, "sharing": "reserve"}]
    if entitled:
        teams[1]["objectives"] = {"entitlement": {"gpu": 2}}
    sc = sim.parse_scenario({"capacity": {"gpu": 5}, "teams": teams,
                             "settings": {"reclaim_after_seconds": 120, "min_runtime_seconds": 0}})
    rng = random.Random(11)
    rows, t = [], 0
    for i in range(160):
        t += rng.randrange(0, 900)
        rows.append((f"j{i:03d}", rng.choice("aabc"), t, rng.randrange(60, 2400), rng.choice((0.5, 1, 1, 2)),
                     rng.choice((0, 0, 1))))
    jobs = sim.trace_from_rows(rows, sc)
    without = eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=25)
    resume.KEEP_OWED_CLOCKS = True
    try:
        kept = eta.backtest(sc, jobs, samples=4, seed=3, poll_seconds=60.0, n_jobs=25)
    finally:
        resume.KEEP_OWED_CLOCKS = False
    assert without["summary"]["sampled"] >= 20
    assert without == kept
