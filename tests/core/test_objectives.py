"""Each objective's definition on hand-built traces (met and not met, at its boundary), the
worst ratio, the private-cluster reference and the objectives' parsing."""

from __future__ import annotations

import math

import pytest

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration import objectives as obj
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.validation import load_json


def scenario(teams, capacity, reclaim_after=0):
    return sim.parse_scenario({"capacity": {"gpu": capacity},
                               "settings": {"reclaim_after_seconds": reclaim_after, "min_runtime_seconds": 0},
                               "teams": teams})


def verdict(sc, rows, mode, targets, team="a", poll=60):
    """The evaluation of ``targets`` for ``team`` after replaying ``rows`` in ``mode``."""
    jobs = sim.trace_from_rows(rows, sc)
    result = sim.simulate(sc, jobs, mode, poll_seconds=poll)
    objectives = {team: obj.parse_objectives(targets, "objectives")}
    return sim.evaluate_run(sc, jobs, result, poll_seconds=poll, objectives=objectives)[team]


# One team with 1 GPU, three 600-second jobs at 0: waits 0, 600 and 1200 s, so its
# nearest-rank p50 is 600 s (10 min) and its p95 and p99 1200 s (20 min).
QUEUE = [("j1", "a", 0, 600, 1), ("j2", "a", 0, 600, 1), ("j3", "a", 0, 600, 1)]


@pytest.mark.parametrize(("key", "boundary"), [
    ("wait_p50_minutes", 10), ("wait_p95_minutes", 20), ("wait_p99_minutes", 20)])
def test_wait_objectives_are_met_at_their_boundary_and_not_below(key, boundary):
    sc = scenario([{"name": "a", "guarantee": {"gpu": 1}}], 1)
    at = verdict(sc, QUEUE, "static", {key: boundary})[key]
    assert at == {"target": boundary, "value": boundary, "met": True}
    below = verdict(sc, QUEUE, "static", {key: boundary - 0.01})[key]
    assert below["value"] == boundary and below["met"] is False


# Reclaim: b borrows a's only GPU from 0; a's job (within its guarantee) arrives at 3570
# and the planner's tick at 3600 stops b's job, which loses its hour of work; a waits 30 s.
RECLAIMED = [("b1", "b", 0, 10000, 1), ("a1", "a", 3570, 100, 1)]
LENDER_AND_BORROWER = [{"name": "a", "guarantee": {"gpu": 1}, "sharing": "lend"},
                       {"name": "b", "guarantee": {"gpu": 0}}]


def test_guarantee_wait_reads_the_reclaim_wait_of_the_entitled_jobs():
    sc = scenario(LENDER_AND_BORROWER, 1)
    at = verdict(sc, RECLAIMED, "share+reclaim", {"guarantee_wait_p99_minutes": 0.5})["guarantee_wait_p99_minutes"]
    assert at == {"target": 0.5, "value": 0.5, "met": True}
    below = verdict(sc, RECLAIMED, "share+reclaim", {"guarantee_wait_p99_minutes": 0.49})
    assert below["guarantee_wait_p99_minutes"]["met"] is False


@pytest.mark.parametrize(("target", "met"), [(1, True), (0.99, False), (0, False)])
def test_max_preempted_per_day_counts_the_teams_stops(target, met):
    sc = scenario(LENDER_AND_BORROWER, 1)
    got = verdict(sc, RECLAIMED, "share+reclaim", {"max_preempted_per_day": target}, team="b")
    assert got["max_preempted_per_day"] == {"target": target, "value": 1.0, "met": met}


def test_a_team_never_stopped_meets_a_zero_target():
    sc = scenario(LENDER_AND_BORROWER, 1)
    got = verdict(sc, RECLAIMED, "share+reclaim", {"max_preempted_per_day": 0, "max_lost_gpu_hours_per_day": 0})
    assert got["max_preempted_per_day"] == {"target": 0, "value": 0.0, "met": True}
    assert got["max_lost_gpu_hours_per_day"]["met"] is True
    assert obj.worst_ratio({"a": got}) == 0.0


