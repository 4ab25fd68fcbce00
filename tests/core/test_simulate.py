"""The what-if simulator (docs/simulator.md): hand-worked traces per mode,
dispatch order, conservation properties, checkpoints, bad input and the CLI."""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.cli import main
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.simulate import dispatch

TOL = 1e-6


def scenario(capacity=8, teams=None, reclaim_after=0, min_runtime=0):
    teams = teams if teams is not None else [
        {"name": "a", "guarantee": {"gpu": 4}},
        {"name": "b", "guarantee": {"gpu": 4}},
    ]
    return sim.parse_scenario({
        "capacity": {"gpu": capacity},
        "settings": {"reclaim_after_seconds": reclaim_after, "min_runtime_seconds": min_runtime},
        "teams": teams,
    })


def jobs_of(sc, rows):
    return sim.trace_from_rows(rows, sc)


def outcome(result, job_id):
    return next(o for o in result.outcomes if o.id == job_id)


# A lender comes back while a borrower runs: b runs two 4-GPU jobs on a pool of 8
# (borrowing a's 4 GPUs); a submits a 4-GPU job at t=100.
LENDER_RETURNS = [
    ("B1", "b", 0, 1000, 4, 0),
    ("B2", "b", 0, 1000, 4, 0),
    ("A1", "a", 100, 50, 4, 0),
]


def test_static_keeps_every_team_within_its_guarantee():
    sc = scenario()
    r = sim.simulate(sc, jobs_of(sc, LENDER_RETURNS), "static")
    assert outcome(r, "B1").final_start == 0
    assert outcome(r, "A1").final_start == 100  # a's guarantee is idle: starts at once
    assert outcome(r, "B2").final_start == 1000  # b may not borrow: waits for B1
    d = r.to_dict()
    assert d["window_s"] == [0, 2000]
    assert d["wait_gpu_hours"] == pytest.approx(4 * 1000 / 3600)
    assert d["preemptions"] == 0 and d["lost_gpu_seconds"] == 0
    assert d["teams"]["b"]["borrowed_gpu_seconds"] == 0
    assert d["utilization"] == pytest.approx((4000 + 200 + 4000) / (8 * 2000))


def test_share_makes_the_lender_wait_for_the_borrower_to_end():
    sc = scenario()
    r = sim.simulate(sc, jobs_of(sc, LENDER_RETURNS), "share")
    assert outcome(r, "B2").final_start == 0  # borrows a's idle guarantee
    assert outcome(r, "A1").final_start == 1000  # nothing is preempted
    d = r.to_dict()
    assert d["preemptions"] == 0
    assert d["teams"]["a"]["reclaim_wait_p99_s"] == 900
    assert d["teams"]["a"]["wait_p99_s"] == 900
    assert d["teams"]["b"]["borrowed_gpu_seconds"] == 4 * 1000
    assert d["window_s"] == [0, 1050]


def test_share_reclaim_gives_the_lender_its_capacity_within_one_poll():
    sc = scenario()
    r = sim.simulate(sc, jobs_of(sc, LENDER_RETURNS), "share+reclaim", poll_seconds=60)
    # first tick with A1 pending: t=120; victim order: same priority and since, id descending
    a1, b2 = outcome(r, "A1"), outcome(r, "B2")
    assert a1.final_start == 120
    assert b2.stops == 1
    assert b2.final_start == 170  # restarts when A1 ends, from zero
    assert b2.completion == 1170
    d = r.to_dict()
    assert d["preemptions"] == 1
    assert d["lost_gpu_seconds"] == 4 * 120
    assert d["teams"]["b"]["preempted"] == 1
    assert d["teams"]["a"]["reclaim_wait_p99_s"] == 20
    assert d["teams"]["a"]["reclaim_wait_p99_s"] <= 60
    assert d["teams"]["b"]["wait_p99_s"] == 170  # from the original submit to the final start
    busy = 4 * 1000 + 4 * 120 + 4 * 50 + 4 * 1000
    assert d["utilization"] == pytest.approx(busy / (8 * 1170))


