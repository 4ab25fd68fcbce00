"""The checkpoint-aware victim order (``settings.victim_order: "checkpoint"``).

Runs that started on borrowed capacity go first, then the least work lost since the last
checkpoint. The differential tests against the naive transcription are in
``test_reclaim_properties.py``; here: the reclaim contract's worked cases, the inputs'
defaults and problems, lost work, and the invariant that protects the lenders.
"""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.policy import reclaim
from tests.builders import examples, pend, run, state, states, team, valid_state, victims

# ---------------------------------------------------------------------------
# The contract's worked cases: now 2000, 8 GPUs, teams A and B guaranteed 4 each. B runs
# b1 and b2 since 0 (within its guarantee), b3 since 1000 and b4 since 1500 (borrowed),
# each 2 GPUs, checkpointing every 600 s: W = 200, 200, 400, 500. A's a1 waits.


def worked_case(a1_gpus=2, max_checkpoint_seconds=None, **changes):
    """The worked cases' state; ``changes`` maps a job id to the fields to set (None: remove);
    ``max_checkpoint_seconds``: the order's cap M (None: left out, the default 3600)."""
    jobs = [
        run("b1", "B", 2, since=0, borrowed=False, checkpoint_seconds=600),
        run("b2", "B", 2, since=0, borrowed=False, checkpoint_seconds=600),
        run("b3", "B", 2, since=1000, borrowed=True, checkpoint_seconds=600),
        run("b4", "B", 2, since=1500, borrowed=True, checkpoint_seconds=600),
        pend("a1", "A", a1_gpus, since=0),
    ]
    for job in jobs:
        for key, value in changes.get(job["id"], {}).items():
            if value is None:
                job.pop(key, None)
            else:
                job[key] = value
    s = state(8, [team("A", 4), team("B", 4)], jobs, now=2000, reclaim_after_seconds=0, victim_order="checkpoint")
    if max_checkpoint_seconds is not None:
        s["settings"]["max_checkpoint_seconds"] = max_checkpoint_seconds
    return s


def _plain(job_ids):
    return {j: {"borrowed": None, "checkpoint_seconds": None} for j in job_ids}


WORKED_CASES = [
    ("E1 a1 needs 2 GPUs: the borrowed run with the least lost work", worked_case(), ["b3"]),
    ("E2 a1 needs 4: both borrowed runs", worked_case(a1_gpus=4), ["b3", "b4"]),
    ("E3 b4 checkpointed at 1990 (W 10)", worked_case(b4={"last_checkpoint": 1990}), ["b4"]),
    ("E4 no borrowed, no intervals: derived, and W is the age (below M)",
     worked_case(**_plain(["b1", "b2", "b3", "b4"])), ["b4"]),
    ("E5 b2 borrowed at priority 5: priority is not part of the order", worked_case(b2={"borrowed": True, "priority": 5}),
     ["b2"]),
    ("E6 M 900, b3 declares 0 (never): ordered as every 900 s, W 100",
     worked_case(max_checkpoint_seconds=900, b3={"checkpoint_seconds": 0}), ["b3"]),
    ("E7 M 900, b3 declares a week: ordered as every 900 s, W 100",
     worked_case(max_checkpoint_seconds=900, b3={"checkpoint_seconds": 604800}), ["b3"]),
    ("E8 b3's claimed checkpoint at 0 cannot raise W: min(400, 1000)", worked_case(b3={"last_checkpoint": 0}), ["b3"]),
]

#: What the order chose before it capped what it believes: E6-E8 each stopped b4.
UNCAPPED = {"E6": ["b4"], "E7": ["b4"], "E8": ["b4"]}


@pytest.mark.parametrize("name,s,want", WORKED_CASES, ids=[c[0].split(" ")[0] for c in WORKED_CASES])
def test_the_contracts_worked_cases(name, s, want):
    out = reclaim.plan(s)
    assert victims(out) == want
    assert {p["reason"] for p in out["preemptions"]} == {"reclaim"}
    assert {p["beneficiary"] for p in out["preemptions"]} == {"a1"}
    assert out["served"] == ["a1"]


