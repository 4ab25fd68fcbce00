"""The wait predictor with time windows: the values in force at each instant of a replay, from
the trace's origin; windows that change nothing predict what no windows predict."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timezone

import pytest

from cdk_gpu_share.core import eta
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError
from tests.core.test_eta import random_rows

POLL = 60.0
MONDAY = datetime(2026, 1, 5, tzinfo=timezone.utc)
NOON = 12 * 3600.0  # the window opens at trace second 43200 from MONDAY


def noon_scenario(*, windows: bool = True, reclaim_after: int = 0) -> dict:
    """A 2-GPU pool that team a holds, except from 12:00 to 13:00 UTC on Mondays: then b's."""
    doc = {
        "capacity": {"gpu": 2},
        "settings": {"reclaim_after_seconds": reclaim_after, "min_runtime_seconds": 0},
        "windows": [{"name": "noon", "days": ["mon"], "start": "12:00", "end": "13:00"}],
        "teams": [
            {"name": "a", "guarantee": {"gpu": 2}, "borrow_limit_percent": -1,
             "windows": {"noon": {"guarantee": {"gpu": 0}}}},
            {"name": "b", "guarantee": {"gpu": 0}, "borrow_limit_percent": -1,
             "windows": {"noon": {"guarantee": {"gpu": 2}}}},
        ],
    }
    if not windows:
        doc.pop("windows")
        for team in doc["teams"]:
            team.pop("windows")
    return doc


# hb (b, 500 s) and h0 (a, 30000 s) are the finished jobs when b1 arrives at 35000; a1 has
# worked 4500 s then, so every replay draws its duration from h0's: it runs to 60500. b1 (drawn
# 500 s) can start only when b's guarantee rises at noon (43200, a1 then a victim) or when a1 ends.
NOON_ROWS = [
    ("hb", "b", 0, 500, 2, 0),
    ("h0", "a", 500, 30000, 2, 0),
    ("a1", "a", 30500, 100000, 2, 0),
    ("b1", "b", 35000, 600, 2, 0),
]


def _backtest(doc: dict, rows, origin=MONDAY) -> dict:
    sc = sim.parse_scenario(doc)
    sc = sc if origin is None else dataclasses.replace(sc, origin=origin)
    return eta.backtest(sc, sim.trace_from_rows(rows, sc), samples=8, seed=3, poll_seconds=POLL)


def test_a_job_waiting_for_a_windows_guarantee_is_predicted_to_start_at_the_boundary():
    doc = _backtest(noon_scenario(), NOON_ROWS)
    [entry] = doc["jobs"]
    assert entry["job_id"] == "b1" and entry["actual_wait_s"] == NOON - 35000
    for q in ("wait_p10_s", "wait_p50_s", "wait_p90_s"):
        assert abs(entry[q] - (NOON - 35000)) <= POLL, (q, entry)
    # Without the window b1 waits at least for a1's end at 60500 (longer when a job of a, within
    # its guarantee, arrives before): a longer wait in every replay.
    [plain] = _backtest(noon_scenario(windows=False), NOON_ROWS, origin=None)["jobs"]
    assert plain["wait_p10_s"] == 60500 - 35000 > entry["wait_p90_s"] + POLL


def every_day_scenario(*, windows: bool) -> dict:
    """Two teams of a 4-GPU pool; windows every day that give each team its own values."""
    days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    doc = {
        "capacity": {"gpu": 4},
        "settings": {"reclaim_after_seconds": 300, "min_runtime_seconds": 0},
        "windows": [{"name": "early", "days": days, "start": "01:00", "end": "03:30"},
                    {"name": "late", "days": days, "start": "06:10", "end": "09:00", "timezone": "Europe/Berlin"}],
        "teams": [
            {"name": "a", "guarantee": {"gpu": 2}, "borrow_limit_percent": 50,
             "windows": {"early": {"guarantee": {"gpu": 2}}, "late": {"borrow_limit_percent": 50}}},
            {"name": "b", "guarantee": {"gpu": 2}, "borrow_limit_percent": -1,
             "windows": {"late": {"guarantee": {"gpu": 2}}}},
        ],
    }
    if not windows:
        doc.pop("windows")
        for team in doc["teams"]:
            team.pop("windows")
    return doc


