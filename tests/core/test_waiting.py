"""Why is my job waiting? The five reasons of :mod:`cdk_gpu_share.core.waiting`, as a case table."""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.waiting import REASON_CODES, TeamView, explain

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