@pytest.mark.parametrize("case", sorted(UNCAPPED))
def test_without_the_cap_declaring_no_checkpoints_kept_b3_running(case):
    # The same states with M so large that it never bites and, for E8, W read from the
    # claimed checkpoint alone: b3 would look the most expensive to stop.
    name, s, want = next(c for c in WORKED_CASES if c[0].startswith(case))
    s = copy.deepcopy(s)
    s["settings"]["max_checkpoint_seconds"] = 10**9
    if case == "E8":
        s["jobs"][2].pop("checkpoint_seconds")  # W = age modulo 10**9 = 1000, what the claim says
    assert victims(reclaim.plan(s)) == UNCAPPED[case] != want


def test_youngest_first_stops_b4_in_the_first_worked_case():
    s = worked_case()
    s["settings"]["victim_order"] = "youngest"
    assert victims(reclaim.plan(s)) == ["b4"]


def test_the_default_order_ignores_the_three_job_fields_and_the_teams_interval():
    with_fields = worked_case()
    with_fields["settings"].pop("victim_order")
    with_fields["teams"][1]["checkpoint_seconds"] = 60
    bare = copy.deepcopy(with_fields)
    bare["teams"][1].pop("checkpoint_seconds")
    for job in bare["jobs"]:
        for key in ("borrowed", "checkpoint_seconds", "last_checkpoint"):
            job.pop(key, None)
    assert reclaim.plan(with_fields) == reclaim.plan(bare)
    assert victims(reclaim.plan(bare)) == ["b4"]


def test_the_teams_interval_is_the_default_of_its_jobs():
    # b3's age 1000 and b4's 500: with B's 300 s interval W = 100 and 200, so b3 goes first;
    # b4's own 450 s interval (W 50) overrides the team's.
    s = worked_case(**{j: {"checkpoint_seconds": None} for j in ("b1", "b2", "b3", "b4")})
    s["teams"][1]["checkpoint_seconds"] = 300
    assert victims(reclaim.plan(s)) == ["b3"]
    s["jobs"][3]["checkpoint_seconds"] = 450
    assert victims(reclaim.plan(s)) == ["b4"]


def test_ties_of_lost_work_go_to_the_most_recent_start_then_the_larger_id():
    # Same W (0: both just checkpointed), b3 started later than b5: b3 first; then ids.
    s = state(8, [team("A", 4), team("B", 4)], [
        run("b1", "B", 4, since=0, borrowed=False),
        run("b5", "B", 2, since=600, borrowed=True, checkpoint_seconds=700),
        run("b3", "B", 2, since=1300, borrowed=True, checkpoint_seconds=350),
        pend("a1", "A", 2)], now=2000, victim_order="checkpoint")
    assert victims(reclaim.plan(s)) == ["b3"]
    s["jobs"][2]["since"] = 600
    s["jobs"][2]["checkpoint_seconds"] = 700
    assert victims(reclaim.plan(s)) == ["b5"]


def test_in_team_preemption_still_offers_only_lower_priority_jobs():
    # a's borrowed a_hi (priority 3) has the least lost work, but p (priority 2) may stop
    # only the lower-priority a_lo.
    s = state(4, [team("a", 2, in_team_preemption=True), team("b", 2, sharing="reserve")], [
        run("a_hi", "a", 1, since=900, priority=3, borrowed=True, last_checkpoint=999),
        run("a_lo", "a", 1, since=0, priority=0, borrowed=False),
        pend("p", "a", 1, priority=2)], victim_order="checkpoint")
    out = reclaim.plan(s)
    assert out["preemptions"] == [{"job": "a_lo", "team": "a", "reason": "in_team", "beneficiary": "p"}]


def test_borrow_caps_take_the_borrowed_runs_with_the_least_lost_work_first():
    # G 2, cap 0: a borrows 2 GPUs. a3 and a4 started beyond the guarantee; a4 saved
    # its progress a moment ago.
    s = state(8, [team("a", 2, borrow_limit={"gpu": 0}), team("b", 6)], [
        run("a1", "a", 1, since=0), run("a2", "a", 1, since=10),
        run("a3", "a", 1, since=20), run("a4", "a", 1, since=30, last_checkpoint=995)], victim_order="checkpoint")
    out = reclaim.plan(s)
    assert victims(out, "borrow_limit") == ["a4", "a3"]


# ---------------------------------------------------------------------------
# Lost work and "started on borrowed capacity"


def _job(since=0, checkpoint=None, last=None):
    return reclaim.JobSpec("j", "a", "running", {"gpu": 1}, since=since, checkpoint_seconds=checkpoint,
                           last_checkpoint=last)