@pytest.mark.parametrize(("target", "met"), [(1, True), (0.99, False)])
def test_max_lost_gpu_hours_per_day_counts_the_work_thrown_away(target, met):
    sc = scenario(LENDER_AND_BORROWER, 1)
    got = verdict(sc, RECLAIMED, "share+reclaim", {"max_lost_gpu_hours_per_day": target}, team="b")
    assert got["max_lost_gpu_hours_per_day"] == {"target": target, "value": 1.0, "met": met}


def test_per_day_figures_divide_by_the_submit_span_in_days():
    sc = scenario(LENDER_AND_BORROWER, 1)
    # the same stop, and a last job two days after the first: D = 2
    rows = [*RECLAIMED, ("a2", "a", 2 * 86400, 10, 1)]
    got = verdict(sc, rows, "share+reclaim", {"max_preempted_per_day": 0.5, "max_lost_gpu_hours_per_day": 0.5},
                  team="b")
    assert got["max_preempted_per_day"] == {"target": 0.5, "value": 0.5, "met": True}
    assert got["max_lost_gpu_hours_per_day"] == {"target": 0.5, "value": 0.5, "met": True}


def test_trace_days_is_the_submit_span_and_at_least_one():
    assert obj.trace_days(0, 3600) == 1
    assert obj.trace_days(100, 100 + 3 * 86400) == 3
    assert obj.trace_days(0, 1.5 * 86400) == 1.5


# no_worse_than_private: a (1 GPU, lend) has one job at 3570. In a private cluster of its
# guarantee it starts at once; shared without reclaim it waits for b's borrowed job to end.
# The slack is poll (60) + reclaim_after (0) + 60 = 120 s.
@pytest.mark.parametrize(("b_duration", "difference", "met"), [
    (3690, 0, True),       # a waits 120 s: exactly the slack
    (3691, 1, False),      # one second more
    (3600, -90, True),
])
def test_no_worse_than_private_allows_the_slack_and_no_more(b_duration, difference, met):
    sc = scenario(LENDER_AND_BORROWER, 1)
    rows = [("b1", "b", 0, b_duration, 1), ("a1", "a", 3570, 100, 1)]
    got = verdict(sc, rows, "share", {"no_worse_than_private": True})["no_worse_than_private"]
    assert got == {"target": True, "value": difference, "met": met}
    assert obj.ratio("no_worse_than_private", got) == 1 + difference / 3600


def test_the_slack_counts_the_planners_period_and_reclaim_after():
    sc = scenario(LENDER_AND_BORROWER, 1, reclaim_after=30)
    assert sim.objective_slack(sc, 45) == 45 + 30 + 60
    rows = [("b1", "b", 0, 3570 + 135, 1), ("a1", "a", 3570, 100, 1)]  # a waits 135 s
    got = verdict(sc, rows, "share", {"no_worse_than_private": True}, poll=45)
    assert got["no_worse_than_private"]["value"] == 0 and got["no_worse_than_private"]["met"]


def test_the_private_reference_is_the_team_alone_at_its_guarantee_with_the_jobs_that_fit():
    sc = scenario([{"name": "a", "guarantee": {"gpu": 2}}, {"name": "b", "guarantee": {"gpu": 2}}], 4)
    rows = [("a1", "a", 0, 100, 2), ("a2", "a", 0, 100, 1), ("a3", "a", 0, 100, 1),
            ("a4", "a", 0, 100, 4),   # larger than the guarantee: not one of the jobs compared
            ("b1", "b", 0, 100, 2)]
    jobs = sim.trace_from_rows(rows, sc)
    # alone on 2 GPUs: a1 at once, a2 and a3 after it (100 s)
    assert sim.private_fit_waits(sc, jobs, "a") == {"p50": 100, "p95": 100, "p99": 100}
    assert sim.private_fit_waits(sc, jobs, "a", guarantee=4) == {"p50": 0, "p95": 100, "p99": 100}
    assert sim.private_fit_waits(sc, jobs, "a", guarantee=0) == {"p50": 0, "p95": 0, "p99": 0}
    # the shared run exposes the same jobs' waits (a4 left out)
    shared = sim.simulate(sc, jobs, "share")
    assert len(shared.teams["a"].fit_waits) == 3


