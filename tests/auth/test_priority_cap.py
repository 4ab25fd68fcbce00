"""The reclaimer's share of the classic-Batch priority risk (docs/security.md, *Residual risks*):
no IAM key caps SubmitJob's priority,
so the queue reader counts a job's priority no higher than its team's ``max_priority``."""

from __future__ import annotations

from botocore.stub import Stubber

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.policy import reclaim
from tests.builders import BATCH_NOW as NOW
from tests.builders import QUEUE, SETTINGS, expect_listing, job, new_client


def _state(settings, jobs):
    client = new_client()
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        snap = br.read_queue(client, QUEUE, settings, NOW)
        stub.assert_no_pending_responses()
    return snap.state


def test_a_borrowers_high_priority_cannot_shift_reclaim_onto_another_team():
    # team-a lends; team-b and team-c borrow one GPU each. team-c's borrowed job says 9999.
    jobs = [job("b1", "teamb", "RUNNING", started=NOW - 50), job("b2", "teamb", "RUNNING", started=NOW - 300),
            job("c1", "teamc", "RUNNING", started=NOW - 100), job("c2", "teamc", "RUNNING", started=NOW - 400,
                                                                    priority=9999),
            job("a1", "teama", "RUNNABLE", created=NOW - 30)]
    settings = {**SETTINGS, "capacity": {"gpu": 4}}
    state = _state(settings, jobs)
    assert {j["id"]: j["priority"] for j in state["jobs"]}["c2"] == br.DEFAULT_MAX_PRIORITY
    assert all("max_priority" not in t for t in state["teams"])  # the planner's contract is unchanged
    reclaim.parse_state(state)


def test_max_priority_reaches_the_reclaimer_settings_and_caps_there():
    raw = {"platform": {"name": "p"}, "fairshare": {"capacity": {"g5.xlarge": 2}},
           "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}, "max_priority": 500},
                     {"name": "team-b", "guarantee": {"g5.xlarge": 1}}]}
    settings = br.settings_from_config(parse_config(raw))
    by_name = {t["name"]: t for t in settings["teams"]}
    assert by_name["team-a"]["max_priority"] == 500 and "max_priority" not in by_name["team-b"]
    settings = {**SETTINGS, "teams": [{**t, "max_priority": 500} if t["name"] == "team-a" else t
                                      for t in SETTINGS["teams"]]}
    state = _state(settings, [job("a1", "teama", "RUNNING", priority=700), job("b1", "teamb", "RUNNING", priority=700)])
    assert {j["id"]: j["priority"] for j in state["jobs"]} == {"a1": 500, "b1": 100}


def test_a_job_that_overrides_its_consumable_resource_away_still_counts_against_the_cap():
    """Consumable-resource quantities (docs/security.md, *Residual risks*): IAM sees which consumable resource a job names (another team's is
    denied, tests/auth/matrix.py), not its quantity. The reclaimer counts the GPUs a job asks
    for, whatever its consumable-resource requirement says, and stops a team above its cap."""
    settings = {**SETTINGS, "capacity": {"gpu": 4}, "teams": [
        {"name": "team-a", "share_identifier": "teama", "guarantee": {"gpu": 2}},
        {"name": "team-b", "share_identifier": "teamb", "guarantee": {"gpu": 1}, "borrow_limit": {"gpu": 1}},
    ]}
    jobs = []
    for i in range(3):  # team-b runs 3 GPUs: guarantee 1 + cap 1, one too many
        j = job(f"b{i}", "teamb", "RUNNING", started=NOW - 100 * (i + 1))
        j["consumableResourceProperties"] = {"consumableResourceList": []}  # overridden away
        jobs.append(j)
    state = _state(settings, jobs)
    assert sum(j["demand"]["gpu"] for j in state["jobs"]) == 3
    result = reclaim.plan(state)
    assert [(v["job"], v["reason"]) for v in result["preemptions"]] == [("b0", "borrow_limit")]