@pytest.mark.parametrize("job,team_interval,want", [
    (_job(since=100), 0, 900),  # never checkpoints: counts as M (3600), the age below it
    (_job(since=100), 600, 300),  # the team's interval
    (_job(since=100, checkpoint=250), 600, 150),  # the job's own beats the team's
    (_job(since=100, checkpoint=0), 600, 900),  # its own 0: never, counts as M
    (_job(since=100, last=950), 600, 50),  # a later checkpoint than the interval says: lower
    (_job(since=100, last=50), 600, 300),  # a checkpoint before this run: since, 900, cannot raise W
    (_job(since=100, last=1200), 600, 0),  # a checkpoint in the future: nothing lost
    (_job(since=1200), 600, 0),  # a run that starts in the future: age 0
    (_job(since=999.7, checkpoint=0.1), 0, math.fmod(1000 - 999.7, 0.1)),  # IEEE fmod, exact
    (_job(since=-9000), 0, 10000 % 3600),  # never checkpoints, older than M: age mod M
    (_job(since=-9000, checkpoint=604800), 0, 10000 % 3600),  # a week counts as M
    (_job(since=-9000), 7200, 10000 % 3600),  # so does the team's interval above M
    (_job(since=-9000, checkpoint=3600), 0, 10000 % 3600),  # M itself is believed
    (_job(since=-9000, last=-9000), 0, 10000 % 3600),  # a claim of no checkpoint since the start
])
def test_lost_work(job, team_interval, want):
    assert reclaim.lost_work(job, team_interval, 1000) == want


@pytest.mark.parametrize("job,team_interval,cap,want", [
    (_job(since=100), None, 600, 300),  # none at all: M
    (_job(since=100, checkpoint=0), 250, 600, 300),  # its own 0 beats the team's 250: M
    (_job(since=100, checkpoint=600), None, 600, 300),  # equal to M: believed (the same)
    (_job(since=100, checkpoint=601), None, 600, 300),  # just above M: M
    (_job(since=100, checkpoint=599), None, 600, 301),  # just below: its own
    (_job(since=100, last=0), 700, 600, 300),  # the team's 700 is above M: min(900 mod 600, 900)
])
def test_lost_work_under_a_cap(job, team_interval, cap, want):
    assert reclaim.lost_work(job, team_interval, 1000, cap) == want


# W < M for every running job; 0, none or above M are M; a claim never raises W.
_times = st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6, allow_nan=False)
_intervals = st.none() | st.sampled_from((0, 0.5, 7, 600, 3600, 3601, 604800)) | st.floats(0, 1e6, allow_nan=False)
_caps = st.sampled_from((0.5, 1, 60, 900, 3600)) | st.floats(1e-3, 1e6, allow_nan=False)


@settings(max_examples=examples(2000), deadline=None)
@given(since=_times, now=_times, own=_intervals, team_interval=_intervals, cap=_caps, last=st.none() | _times)
def test_lost_work_is_below_the_cap_whatever_a_job_declares(since, now, own, team_interval, cap, last):
    w = reclaim.lost_work(_job(since=since, checkpoint=own, last=last), team_interval, now, cap)
    assert 0 <= w < cap


@settings(max_examples=examples(2000), deadline=None)
@given(since=_times, now=_times, team_interval=_intervals, cap=_caps, last=st.none() | _times,
       declared=st.sampled_from(("zero", "absent", "above")))
def test_no_interval_zero_or_above_the_cap_counts_as_the_cap(since, now, team_interval, cap, last, declared):
    own = {"zero": 0, "absent": None, "above": cap * 2 + 1}[declared]
    if declared == "absent":
        team_interval = None
    job = _job(since=since, checkpoint=own, last=last)
    assert reclaim.lost_work(job, team_interval, now, cap) == reclaim.lost_work(
        _job(since=since, checkpoint=cap, last=last), None, now, cap)


@settings(max_examples=examples(2000), deadline=None)
@given(since=_times, now=_times, own=_intervals, team_interval=_intervals, cap=_caps, last=_times,
       earlier=st.floats(0, 1e6, allow_nan=False))
def test_a_claimed_checkpoint_only_lowers_lost_work(since, now, own, team_interval, cap, last, earlier):
    # Read literally, "moving last_checkpoint earlier never raises W" cannot hold (the time
    # since the claim grows); what holds is that no claim, however early, raises W above
    # what the interval says, and that a later claim never raises W.
    def w(at):
        return reclaim.lost_work(_job(since=since, checkpoint=own, last=at), team_interval, now, cap)

    unclaimed = reclaim.lost_work(_job(since=since, checkpoint=own), team_interval, now, cap)
    assert w(last - earlier) <= unclaimed and w(last) <= unclaimed
    assert w(last) <= w(last - earlier)



