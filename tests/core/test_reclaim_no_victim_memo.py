"""Within one plan, a (team, demand) whose reclaim found no victim is not searched again until
usage changes: every plan is the one of a planner that searches again for every pending job."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from cdk_gpu_share.core.policy import reclaim
from tests.builders import examples, grouped, shared_demands, states


def _plans(state: reclaim.State) -> tuple[dict, dict]:
    remembered = reclaim.plan_state(state)
    reclaim.REMEMBER_NO_RECLAIM = False
    try:
        searched = reclaim.plan_state(state)
    finally:
        reclaim.REMEMBER_NO_RECLAIM = True
    return remembered, searched


@settings(max_examples=examples(400), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(states(max_jobs=40, max_teams=5, contended=True))
def test_remembering_where_reclaim_found_no_victim_changes_no_plan(state):
    # The simulator's way in: one demand dict per size, pending jobs in groups per team and size.
    parsed = reclaim.parse_state(state)
    for shaped in (shared_demands(parsed), grouped(parsed)):
        remembered, searched = _plans(shaped)
        assert remembered == searched