def test_reclaim_waits_for_reclaim_after_seconds():
    sc = scenario(reclaim_after=60)
    r = sim.simulate(sc, jobs_of(sc, LENDER_RETURNS), "share+reclaim", poll_seconds=60)
    assert outcome(r, "A1").final_start == 180  # at 120 it has waited 20 s only


def test_a_tick_before_anyone_has_waited_skips_the_planner():
    # At 120 the only job that could reclaim (A1, within its guarantee) has waited
    # 20 s of 60: no victim is possible, so the planner is not called; at 180 it is.
    sc = scenario(reclaim_after=60)
    jobs = jobs_of(sc, LENDER_RETURNS)
    fast = sim.simulate(sc, jobs, "share+reclaim", poll_seconds=60)
    slow = sim.simulate(sc, jobs, "share+reclaim", poll_seconds=60, skip_idle_ticks=False)
    assert (fast.planner_calls, slow.planner_calls) == (1, 2)
    assert [o.final_start for o in fast.outcomes] == [o.final_start for o in slow.outcomes]


def test_min_runtime_protects_young_jobs():
    sc = scenario(min_runtime=500)
    r = sim.simulate(sc, jobs_of(sc, LENDER_RETURNS), "share+reclaim", poll_seconds=60)
    assert outcome(r, "A1").final_start == 540  # first tick once B1/B2 are 500 s old


def test_checkpoints_reduce_lost_work():
    sc = scenario()
    jobs = jobs_of(sc, LENDER_RETURNS)
    plain = sim.simulate(sc, jobs, "share+reclaim")
    ckpt = sim.simulate(sc, jobs, "share+reclaim", checkpoint_seconds=100)
    assert plain.lost_gpu_seconds == 4 * 120
    assert ckpt.lost_gpu_seconds == 4 * 20  # 100 of the 120 s were saved
    assert outcome(ckpt, "B2").completion == 170 + 900


def test_completions_come_before_arrivals_at_the_same_instant():
    sc = scenario(capacity=4, teams=[{"name": "a", "guarantee": {"gpu": 4}}])
    r = sim.simulate(sc, jobs_of(sc, [("J1", "a", 0, 100, 4, 0), ("J2", "a", 100, 10, 4, 0)]), "share")
    assert outcome(r, "J2").final_start == 100
    assert r.to_dict()["teams"]["a"]["reclaim_wait_p99_s"] == 0  # started at its arrival instant


def test_within_guarantee_jobs_dispatch_before_higher_priority_borrowers():
    sc = scenario(capacity=4, teams=[{"name": "a", "guarantee": {"gpu": 2}},
                                     {"name": "b", "guarantee": {"gpu": 2}}])
    rows = [
        ("X", "b", 0, 100, 4, 0),
        ("A_big", "a", 1, 10, 3, 5),  # would borrow: after the within-guarantee jobs
        ("B1", "b", 1, 10, 1, 0),
        ("A1", "a", 1, 10, 1, 0),
    ]
    r = sim.simulate(sc, jobs_of(sc, rows), "share")
    assert outcome(r, "B1").final_start == 100
    assert outcome(r, "A1").final_start == 100
    assert outcome(r, "A_big").final_start == 110  # needs 3; only 2 free until B1/A1 end


def test_borrowers_are_ordered_by_their_team_usage_over_guarantee():
    sc = scenario(capacity=6, teams=[{"name": "a", "guarantee": {"gpu": 2}},
                                     {"name": "b", "guarantee": {"gpu": 2}},
                                     {"name": "c", "guarantee": {"gpu": 2}}])
    rows = [
        ("A0", "a", 0, 1000, 3, 0),  # a at 3/2
        ("B0", "b", 0, 1000, 2, 0),  # b at 2/2
        ("C0", "c", 0, 10, 1, 0),
        ("A1", "a", 1, 10, 1, 9),  # higher priority, but a's U/G is higher
        ("B1", "b", 1, 10, 1, 0),
    ]
    r = sim.simulate(sc, jobs_of(sc, rows), "share")
    assert outcome(r, "B1").final_start == 10
    assert outcome(r, "A1").final_start == 20