@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=states(checkpoint=True), cap=st.sampled_from((0.5, 7, 25, 45, 3600)), data=st.data())
def test_a_plan_orders_a_job_declaring_zero_none_or_more_than_the_cap_as_one_declaring_the_cap(s, cap, data):
    s["settings"]["max_checkpoint_seconds"] = cap
    as_cap = copy.deepcopy(s)

    def unbelieved():
        return data.draw(st.sampled_from((None, 0, cap + 0.001, cap * 3, 604800)))

    effective = {}
    for entry, other in zip(s["teams"], as_cap["teams"]):
        interval = entry.get("checkpoint_seconds")
        if not interval or interval > cap:
            interval = unbelieved()
            entry.pop("checkpoint_seconds", None)
            if interval is not None:
                entry["checkpoint_seconds"] = interval
            other["checkpoint_seconds"] = cap
        effective[entry["name"]] = other["checkpoint_seconds"] if "checkpoint_seconds" in other else cap
    for job, other in zip(s["jobs"], as_cap["jobs"]):
        if job["state"] != "running" or not data.draw(st.booleans()):
            continue
        interval = unbelieved()
        job.pop("checkpoint_seconds", None)
        if interval is not None:
            job["checkpoint_seconds"] = interval
            other["checkpoint_seconds"] = cap
        else:  # absent: its team's, which as_cap states as believed
            other["checkpoint_seconds"] = effective[job["team"]]
    assert reclaim.plan(s) == reclaim.plan(as_cap)


def test_derived_borrowed_counts_the_team_jobs_started_before_by_since_then_id():
    t = [reclaim.TeamSpec("a", {"gpu": 2, "cpu": 8})]
    jobs = [reclaim.JobSpec(i, "a", "running", d, since=s) for i, d, s in [
        ("x", {"gpu": 1}, 0), ("z", {"gpu": 1}, 5), ("y", {"gpu": 1}, 5), ("c", {"cpu": 1}, 9), ("w", {"gpu": 0.5}, 7)]]
    # x, y (id before z at the same since) fill the guarantee; z and w are beyond it;
    # c needs no GPU, and 1 CPU of 8 is within.
    assert reclaim.borrowed_at_start(jobs, t) == {"x": False, "y": False, "z": True, "w": True, "c": False}


# ---------------------------------------------------------------------------
# Problems: one line each, naming the field


def _problems(s):
    with pytest.raises(ConfigError) as info:
        reclaim.plan(s)
    return [(p.field, p.value, p.message) for p in info.value.problems]


def _set(path, value):
    s = valid_state()  # jobs[0] runs, jobs[1] waits
    s.setdefault("settings", {})["victim_order"] = "checkpoint"
    obj = s
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
    return s


@pytest.mark.parametrize("path,value,want", [
    (["settings", "victim_order"], "oldest", ("settings.victim_order", "oldest", "is not a victim order")),
    (["settings", "victim_order"], None, ("settings.victim_order", None, "is not a victim order")),
    (["jobs", 0, "borrowed"], "yes", ("jobs[0].borrowed", "yes", "must be true or false, not a string")),
    (["jobs", 0, "borrowed"], None, ("jobs[0].borrowed", None, "must be true or false, not null")),
    (["jobs", 0, "checkpoint_seconds"], -1, ("jobs[0].checkpoint_seconds", -1, "must not be below 0")),
    (["jobs", 0, "checkpoint_seconds"], "600", ("jobs[0].checkpoint_seconds", "600", "must be a number, not a string")),
    (["jobs", 0, "last_checkpoint"], "noon", ("jobs[0].last_checkpoint", "noon", "must be a number, not a string")),
    (["jobs", 0, "last_checkpoint"], float("nan"), ("jobs[0].last_checkpoint", float("nan"), "must be a number, not NaN")),
    (["teams", 0, "checkpoint_seconds"], -5, ("teams[0].checkpoint_seconds", -5, "must not be below 0")),
    (["teams", 0, "checkpoint_seconds"], True, ("teams[0].checkpoint_seconds", True, "must be a number, not a boolean")),
    (["settings", "max_checkpoint_seconds"], 0, ("settings.max_checkpoint_seconds", 0, "must be above 0")),
    (["settings", "max_checkpoint_seconds"], -60, ("settings.max_checkpoint_seconds", -60, "must be above 0")),
    (["settings", "max_checkpoint_seconds"], "1h",
     ("settings.max_checkpoint_seconds", "1h", "must be a number, not a string")),
    (["settings", "max_checkpoint_seconds"], None,
     ("settings.max_checkpoint_seconds", None, "must be a number, not null")),
    (["settings", "max_checkpoint_seconds"], False,
     ("settings.max_checkpoint_seconds", False, "must be a number, not a boolean")),
    (["settings", "max_checkpoint_seconds"], float("inf"),
     ("settings.max_checkpoint_seconds", float("inf"), "must be a finite number, not infinity")),
])
def test_each_bad_checkpoint_input_is_one_problem_naming_its_field(path, value, want):
    got = _problems(_set(path, value))
    assert len(got) == 1
    field, got_value, message = got[0]
    assert field == want[0] and message == want[2]
    assert got_value == want[1] or (got_value != got_value and want[1] != want[1])  # NaN


