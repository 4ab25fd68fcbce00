"""Why is my job waiting? The five reasons of :mod:`cdk_gpu_share.core.records.waiting`, as a case table."""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.records.waiting import REASON_CODES, TeamView, explain

T = TeamView


def views(*teams: TeamView) -> dict:
    return {"gpu": list(teams)}


# (case, team, need, teams, capacity, ahead, the reason codes)
CASES = [
    ("more than guarantee plus cap", "a", 5, [T("a", 2, 0, cap=2), T("b", 2, 0)], 8, 0, ["too_large"]),
    ("more than what other teams do not reserve", "a", 4, [T("a", 2, 0), T("b", 5, 0, reserve=True)], 8, 0,
     ["too_large"]),
    ("at its guarantee, borrowing capped", "a", 1, [T("a", 2, 3, cap=1), T("b", 4, 0)], 8, 0, ["capped"]),
    ("lend and reserve teams borrow nothing", "a", 1, [T("a", 2, 2, cap=0), T("b", 4, 0)], 8, 0, ["capped"]),
    ("within its guarantee, its capacity lent out", "a", 2, [T("a", 4, 2), T("b", 2, 6)], 8, 0, ["lent_out"]),
    ("would borrow, nothing idle", "a", 1, [T("a", 2, 2), T("b", 6, 6)], 8, 0, ["no_idle"]),
    ("fits, behind its team's jobs", "a", 1, [T("a", 2, 0), T("b", 2, 0)], 8, 3, ["behind"]),
    ("lent out and behind", "a", 1, [T("a", 4, 2), T("b", 2, 6)], 8, 1, ["lent_out", "behind"]),
    ("idle reserved capacity is not lent", "a", 1, [T("a", 2, 2), T("b", 4, 2, reserve=True), T("c", 2, 2)], 8, 0,
     ["no_idle"]),
]


@pytest.mark.parametrize("case,team,need,teams,capacity,ahead,codes", CASES, ids=[c[0] for c in CASES])
def test_each_reason(case, team, need, teams, capacity, ahead, codes):
    reasons = explain(team, {"gpu": need}, views(*teams), {"gpu": capacity}, ahead=ahead, reclaim_in="within 2 minutes")
    assert [r.code for r in reasons] == codes


def test_the_reasons_are_the_five_named():
    seen = {code for c in CASES for code in c[-1]}
    assert seen == set(REASON_CODES)


def test_the_sentences_name_the_numbers():
    [capped] = explain("a", {"gpu": 1}, views(T("a", 2, 3, cap=1), T("b", 4, 0)), {"gpu": 8})
    assert capped.text == "team a uses 3 of its guarantee 2 gpu and may borrow at most 1: this job would borrow 2"
    [lent] = explain("a", {"gpu": 2}, views(T("a", 4, 2), T("b", 2, 6), T("c", 1, 0)), {"gpu": 9},
                     reclaim_in="within 2 minutes", unit_label="GPU")
    assert lent.text == ("it is within team a's guarantee (2 used of 4 GPUs), but the capacity it lent is in use by"
                         " b (4); it is taken back within 2 minutes")
    assert lent.to_json()["borrowers"] == ["b (4)"]


# ---------------------------------------------------------------------------
# GPU-hour accounting (core/records/usage.py), as the fair-share queue's metrics give it (no LentGpus)


def test_daily_usage_attributes_lending_and_reconciles():
    from cdk_gpu_share.core.records import metrics
    from cdk_gpu_share.core.records.usage import POOL, daily

    day = 1_800_000_000 - 1_800_000_000 % 86400  # midnight UTC
    # 10 GPUs, guarantees 4 + 4 (2 unguaranteed). Minute 1: a uses 8 (borrows 4: 2 from the pool,
    # 2 lent by b, which uses 2 of its 4). Minute 2: a uses 3, b 4.
    series = {
        "a": {metrics.USAGE: {day: 8, day + 60: 3}, metrics.GUARANTEE: {day: 4, day + 60: 4},
              metrics.PREEMPTIONS: {day + 60: 2}},
        "b": {metrics.USAGE: {day: 2, day + 60: 4}, metrics.GUARANTEE: {day: 4, day + 60: 4}},
    }
    a, b, pool = daily(series, capacity_gpus=10)
    assert (a.team, b.team, pool.team) == ("a", "b", POOL)
    assert a.within_gpu_hours * 60 == pytest.approx(4 + 3) and a.borrowed_gpu_hours * 60 == pytest.approx(4)
    assert a.idle_gpu_hours * 60 == pytest.approx(1) and a.preemptions == 2 and a.minutes == 2
    assert b.lent_gpu_hours * 60 == pytest.approx(2) and b.idle_gpu_hours * 60 == pytest.approx(2)
    assert pool.borrowed_gpu_hours * 60 == pytest.approx(2)
    for r in (a, b):
        assert r.within_gpu_hours + r.idle_gpu_hours == pytest.approx(r.guarantee_gpu_hours)
    assert a.borrowed_gpu_hours == pytest.approx(a.lent_gpu_hours + b.lent_gpu_hours + pool.borrowed_gpu_hours)


def test_daily_usage_skips_minutes_without_both_gauges():
    from cdk_gpu_share.core.records import metrics
    from cdk_gpu_share.core.records.usage import daily

    rows = daily({"a": {metrics.USAGE: {0: 1, 60: 1}, metrics.GUARANTEE: {0: 1}}})
    assert [r.minutes for r in rows if r.team == "a"] == [1]