@pytest.mark.parametrize("guarantees, rows, starts", [
    pytest.param(
        # At 10, B_big's end frees 3. a (U/G 1.5) first starts A_two, its
        # higher-priority job: a's U/G rises to 2.5 with its thresholds unchanged, so
        # A_one's index entry still holds 1.5. b (U/G 2.0) comes first for the last GPU.
        (2, 2),
        [("A0", "a", 0, 1000, 3, 0), ("B0", "b", 0, 1000, 4, 0), ("B_big", "b", 0, 10, 3, 0),
         ("A_two", "a", 1, 1000, 2, 5), ("A_one", "a", 1, 10, 1, 0), ("B_one", "b", 1, 10, 1, 0)],
        {"A_two": 10, "B_one": 10, "A_one": 20},
        id="rose"),
    pytest.param(
        # A_one and B_one queue at 1, a at U/G 1.5 and b at 1.33. At 10 A_end's end
        # frees one GPU and brings a down to 1.25: a comes first.
        (4, 3),
        [("A0", "a", 0, 1000, 5, 0), ("A_end", "a", 0, 10, 1, 0), ("B0", "b", 0, 1000, 4, 0),
         ("A_one", "a", 1, 10, 1, 0), ("B_one", "b", 1, 10, 1, 0)],
        {"A_one": 10, "B_one": 20},
        id="fell"),
])
def test_borrowers_are_ordered_by_their_usage_over_guarantee_as_it_is_now(guarantees, rows, starts):
    sc = scenario(capacity=sum(r[4] for r in rows if r[2] == 0),
                  teams=[{"name": n, "guarantee": {"gpu": g}} for n, g in zip("ab", guarantees)])
    r = sim.simulate(sc, jobs_of(sc, rows), "share")
    assert {job: outcome(r, job).final_start for job in starts} == starts


def test_priority_then_submit_time_then_trace_position():
    sc = scenario(capacity=1, teams=[{"name": "a", "guarantee": {"gpu": 1}}])
    rows = [
        ("X", "a", 0, 10, 1, 0),
        ("late_hi", "a", 5, 1, 1, 1),
        ("early", "a", 1, 1, 1, 0),
        ("first", "a", 2, 1, 1, 0),
        ("second", "a", 2, 1, 1, 0),
    ]
    r = sim.simulate(sc, jobs_of(sc, rows), "share")
    starts = {o.id: o.final_start for o in r.outcomes}
    assert [k for k, _ in sorted(starts.items(), key=lambda kv: kv[1])] == [
        "X", "late_hi", "early", "first", "second"]


def test_backfill_starts_a_smaller_job_behind_one_that_does_not_fit():
    sc = scenario(capacity=4, teams=[{"name": "a", "guarantee": {"gpu": 4}}])
    rows = [("X", "a", 0, 100, 2, 0), ("big", "a", 1, 10, 4, 5), ("small", "a", 2, 10, 1, 0)]
    r = sim.simulate(sc, jobs_of(sc, rows), "share")
    assert outcome(r, "small").final_start == 2
    assert outcome(r, "big").final_start == 100


def test_reserve_team_idle_guarantee_is_never_lent():
    sc = scenario(capacity=8, teams=[{"name": "a", "guarantee": {"gpu": 4}, "sharing": "reserve"},
                                     {"name": "b", "guarantee": {"gpu": 4}}])
    rows = [("B1", "b", 0, 100, 4, 0), ("B2", "b", 0, 100, 2, 0)]
    r = sim.simulate(sc, jobs_of(sc, rows), "share")
    assert outcome(r, "B2").final_start == 100


def test_fractional_gpus_share_the_pool_exactly():
    sc = scenario(capacity=1, teams=[{"name": "a", "guarantee": {"gpu": 1}}])
    rows = [(f"j{i}", "a", 0, 10, "0.1", 0) for i in range(10)] + [("k", "a", 0, 10, "0.1", 0)]
    r = sim.simulate(sc, jobs_of(sc, rows), "static")
    assert sorted(o.final_start for o in r.outcomes) == [0] * 10 + [10]


