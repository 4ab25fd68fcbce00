"""The replays' arrivals are drawn with the generator's methods written out: the same times and
the same copied jobs as ``expovariate`` and ``randrange`` give, so the bands do not move."""

from __future__ import annotations

import random

import pytest

from cdk_gpu_share.core.eta import predictor
from cdk_gpu_share.core.eta.predictor import FinishedJob


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
