"""The reclaim planner's tree rules, case by case: admission at each level, entitlement at a
group, reclaim from outside the division before a sibling, and rule 1 for groups. Each case
says what the flat planner does with the same jobs, so the difference is the tree's."""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.policy import reclaim
from tests.builders import group, pend, run, state, team, victims


def org(jobs, *, research=None, teams=("a", "b", "c", "d"), d=2, **settings):
    """8 GPUs; a and b (2 each) in group research, c and d (2 each, or d ``d``) at the root."""
    research = research or {}
    members = [team(n, d if n == "d" else 2, **({"group": "research"} if n in "ab" else {})) for n in teams]
    s = state(8, members, jobs, **settings)
    s["groups"] = [group("research", **research)]
    return s


def flat(s):
    s = dict(s, groups=[], teams=[{k: v for k, v in t.items() if k != "group"} for t in s["teams"]])
    return s


CASES = [
    # Admission at a group: research may use at most Q 4 + B 1 = 5. b's job is within b's
    # guarantee and the pool has room, but research's bound has none: a2, a's borrowed youngest, stops.
    ("group bound, reclaimed", dict(research={"limit": 1}),
     [run("a1", "a", 2, since=0), run("a2", "a", 2, since=100), pend("b1", "b", 2)],
     {"reclaim": ["a2"]}, {"reclaim": []}),
    # The same bound admits what fits under it (a3: research at 5) and holds the rest (a4 would be 6),
    # which is entitled nowhere (research is at its quota), so it stops nothing.
    ("group bound, admission", dict(research={"limit": 1}),
     [run("a1", "a", 2), run("a2", "a", 2, since=100), pend("a3", "a", 1, since=1), pend("a4", "a", 2, since=2)],
     {"served": ["a3"], "reclaim": []}, {"served": ["a3", "a4"], "reclaim": []}),
    # Entitled at a group: research's pool of 2 makes its Q 6. a is beyond its own guarantee but
    # research is not beyond its quota, so a's job reclaims from c (outside, borrowing), not from d.
    ("entitled at the group", dict(research={"gpu": 2}, teams=("a", "b", "c")),
     [run("a1", "a", 2), run("c1", "c", 2, since=0), run("c2", "c", 2, since=50), run("c3", "c", 2, since=80),
      pend("a2", "a", 2)],
     {"reclaim": ["c3"]}, {"reclaim": []}),
    # Outside the division before a sibling: b and c both borrow 1; youngest-first would stop b2
    # (since 500), the tree stops c2, outside research, first.
    ("outside before sibling", {},
     [run("b1", "b", 2), run("b2", "b", 1, since=500), run("c1", "c", 2), run("c2", "c", 1, since=100),
      run("d1", "d", 2), pend("a1", "a", 1)],
     {"reclaim": ["c2"]}, {"reclaim": ["b2"]}),
    # A sibling is stopped when nothing outside borrows.
    ("a sibling when outside does not borrow", {},
     [run("b1", "b", 2), run("b2", "b", 2, since=500), run("c1", "c", 2), run("d1", "d", 2), pend("a1", "a", 2)],
     {"reclaim": ["b2"]}, {"reclaim": ["b2"]}),
    # A team whose division is within its quota is no victim, even if the team borrows: c's job
    # takes back from d (beyond its quota), not from a, younger but inside research's quota of 6.
    ("division within its quota keeps its borrower", dict(research={"gpu": 2}, d=0),
     [run("a1", "a", 3, since=100), run("b1", "b", 1), run("c1", "c", 1), run("d1", "d", 3, since=0),
      pend("c2", "c", 1)],
     {"reclaim": ["d1"]}, {"reclaim": ["a1"]}),
    # Rule 1 for groups: research above Q 4 + B 0 loses its subtree's youngest job with demand.
    ("group borrow cap", dict(research={"limit": 0}),
     [run("a1", "a", 2, since=0), run("a2", "a", 1, since=300), run("b1", "b", 2, since=200)],
     {"borrow_limit": ["a2"]}, {"borrow_limit": []}),
]


@pytest.mark.parametrize("name, kw, jobs, tree_expect, flat_expect", CASES, ids=[c[0] for c in CASES])
def test_tree_rules(name, kw, jobs, tree_expect, flat_expect):
    s = org(jobs, **kw)
    for plan_of, expect in ((s, tree_expect), (flat(s), flat_expect)):
        if plan_of is not s and "research" in kw and kw["research"].get("gpu"):
            plan_of["capacity"] = {"gpu": 8}  # the pool is unguaranteed capacity when flat
        out = reclaim.plan(plan_of)
        for reason, ids in expect.items():
            if reason == "served":
                assert out["served"] == ids, (name, plan_of is s, out)
            else:
                assert victims(out, reason) == ids, (name, plan_of is s, out)


def test_reclaim_waits_for_reclaim_after_seconds_at_a_group_too():
    s = org([run("a1", "a", 2), run("c1", "c", 2), run("c2", "c", 2, since=50), pend("a2", "a", 2, since=990)],
            research={"gpu": 2}, teams=("a", "b", "c"), reclaim_after_seconds=60)
    assert reclaim.plan(s)["preemptions"] == []