def test_every_problem_has_a_fix():
    with pytest.raises(ConfigError) as info:
        reclaim.plan(_set(["jobs", 0, "borrowed"], 1))
    (problem,) = info.value.problems
    assert "true" in problem.fix and "leave it out" in problem.fix


def test_pending_jobs_ignore_the_three_job_fields():
    s = _set(["jobs", 1, "borrowed"], "whatever")
    s["jobs"][1]["checkpoint_seconds"] = -3
    s["jobs"][1]["last_checkpoint"] = "never"
    clean = _set(["settings", "victim_order"], "checkpoint")
    assert reclaim.plan(s) == reclaim.plan(clean)


def test_parse_state_keeps_the_three_fields_of_a_running_job():
    s = _set(["jobs", 0, "borrowed"], True)
    s["jobs"][0].update(checkpoint_seconds=60, last_checkpoint=990)
    s["teams"][0]["checkpoint_seconds"] = 30
    parsed = reclaim.parse_state(s)
    running = next(j for j in parsed.jobs if j.state == "running")
    assert (running.borrowed, running.checkpoint_seconds, running.last_checkpoint) == (True, 60, 990)
    assert parsed.teams[0].checkpoint_seconds == 30 and parsed.teams[1].checkpoint_seconds is None
    assert parsed.settings.victim_order == "checkpoint"
    assert reclaim.parse_state(valid_state()).settings.victim_order == "youngest"


# ---------------------------------------------------------------------------
# The invariant: with min_runtime 0 and borrowed derived (or recorded consistently), a run
# that started within its team's guarantee is stopped only when a pending job of its own
# team was served earlier in the same plan.


@st.composite
def lender_states(draw):
    teams = [team(n, draw(st.sampled_from((0, 1, 2, 3))), in_team_preemption=draw(st.booleans()),
                  checkpoint_seconds=draw(st.sampled_from((0, 30, 60)))) for n in ("a", "b", "c")]
    capacity = sum(t["guarantee"]["gpu"] for t in teams) + draw(st.sampled_from((0, 0, 1)))
    jobs = []
    for i in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(("running", "running", "pending")))
        maker = run if kind == "running" else pend
        jobs.append(maker(f"j{i}", draw(st.sampled_from("abc")), draw(st.sampled_from((0.5, 1, 1, 2))),
                          since=draw(st.sampled_from((0, 10, 20, 50, 90))), priority=draw(st.integers(-1, 1))))
    return state(capacity, teams, jobs, now=100, victim_order="checkpoint", reclaim_after_seconds=0)


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lender_states())
def test_a_run_started_within_its_guarantee_is_reclaimed_only_after_its_team_was_served(s):
    out = reclaim.plan(s)
    parsed = reclaim.parse_state(s)
    borrowed = reclaim.borrowed_at_start([j for j in parsed.jobs if j.state == "running"], parsed.teams)
    team_of = {j["id"]: j["team"] for j in s["jobs"]}
    order = {p: i for i, p in enumerate(out["served"])}
    for p in out["preemptions"]:
        assert p["reason"] != "borrow_limit" or borrowed[p["job"]], p  # B <= C once every borrowed run is gone
        if p["reason"] == "reclaim" and not borrowed[p["job"]]:
            before = out["served"][:order[p["beneficiary"]]]
            assert any(team_of[q] == p["team"] for q in before), (p, out["served"])