def test_a_guarantee_of_zero_makes_no_worse_than_private_say_nothing():
    sc = scenario(LENDER_AND_BORROWER, 1)
    got = verdict(sc, RECLAIMED, "share", {"no_worse_than_private": True}, team="b")
    assert got["no_worse_than_private"] == {"target": True, "value": -120, "met": True}


def test_no_worse_than_private_false_is_no_objective():
    sc = scenario(LENDER_AND_BORROWER, 1)
    assert verdict(sc, RECLAIMED, "share", {"no_worse_than_private": False}) == {}


def test_evaluate_needs_the_private_waits_for_no_worse_than_private():
    with pytest.raises(ValueError, match="private"):
        obj.evaluate(obj.Objectives({"no_worse_than_private": True}), {}, 1, None, 120)


# ---------------------------------------------------------------------------
# Lost work per team


def test_each_teams_lost_work_is_in_its_json_and_they_sum_to_the_total():
    from tests.core.test_simulate_checkpoint import golden_fixture

    sc, jobs = golden_fixture()
    out = sim.simulate(sc, jobs, "share+reclaim").to_dict()
    per_team = [t["lost_gpu_seconds"] for t in out["teams"].values()]
    assert out["lost_gpu_seconds"] > 0 and sum(1 for x in per_team if x > 0) >= 2
    assert math.fsum(per_team) == pytest.approx(out["lost_gpu_seconds"], rel=1e-12)


def test_the_stopped_teams_lost_work_is_its_own():
    sc = scenario(LENDER_AND_BORROWER, 1)
    out = sim.simulate(sc, sim.trace_from_rows(RECLAIMED, sc), "share+reclaim").to_dict()
    assert out["teams"]["b"]["lost_gpu_seconds"] == 3600.0 == out["lost_gpu_seconds"]
    assert out["teams"]["a"]["lost_gpu_seconds"] == 0.0


# ---------------------------------------------------------------------------
# The worst ratio


def test_worst_ratio_is_the_largest_value_over_target_of_every_team():
    evaluations = {
        "a": {"wait_p95_minutes": {"target": 60, "value": 30.0, "met": True},
              "no_worse_than_private": {"target": True, "value": 1800.0, "met": False}},
        "b": {"max_preempted_per_day": {"target": 2, "value": 3.0, "met": False}},
    }
    assert obj.worst_ratio(evaluations) == 1.5
    evaluations["a"]["no_worse_than_private"]["value"] = 3600.0
    assert obj.worst_ratio(evaluations) == 2.0
    assert obj.worst_ratio({}) == 0.0 and obj.worst_ratio({"a": {}}) == 0.0


def test_a_zero_target_has_ratio_zero_when_met_and_infinity_otherwise():
    assert obj.ratio("max_preempted_per_day", {"target": 0, "value": 0.0}) == 0.0
    assert obj.ratio("max_lost_gpu_hours_per_day", {"target": 0, "value": 0.1}) == math.inf


def test_met_objectives_have_a_worst_ratio_of_at_most_one():
    sc = scenario(LENDER_AND_BORROWER, 1)
    rows = [("b1", "b", 0, 3690, 1), ("a1", "a", 3570, 100, 1)]
    got = verdict(sc, rows, "share", {"no_worse_than_private": True, "wait_p99_minutes": 2})
    assert all(e["met"] for e in got.values()) and obj.worst_ratio({"a": got}) == 1.0


# ---------------------------------------------------------------------------
# Parsing


def test_targets_are_kept_in_the_order_of_the_keys():
    got = obj.parse_objectives({"max_preempted_per_day": 1, "wait_p50_minutes": 5}, "objectives")
    assert list(got.targets) == ["wait_p50_minutes", "max_preempted_per_day"]
    assert got == obj.Objectives({"wait_p50_minutes": 5, "max_preempted_per_day": 1})
    assert not obj.parse_objectives(None, "objectives") and not obj.Objectives()