def test_entitled_jobs_go_first_by_height():
    # a's 1-GPU job is within a's guarantee (height 0); b's is beyond b's but within research's quota
    # (height 1); d's is entitled nowhere. Only 2 GPUs are free: b's older, higher-priority job waits
    # behind a's.
    s = org([run("b1", "b", 2), run("c1", "c", 4), pend("d1", "d", 1, since=0, priority=9),
             pend("b2", "b", 1, since=0, priority=5), pend("a1", "a", 1, since=5)],
            teams=("a", "b", "c", "d"))
    s["teams"][2]["guarantee"] = {"gpu": 1}
    s["teams"][3]["guarantee"] = {"gpu": 0}
    assert reclaim.plan(s)["served"] == ["a1", "b2"]
    assert reclaim.plan(flat(s))["served"] == ["a1", "d1"]


def test_a_tree_plan_is_deterministic_and_json_in_and_out():
    import json

    s = org(CASES[3][2])
    assert json.dumps(reclaim.plan(s)) == json.dumps(reclaim.plan(json.loads(json.dumps(s))))


def test_the_lambda_plans_the_tree_from_its_settings():
    """The config's tree reaches the reclaim Lambda through its settings, and its cycle stops what the
    planner's tree rules choose: a's job, entitled at research (pool 2), reclaims from c, not d."""
    from cdk_gpu_share.aws import batch_reader as br
    from cdk_gpu_share.core.configuration.parse import parse_config
    from cdk_gpu_share.lambdas.reclaim import handler as h
    from tests.batch_model import QUEUE, BatchModel, Clock

    config = parse_config({
        "fairshare": {"capacity": {"g5.xlarge": 8}, "queue_name": "gpu-share-fairshare"},
        "groups": [{"name": "research", "guarantee": {"g5.xlarge": 2}}],
        "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 2}, "group": "research"},
                  {"name": "team-c", "guarantee": {"g5.xlarge": 2}},
                  {"name": "team-d", "guarantee": {"g5.xlarge": 2}}],
    })
    settings = br.settings_from_config(config)
    assert settings["groups"] == [{"name": "research", "guarantee": {"gpu": 2}}]
    assert {t["name"]: t.get("group") for t in settings["teams"]} == {"team-a": "research", "team-c": None,
                                                                     "team-d": None}
    m = BatchModel(clock=Clock())
    now = m.clock()
    m.add_job("teama", "RUNNING", gpus=2, job_id="a1", started=now - 900)
    m.add_job("teamc", "RUNNING", gpus=2, job_id="c1", started=now - 800)
    m.add_job("teamc", "RUNNING", gpus=2, job_id="c2", started=now - 100)
    m.add_job("teamd", "RUNNING", gpus=2, job_id="d1", started=now - 50)
    m.add_job("teama", "RUNNABLE", gpus=2, job_id="a2", created=now - 300)
    result = h.run_cycle(m.batch, QUEUE, settings, now=now, sleep=lambda s: None, emit=lambda line: None)
    assert result["stopped"] == ["c2"]
    flat = dict(settings, groups=[], teams=[{k: v for k, v in t.items() if k != "group"} for t in settings["teams"]])
    m2 = BatchModel(clock=Clock())
    for jid, status in (("a1", "RUNNING"), ("c1", "RUNNING"), ("c2", "RUNNING"), ("d1", "RUNNING")):
        m2.jobs[jid] = dict(m.originals[jid], status=status)
        m2.visible_at[jid] = 0.0
    m2.add_job("teama", "RUNNABLE", gpus=2, job_id="a2", created=now - 300)
    assert h.run_cycle(m2.batch, QUEUE, flat, now=now, sleep=lambda s: None, emit=lambda line: None)["stopped"] == []


def test_the_pending_order_ranks_by_the_nodes_height_not_the_steps_up_the_path():
    # Group top (no pool) holds team v and group sub (pool 1), which holds team b; o (1) is a root
    # team using its guarantee, so one GPU is free. v1 is entitled at top (height 2), b1 at sub
    # (height 1): b1 goes first although v1 is older and of higher priority. (One step up its own
    # path each, they would tie and v1 would go first.)
    s = state(2, [team("v", 0, group="top"), team("b", 0, group="sub"), team("o", 1)],
              [run("o1", "o", 1), pend("v1", "v", 1, since=0, priority=9), pend("b1", "b", 1, since=5)])
    s["groups"] = [group("top"), group("sub", 1, parent="top")]
    assert reclaim.plan(s)["served"] == ["b1"]


def test_a_reserve_teams_own_job_counts_in_its_groups_quota_as_it_will_use():
    # d (borrow limit 0) holds r (reserve, 4) and y; y uses 1 GPU of the pool beside it. r's idle
    # guarantee is no one's quota, but once r's job starts, r uses 3 of it: d holds 3 + 1 = 4.
    s = state(8, [team("r", 4, sharing="reserve", group="d"), team("y", 0, group="d"), team("o", 1)],
              [pend("r1", "r", 3)])
    s["groups"] = [group("d", limit=0)]
    assert reclaim.plan(s)["served"] == ["r1"]
    s["jobs"].append(pend("y1", "y", 1))  # y's job would take d beyond its quota (r's 3 in use) plus 0
    assert reclaim.plan(s)["served"] == ["r1"]