def test_nearest_rank_percentiles():
    assert sim.nearest_rank([], 99) == 0
    assert sim.nearest_rank([5], 50) == 5
    values = list(range(1, 101))
    assert sim.nearest_rank(values, 50) == 50
    assert sim.nearest_rank(values, 95) == 95
    assert sim.nearest_rank(values, 99) == 99
    assert sim.nearest_rank([3, 1, 2], 50) == 2  # ceil(1.5) = 2nd


def test_rows_of_one_size_share_one_exact_value():
    # The simulator asks each distinct Fraction object for its units once: a trace's
    # rows of one size must share one (a million rows, a million hashes otherwise).
    sc = scenario()
    jobs = sim.parse_jobs(io.StringIO("job_id,team,submit_time,duration_s,gpus\n"
                                      "j1,a,0,10,0.5\nj2,b,0,10,0.5\nj3,a,0,10,0.50\n"), sc)
    assert jobs[0].gpus_exact is jobs[1].gpus_exact
    assert jobs[2].gpus_exact == jobs[0].gpus_exact  # another text: its own object, the same value


def test_same_input_gives_the_same_result():
    sc = scenario()
    jobs = jobs_of(sc, LENDER_RETURNS)
    a = sim.simulate(sc, jobs, "share+reclaim").to_dict()
    b = sim.simulate(sc, jobs, "share+reclaim").to_dict()
    a.pop("sim_seconds"), b.pop("sim_seconds")
    assert a == b


# ---------------------------------------------------------------------------
# Properties over small random traces

SIZES = ["0.25", "0.5", "1", "1.5", "2", "3", "4"]


@st.composite
def cases(draw):
    n_teams = draw(st.integers(1, 3))
    capacity = draw(st.sampled_from([4, 6, 8]))
    guarantees = []
    left = capacity
    for _ in range(n_teams):
        g = draw(st.integers(0, left))
        guarantees.append(g)
        left -= g
    teams = []
    for i, g in enumerate(guarantees):
        team = {"name": f"t{i}", "guarantee": {"gpu": g},
                "sharing": draw(st.sampled_from(["lend_and_borrow", "lend_and_borrow", "lend", "reserve"])),
                "in_team_preemption": draw(st.booleans())}
        if draw(st.booleans()):
            team["borrow_limit"] = {"gpu": draw(st.sampled_from([0, 1, 2, 8]))}
        teams.append(team)
    sc = scenario(capacity=capacity, teams=teams, reclaim_after=draw(st.sampled_from([0, 30, 120])),
                  min_runtime=draw(st.sampled_from([0, 0, 100])))
    mode = draw(st.sampled_from(sim.MODES + ("share+reclaim",)))
    rows = []
    n_jobs = draw(st.integers(0, 14))
    for k in range(n_jobs):
        ti = draw(st.integers(0, n_teams - 1))
        g = draw(st.sampled_from(SIZES))
        submit = draw(st.sampled_from([0, 0, 5, 60, 100, 130, 300]) | st.integers(0, 600))
        duration = draw(st.sampled_from([0, 40, 250, 1000, 3000]) | st.integers(0, 1000))
        rows.append((f"j{k}", f"t{ti}", submit, duration, g, draw(st.integers(-1, 2))))
    jobs = jobs_of(sc, rows)
    try:
        sim.check_jobs(sc, jobs, mode)
    except ConfigError:
        # drop the jobs that could never start in this mode
        kept = []
        for j in jobs:
            try:
                sim.check_jobs(sc, [j], mode)
                kept.append(j)
            except ConfigError:
                pass
        jobs = [sim._replace_position(j, i) for i, j in enumerate(kept)]
    ckpt = draw(st.sampled_from([None, None, 50]))
    return sc, jobs, mode, ckpt