@pytest.mark.parametrize(("raw", "expected"), [
    ({"max_preempted_per_week": 5}, "objectives.max_preempted_per_week: unknown key (got 5); did you mean 'max_preempted_per_day'?"),
    ({"wait_p95_minutes": 0}, "objectives.wait_p95_minutes: must be above 0 (got 0)"),
    ({"wait_p95_minutes": -3}, "objectives.wait_p95_minutes: must be above 0 (got -3)"),
    ({"max_preempted_per_day": -1}, "objectives.max_preempted_per_day: must be 0 or more (got -1)"),
    ({"wait_p95_minutes": "1h"}, "objectives.wait_p95_minutes: must be a number, not a string"),
    ({"wait_p95_minutes": True}, "objectives.wait_p95_minutes: must be a number, not a boolean"),
    ({"no_worse_than_private": "yes"}, "objectives.no_worse_than_private: must be true or false"),
    ({"wait_p95_minutes": float("nan")}, "objectives.wait_p95_minutes: is not a number"),
    (load_json('{"wait_p95_minutes": NaN}', source="s.json"), "objectives.wait_p95_minutes: is not a number (got NaN)"),
    ({"entitlement": [8]}, "objectives.entitlement: must be a mapping of the guarantee's types to amounts, not a list"),
    ({"entitlement": {"gpu": -1}}, "objectives.entitlement.gpu: must be 0 or more (got -1)"),
    ({"entitlement": {"gpu": "8"}}, "objectives.entitlement.gpu: must be a number, not a string"),
    ({"wait_p95_minutes": 1e12}, "objectives.wait_p95_minutes: is too large"),
    ([60], "objectives: must be a mapping of objective to target, not a list"),
])
def test_bad_objectives_name_the_field_the_value_and_the_fix(raw, expected):
    with pytest.raises(ConfigError) as exc:
        obj.parse_objectives(raw, "objectives")
    assert expected in str(exc.value)
    assert "; " in str(exc.value)  # a fix follows


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as exc:
        obj.parse_objectives({"wait_p95_minutes": 0, "wiat_p99_minutes": 1}, "teams[0].objectives")
    assert len(exc.value.problems) == 2


def test_zero_means_never_stopped_for_the_two_stop_keys_only():
    assert obj.parse_objectives({"max_preempted_per_day": 0}, "o").never_stopped
    assert obj.parse_objectives({"max_lost_gpu_hours_per_day": 0}, "o").never_stopped
    assert not obj.parse_objectives({"max_preempted_per_day": 2}, "o").never_stopped
    assert obj.parse_objectives({"no_worse_than_private": True}, "o").needs_private
    assert not obj.parse_objectives({"no_worse_than_private": False}, "o").needs_private


def test_the_python_objectives_meet_the_same_rules():
    with pytest.raises(ConfigError) as exc:
        obj.Objectives({"wait_p95_minutes": 0})
    assert "Objectives.wait_p95_minutes: must be above 0" in str(exc.value)
    assert str(exc.value).startswith("invalid argument")


def test_a_scenario_carries_its_teams_objectives_and_refuses_bad_ones():
    sc = scenario([{"name": "a", "guarantee": {"gpu": 1}, "objectives": {"wait_p95_minutes": 60}},
                   {"name": "b", "guarantee": {"gpu": 1}}], 2)
    assert sc.objectives == {"a": obj.Objectives({"wait_p95_minutes": 60})}
    with pytest.raises(ConfigError) as exc:
        scenario([{"name": "a", "guarantee": {"gpu": 1}, "objectives": {"wait_p95_minute": 60}},
                  {"name": "b", "guarantee": {"gpu": 9}}], 2)
    text = str(exc.value)
    assert "teams[0].objectives.wait_p95_minute: unknown key" in text and "did you mean 'wait_p95_minutes'" in text
    assert "guarantees sum to more than capacity" in text  # the planner's problems too, at once


# ---------------------------------------------------------------------------
# Entitlement: what a team was promised, whatever its guarantee

# a has guarantee 0 but was promised 1 GPU; b holds the whole pool from 0 to 10000. a's
# 1-GPU job at 3570 is within its entitlement, not its guarantee: the planner (which knows
# only guarantees) lets it wait for b's job to end, 6430 s, and the promise is missed.
PROMISED = [{"name": "a", "guarantee": {"gpu": 0}, "objectives": {"entitlement": {"gpu": 1}}},
            {"name": "b", "guarantee": {"gpu": 2}}]
HOGGED = [("b1", "b", 0, 10000, 2), ("a1", "a", 3570, 100, 1)]
PROMISE = {"guarantee_wait_p99_minutes": 0.5, "no_worse_than_private": True}