def test_windows_that_give_the_base_values_predict_the_same_bands():
    rows = random_rows(random.Random(11), 60)
    assert rows[-1][2] > 9 * 3600  # the trace runs through every boundary of the first day
    with_windows = _backtest(every_day_scenario(windows=True), rows)
    without = _backtest(every_day_scenario(windows=False), rows, origin=None)
    assert with_windows["summary"]["sampled"] >= 10
    assert with_windows == without


def test_a_state_carries_the_rise_that_a_pending_job_waits_from():
    # b1 waited from 35000; b's guarantee rose at noon. At b2's arrival (after noon, before b1 may
    # reclaim, 600 s after the rise) the state says b1 is owed room from the rise.
    sc = sim.parse_scenario(noon_scenario(reclaim_after=600))
    sc = dataclasses.replace(sc, origin=MONDAY)
    rows = [*NOON_ROWS, ("b2", "b", NOON + 100, 600, 2, 0)]
    truth = eta.capture_states(sc, sim.trace_from_rows(rows, sc), sim.RECLAIM, {"b1", "b2"}, poll_seconds=POLL)
    assert truth.states["b2"].pending_job("b1").since == NOON
    assert truth.states["b1"].pending_job("b1").since is None  # its submit
    assert truth.final_start["b1"] == NOON + 600
    # Replayed from that state, b1 reclaims at the rise + 600 s; counted from its submit it
    # would reclaim at the first tick.
    state = truth.states["b2"]
    durations = {"a1": 100000.0, "b1": 600.0, "b2": 600.0}
    assert {j.id for j in (*state.running, *state.pending)} == set(durations)
    assert eta.replay_start(sc, sim.RECLAIM, state, "b1", durations, poll_seconds=POLL) == NOON + 600
    from_submit = dataclasses.replace(state, pending=tuple(dataclasses.replace(p, since=None) for p in state.pending))
    assert eta.replay_start(sc, sim.RECLAIM, from_submit, "b1", durations, poll_seconds=POLL) == NOON + 120


def test_a_windowed_replay_without_an_origin_is_refused_naming_origin():
    sc = sim.parse_scenario(noon_scenario())
    with pytest.raises(ConfigError) as exc:
        eta.backtest(sc, sim.trace_from_rows(NOON_ROWS, sc), samples=2, seed=1, poll_seconds=POLL)
    assert [p.field for p in exc.value.problems] == ["--origin"]


def test_a_live_queue_reads_the_windows_at_its_own_clock():
    # The live queue's times are epoch seconds: b1, waiting on Monday 09:43:20 UTC, is expected to
    # start at noon, when b's guarantee rises.
    sc = sim.parse_scenario(noon_scenario())
    t0 = MONDAY.timestamp()
    jobs = [eta.LiveJob(id="a1", team="a", gpus=2, priority=0, since=t0 + 30500, running=True),
            eta.LiveJob(id="b1", team="b", gpus=2, priority=0, since=t0 + 35000, running=False)]
    state, left_out = eta.live_state(t0 + 35000, jobs, sc)
    assert left_out == [] and state.running[0].borrowed is False
    history = eta.History([eta.FinishedJob(team="b", submit=t0, duration_s=500, gpus=2),
                           eta.FinishedJob(team="a", submit=t0 + 500, duration_s=30000, gpus=2)])
    estimate = eta.live_estimate(sc, state, "b1", history, poll_seconds=POLL, samples=4)
    assert estimate["start_in_p50_s"] == estimate["start_in_p90_s"] == NOON - 35000
    # In the window a1 borrows: b's guarantee is in force.
    state, _ = eta.live_state(t0 + NOON + 10, jobs, sc)
    assert state.running[0].borrowed is True
    # ... and b1 is owed room from the rise, not from its submit.
    assert state.pending_job("b1").since == t0 + NOON
    assert eta.live_state(t0 + 35000, jobs, sc)[0].pending_job("b1").since is None