def _check_conservation(sc, jobs, mode, r):
    assert r.completed == len(jobs)
    assert sorted(o.id for o in r.outcomes) == sorted(j.id for j in jobs)  # each exactly once
    work = sum(j.duration_s * j.gpus for j in jobs)
    assert r.busy_gpu_seconds == pytest.approx(work + r.lost_gpu_seconds, abs=1e-6)
    assert sum(o.busy_gpu_seconds for o in r.outcomes) == pytest.approx(r.busy_gpu_seconds, abs=1e-6)
    assert sum(t.gpu_seconds for t in r.teams.values()) == pytest.approx(r.busy_gpu_seconds, abs=1e-6)
    if mode != "share+reclaim":
        assert r.preemptions == 0 and r.lost_gpu_seconds == 0
    assert r.lost_gpu_seconds >= 0
    by_id = {j.id: j for j in jobs}
    for o in r.outcomes:
        j = by_id[o.id]
        assert o.final_start >= j.submit_time
        if o.stops == 0:
            assert o.completion == pytest.approx(o.final_start + j.duration_s)
    specs = {t.name: t for t in sc.teams}
    reserve = [k for k, n in enumerate(r.team_names) if specs[n].sharing == "reserve"]
    for usage in r.series_usage:
        assert sum(usage) <= sc.capacity + TOL  # capacity never exceeded
        idle_reserved = sum(max(0.0, r.guarantees[k] - usage[k]) for k in reserve)
        assert sc.capacity - sum(usage) >= idle_reserved - TOL  # reserve idle never lent
        for k, name in enumerate(r.team_names):
            g = r.guarantees[k]
            cap = sim.reclaim.borrow_cap(specs[name], "gpu")
            limit = g if mode == "static" else g + (math.inf if cap is None else cap)
            assert usage[k] <= limit + TOL  # no team beyond guarantee + cap


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_conservation_over_random_traces(case):
    sc, jobs, mode, ckpt = case
    r = sim.simulate(sc, jobs, mode, poll_seconds=60, checkpoint_seconds=ckpt)
    _check_conservation(sc, jobs, mode, r)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_skipped_ticks_could_not_have_changed_anything(case):
    sc, jobs, _, ckpt = case
    fast = sim.simulate(sc, jobs, "share+reclaim", poll_seconds=60, checkpoint_seconds=ckpt).to_dict()
    slow = sim.simulate(sc, jobs, "share+reclaim", poll_seconds=60, checkpoint_seconds=ckpt,
                        skip_idle_ticks=False).to_dict()
    fast.pop("sim_seconds"), slow.pop("sim_seconds")
    assert fast == slow


@st.composite
def borrowers_cases(draw):
    """Two to four teams with small guarantees on a pool twice their sum, and up to
    40 jobs of one or two GPUs arriving close together: several teams borrow at once
    and queue beyond their guarantee, so their U/G rises and falls while their jobs
    wait (what the lazy index of U/G must get right)."""
    n_teams = draw(st.integers(2, 4))
    guarantees = [draw(st.integers(1, 3)) for _ in range(n_teams)]
    teams = [{"name": f"t{i}", "guarantee": {"gpu": g}} for i, g in enumerate(guarantees)]
    sc = scenario(capacity=2 * sum(guarantees), teams=teams)
    rows = [(f"j{k}", f"t{draw(st.integers(0, n_teams - 1))}", draw(st.integers(0, 60)),
             draw(st.sampled_from([5, 30, 100, 400])), draw(st.sampled_from([1, 1, 2])), draw(st.integers(0, 2)))
            for k in range(draw(st.integers(0, 40)))]
    return sc, jobs_of(sc, rows), draw(st.sampled_from(("share", "share+reclaim")))


def switched(sc, jobs, mode, knobs, **kw):
    """The figures of ``jobs`` replayed with the engine's class-level ``knobs`` set (then restored)."""
    before = {knob: getattr(sim._Sim, knob) for knob in knobs}
    for knob, value in knobs.items():
        setattr(sim._Sim, knob, value)
    try:
        figures = sim.simulate(sc, jobs, mode, poll_seconds=60, **kw).to_dict()
    finally:
        for knob, value in before.items():
            setattr(sim._Sim, knob, value)
    figures.pop("sim_seconds")
    return figures


