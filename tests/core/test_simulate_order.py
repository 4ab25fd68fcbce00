"""The order of events at one instant: completions in the order the jobs last started, then
trace order (which of two jobs ending together frees its room first decides who starts)."""

from __future__ import annotations

import pytest

from cdk_gpu_share.core import simulate as sim

# Four GPUs: teams a and b are guaranteed 2 each, c nothing. X (a, 1 GPU) and Y (b, 2 GPUs)
# both end at 100 while c's R borrows the fourth GPU. P (a, 2 GPUs, priority 5) and Q (b,
# 2 GPUs) wait beyond their teams' guarantees until then. Whichever of X and Y is applied
# first leaves room for its team's waiting job alone: X first, nothing fits until Y ends too,
# and then P goes first (both are within their guarantees; P has the higher priority); Y
# first, Q fits at once.
SCENARIO = {"capacity": {"gpu": 4}, "teams": [{"name": "a", "guarantee": {"gpu": 2}},
                                               {"name": "b", "guarantee": {"gpu": 2}},
                                               {"name": "c", "guarantee": {"gpu": 0}}]}
LATER = [("R", "c", 2, 1000, 1, 0), ("P", "a", 5, 100, 2, 5), ("Q", "b", 6, 100, 2, 0)]
X_AT_0 = ("X", "a", 0, 100, 1, 0)
Y_AT_1 = ("Y", "b", 1, 99, 2, 0)

CASES = {
    # X and Y start together: trace order, X first.
    "same start": [X_AT_0, ("Y", "b", 0, 100, 2, 0)],
    "X starts first": [X_AT_0, Y_AT_1],
    # X started first although Y's row comes first: the start decides, not the row.
    "X starts first, Y's row first": [Y_AT_1, X_AT_0],
    "Y starts first": [("Y", "b", 0, 100, 2, 0), ("X", "a", 1, 99, 1, 0)],
}


@pytest.mark.parametrize("case, waits", [
    ("same start", {"P": 95, "Q": 194}),
    ("X starts first", {"P": 95, "Q": 194}),
    ("X starts first, Y's row first", {"P": 95, "Q": 194}),
    ("Y starts first", {"P": 195, "Q": 94}),
])
def test_completions_at_one_instant_are_applied_in_the_order_the_jobs_started(case, waits):
    scenario = sim.parse_scenario(SCENARIO)
    jobs = sim.trace_from_rows([*CASES[case], *LATER], scenario)
    result = sim.simulate(scenario, jobs, "share")
    got = {o.id: o for o in result.outcomes}
    assert got["X"].completion == got["Y"].completion == 100
    assert {j: got[j].final_start - got[j].submit_time for j in ("P", "Q")} == waits
    assert result.completed == 5