def test_an_entitled_job_is_one_within_the_entitlement_not_the_guarantee():
    sc = scenario(PROMISED, 2)
    assert sc.entitlement("a") == 1 and sc.entitlement("b") == 2 and sc.guarantee("a") == 0
    got = verdict(sc, HOGGED, "share+reclaim", PROMISE)
    assert got["guarantee_wait_p99_minutes"] == {"target": 0.5, "value": 6430 / 60, "met": False}
    # Against a private cluster of its 1 promised GPU (where it waits 0), less the slack.
    assert got["no_worse_than_private"] == {"target": True, "value": 6430 - (60 + 0 + 60), "met": False}
    # Judged against the guarantee instead, the same run would "hold": no job within 0 GPUs.
    unpromised = scenario([{"name": "a", "guarantee": {"gpu": 0}}, PROMISED[1]], 2)
    held = verdict(unpromised, HOGGED, "share+reclaim", PROMISE)
    assert held["guarantee_wait_p99_minutes"]["met"] and held["no_worse_than_private"]["met"]
    # Given the guarantee it was promised, the planner stops b at the tick: a waits 30 s.
    kept = scenario([{"name": "a", "guarantee": {"gpu": 1}, "objectives": {"entitlement": {"gpu": 1}}},
                     {"name": "b", "guarantee": {"gpu": 1}}], 2)
    assert verdict(kept, HOGGED, "share+reclaim", PROMISE)["guarantee_wait_p99_minutes"]["value"] == 0.5


def test_an_entitlement_equal_to_the_guarantee_changes_nothing():
    rows = [("b1", "b", 0, 5000, 2), ("a1", "a", 100, 100, 1), ("a2", "a", 200, 300, 2)]
    plain = scenario([{"name": "a", "guarantee": {"gpu": 1}, "objectives": {"wait_p95_minutes": 9}},
                      {"name": "b", "guarantee": {"gpu": 1}}], 2)
    promised = scenario([{"name": "a", "guarantee": {"gpu": 1},
                          "objectives": {"wait_p95_minutes": 9, "entitlement": {"gpu": 1}}},
                         {"name": "b", "guarantee": {"gpu": 1}}], 2)
    runs = []
    for sc in (plain, promised):
        jobs = sim.trace_from_rows(rows, sc)
        result = sim.simulate(sc, jobs, "share+reclaim")
        sim.evaluate_run(sc, jobs, result)
        result.sim_seconds = 0
        runs.append(result.to_dict())
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("entitlement", "expected"), [
    ({"cpu": 4}, "teams[0].objectives.entitlement: is not a guarantee of the same shape (got {'cpu': 4})"),
    ({"gpu": 1, "cpu": 4}, "teams[0].objectives.entitlement: is not a guarantee of the same shape"),
    ({"gpu": 3}, "teams[0].objectives.entitlement.gpu: is above the capacity (2 GPUs) (got 3); promise at most"),
    ({}, "teams[0].objectives.entitlement: is empty"),
])
def test_a_scenario_refuses_an_entitlement_that_is_not_a_guarantee_of_its_pool(entitlement, expected):
    with pytest.raises(ConfigError) as exc:
        scenario([{"name": "a", "guarantee": {"gpu": 0}, "objectives": {"entitlement": entitlement}},
                  PROMISED[1]], 2)
    assert expected in str(exc.value) and len(exc.value.problems) == 1


def test_an_entitlement_alone_is_no_objective_and_round_trips():
    sc = scenario(PROMISED, 2)
    assert sc.objectives == {} and sc.entitlements == {"a": 1}
    o = obj.Objectives({"wait_p95_minutes": 5}, entitlement={"ml.g5.xlarge": 2})
    assert o.to_mapping() == {"wait_p95_minutes": 5, "entitlement": {"ml.g5.xlarge": 2}}
    assert obj.parse_objectives(o.to_mapping(), "o") == o
    with pytest.raises(ConfigError) as exc:
        obj.Objectives(entitlement={"ml.g5.xlarge": -2})
    assert "Objectives.entitlement.ml.g5.xlarge: must be 0 or more" in str(exc.value)