# The heaps of queue heads are kept only for pools of more than SCAN_TEAMS teams: the tests of
# their shortcuts set SCAN_TEAMS to 0, so that the small pools they draw keep the heaps.
HEAPS = {"SCAN_TEAMS": 0}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=borrowers_cases())
def test_the_lazy_index_of_usage_over_guarantee_changes_nothing(case):
    sc, jobs, mode = case
    assert switched(sc, jobs, mode, {**HEAPS, "LAZY_RATIO": False}) == switched(sc, jobs, mode, HEAPS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=borrowers_cases())
def test_the_walk_of_the_queues_orders_the_borrowers_as_the_heaps_do(case):
    # Teams queued beyond their guarantee go in the order of their U/G, which moves while they wait.
    sc, jobs, mode = case
    assert switched(sc, jobs, mode, {}) == switched(sc, jobs, mode, HEAPS)


@pytest.mark.parametrize("knob, value", [
    # With no slack, the index is compacted (stale entries dropped, the masks of
    # non-empty heaps rebuilt) at nearly every change.
    ("COMPACT_SLACK", 0),
    # Every arrival dispatches, also one that joins the back of its queue.
    ("ARRIVAL_SHORTCUT", False),
    # Every change of U re-indexes all of the team's buckets, also a rise of U/G.
    ("LAZY_RATIO", False),
    # The next job to start is read from the index's heaps, not found by a scan of the teams.
    ("SCAN_TEAMS", 0),
])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_the_dispatch_index_shortcuts_change_nothing(knob, value, case):
    sc, jobs, mode, ckpt = case
    base = {} if knob in ("SCAN_TEAMS", "ARRIVAL_SHORTCUT") else HEAPS  # the heaps' own shortcuts: with heaps
    assert switched(sc, jobs, mode, {**base, knob: value}, checkpoint_seconds=ckpt) == \
        switched(sc, jobs, mode, base, checkpoint_seconds=ckpt)


@pytest.mark.parametrize("n_teams, scans", [(sim._Sim.SCAN_TEAMS, True), (sim._Sim.SCAN_TEAMS + 1, False)])
def test_a_pool_of_a_few_teams_scans_their_queues_and_a_larger_one_reads_the_heaps(n_teams, scans, monkeypatch):
    # Every team queues behind a pool its first job fills: each later start asks which job is next.
    sc = scenario(capacity=n_teams, teams=[{"name": f"t{i}", "guarantee": {"gpu": 1}} for i in range(n_teams)])
    jobs = jobs_of(sc, [(f"j{i}-{k}", f"t{i}", k, 100, 1, 0) for i in range(n_teams) for k in range(3)])
    counts = {"_best_scan": 0, "_best_in": 0}
    for name in counts:
        original = getattr(dispatch.DispatchIndex, name)

        def counted(*args, _name=name, _original=original, **kw):
            counts[_name] += 1
            return _original(*args, **kw)
        monkeypatch.setattr(dispatch.DispatchIndex, name, counted)
    result = sim.simulate(sc, jobs, "share", poll_seconds=60)
    assert result.completed == 3 * n_teams
    assert (counts["_best_scan"] > 0, counts["_best_in"] > 0) == (scans, not scans)


# ---------------------------------------------------------------------------
# Bad input and the CLI

SCENARIO = {
    "capacity": {"gpu": 8},
    "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
    "teams": [{"name": "a", "guarantee": {"gpu": 4}}, {"name": "b", "guarantee": {"gpu": 4}}],
}


@pytest.fixture
def files(tmp_path):
    def make(trace_text, scenario=SCENARIO):
        s = tmp_path / "scenario.json"
        s.write_text(json.dumps(scenario))
        t = tmp_path / "jobs.csv"
        t.write_text(trace_text)
        return str(s), str(t)

    return make


GOOD = "job_id,team,submit_time,duration_s,gpus,priority\n" + "".join(
    f"{i},{t},{s},{d},{g},{p}\n" for i, t, s, d, g, p in LENDER_RETURNS)


@pytest.mark.parametrize(
    "trace, mode, expected",
    [
        ("job_id,team,submit_time,duration_s,gpus\nj1,gamma,0,10,1\n", "share", ["line 2", "'j1'", "team", "gamma"]),
        ("job_id,team,submit_time,gpus\nj1,a,0,1\n", "share", ["line 1", "duration_s"]),
        ("job_id,team,submit_time,duration_s,gpus\nj1,a,0,10,1\nj2,a,0,-5,1\n", "share",
         ["line 3", "'j2'", "duration_s", "negative"]),
        ("job_id,team,submit_time,duration_s,gpus\nj1,a,0,10,9\n", "share", ["line 2", "'j1'", "whole pool"]),
        ("job_id,team,submit_time,duration_s,gpus\nj1,a,0,10,1\nj2,a,0,10,5\n", "static",
         ["line 3", "'j2'", "guarantee", "static"]),
        ("job_id,team,submit_time,duration_s,gpus\nj1,a,0,ten,1\n", "share", ["line 2", "duration_s", "finite number"]),
        ("job_id,team,submit_time,duration_s,gpus\nj1,a,0,10,1\nj1,b,0,10,1\n", "share", ["line 3", "unique"]),
        ("job_id,team,submit_time,duration_s,gpus,priority\nj1,a,0,10,1,high\n", "share", ["line 2", "priority"]),
    ],
)
def test_bad_rows_exit_2_naming_the_row(files, capsys, trace, mode, expected):
    s, t = files(trace)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", mode]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    for word in expected:
        assert word in err


def test_job_that_could_never_start_in_share_mode_is_rejected(files, capsys):
    scen = dict(SCENARIO, teams=[{"name": "a", "guarantee": {"gpu": 4}, "sharing": "lend"},
                                 {"name": "b", "guarantee": {"gpu": 4}}])
    s, t = files("job_id,team,submit_time,duration_s,gpus\nj1,a,0,10,6\n", scen)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share"]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "never start" in err


@pytest.mark.parametrize(
    "scenario, expected",
    [
        ({**SCENARIO, "jobs": []}, "jobs"),
        ({**SCENARIO, "capacity": {"cpu": 8}}, "gpu"),
        ({**SCENARIO, "teams": [{"name": "a", "guarantee": {"gpu": 40}}]}, "guarantee"),
    ],
)
def test_bad_scenario_exits_2(files, capsys, scenario, expected):
    s, t = files(GOOD, scenario)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_unknown_mode_and_missing_files_exit_2(files, capsys):
    s, t = files(GOOD)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "borrow"]) == 2
    assert "share+reclaim" in capsys.readouterr().err
    assert main(["simulate", "--scenario", s, "--trace", t + ".nope", "--mode", "share"]) == 2
    assert "--trace" in capsys.readouterr().err
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share", "--poll-seconds", "0"]) == 2


def test_cli_json_output_follows_the_contract(files, capsys):
    s, t = files(GOOD)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share+reclaim", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) == {"mode", "jobs", "completed", "window_s", "utilization", "preemptions",
                      "lost_gpu_seconds", "wait_gpu_hours", "sim_seconds", "teams"}
    assert set(d["teams"]["a"]) == {"jobs", "wait_p50_s", "wait_p95_s", "wait_p99_s", "gpu_seconds",
                                    "borrowed_gpu_seconds", "preempted", "lost_gpu_seconds", "reclaim_wait_p99_s"}
    assert d["mode"] == "share+reclaim" and d["jobs"] == 3 and d["completed"] == 3
    assert d["preemptions"] == 1 and d["lost_gpu_seconds"] == 480
    # types as the contract shows them: counts ints, GPU-seconds and hours floats even when whole
    assert all(type(d[k]) is int for k in ("jobs", "completed", "preemptions"))
    assert all(type(d[k]) is float for k in ("utilization", "lost_gpu_seconds", "wait_gpu_hours", "sim_seconds"))
    for team in d["teams"].values():
        assert all(type(team[k]) is int for k in ("jobs", "preempted"))
        assert all(type(team[k]) is float for k in ("gpu_seconds", "borrowed_gpu_seconds"))
        assert all(type(team[k]) in (int, float) for k in ("wait_p50_s", "wait_p95_s", "wait_p99_s",
                                                            "reclaim_wait_p99_s"))


def test_cli_checkpoint_flag_reaches_the_simulator(files, capsys):
    s, t = files(GOOD)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share+reclaim", "--json",
                 "--checkpoint-seconds", "100"]) == 0
    assert json.loads(capsys.readouterr().out)["lost_gpu_seconds"] == 80


def test_cli_table_and_plot(files, capsys, tmp_path):
    s, t = files(GOOD)
    out = tmp_path / "usage.png"
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share", "--plot", str(out)]) == 0
    text = capsys.readouterr().out
    assert "utilization" in text and "reclaim p99" in text
    assert any(line.startswith("a ") for line in text.splitlines())
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Through the one output writer: a link of that name is replaced, not followed.
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "linked.png"
    link.symlink_to(victim)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share", "--plot", str(link)]) == 0
    assert victim.read_text() == "keep me" and not link.is_symlink()
    assert link.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_prints_lost_work_in_gpu_hours_in_every_mode_and_seconds_only_in_json(files, capsys):
    """One unit where a person reads: the single-mode table says what --compare says (480 GPU-seconds)."""
    s, t = files(GOOD)
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share+reclaim"]) == 0
    text = capsys.readouterr().out
    assert "lost work           0.1 GPU-hours" in text.splitlines()
    assert "GPU-seconds" not in text
    assert main(["simulate", "--scenario", s, "--trace", t, "--compare"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "lost GPU-hours" in line)
    assert row.split()[-1].rstrip("*") == "0.1"  # share+reclaim, the last column
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share+reclaim", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lost_gpu_seconds"] == 480


def test_cli_plot_into_missing_folder_exits_2(files, capsys, tmp_path):
    s, t = files(GOOD)
    bad = tmp_path / "no" / "such" / "plot.png"
    assert main(["simulate", "--scenario", s, "--trace", t, "--mode", "share", "--plot", str(bad)]) == 2
    assert "--plot" in capsys.readouterr().err


def test_demand_excess_fluid_limits():
    sc = scenario()
    ex = sim.demand_excess(sc, jobs_of(sc, LENDER_RETURNS))
    # demand 8 on [0,100), 12 on [100,150), 8 on [150,1000): excess 4 GPUs for 50 s
    assert ex["shared_gpu_hours"] == pytest.approx(4 * 50 / 3600)
    # b: 8 against 4 for 1000 s; a: 4 against 4
    assert ex["partitioned_by_team_gpu_hours"] == {"a": 0, "b": pytest.approx(4 * 1000 / 3600)}


@pytest.mark.parametrize("capacity, team", [
    (8, {"name": "t", "guarantee": {"gpu": 3}, "borrow_limit": {"gpu": 1}, "in_team_preemption": True}),
    (4, {"name": "t", "guarantee": {"gpu": 3}, "in_team_preemption": True}),
])
def test_in_team_preemption_room_goes_to_the_job_it_was_made_for(capacity, team):
    # H needs 4 GPUs, beyond the guarantee of 3: it fits only once L is stopped (the
    # borrow cap of 1, or the pool of 4, leave no room while L runs); the planner stops the team's own
    # lower-priority L for it. H must get that room: if dispatch gave it back to L
    # (within the guarantee, so first in dispatch order), the next tick would stop L
    # again, forever.
    sc = scenario(capacity=capacity, teams=[team])
    rows = [("L", "t", 0, 1000, "0.5", 0), ("H", "t", 10, 40, 4, 2)]
    r = sim.simulate(sc, jobs_of(sc, rows), "share+reclaim", poll_seconds=60)
    assert outcome(r, "H").final_start == 60
    assert outcome(r, "L").stops == 1
    assert outcome(r, "L").completion == 1100
    assert r.lost_gpu_seconds == 0.5 * 60
