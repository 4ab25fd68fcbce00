"""The simulator with checkpoints per job and per team, and the checkpoint-aware victim order.

The default order's outputs are pinned by a recorded fixture: every existing mode and option
gives the same JSON, byte for byte (``sim_seconds`` aside).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError

GOLDEN = Path(__file__).parent / "data" / "simulate_golden.json"


# ---------------------------------------------------------------------------
# The default order, unchanged


def golden_fixture(**settings):
    """600 jobs of four teams (one with in-team preemption, a lender with a cap, a reserve
    team) on 16 GPUs: enough contention for about 130 preemptions a run. ``settings``: more
    planner settings."""
    rng = random.Random(20261204)
    scenario = sim.parse_scenario({
        "capacity": {"gpu": 16},
        "settings": {"reclaim_after_seconds": 60, "min_runtime_seconds": 0, **settings},
        "teams": [
            {"name": "a", "guarantee": {"gpu": 6}},
            {"name": "b", "guarantee": {"gpu": 4}, "in_team_preemption": True},
            {"name": "c", "guarantee": {"gpu": 4}, "sharing": "lend", "borrow_limit_percent": 50},
            {"name": "d", "guarantee": {"gpu": 2}, "sharing": "reserve"},
        ]})
    rows = []
    t = 0
    for i in range(600):
        t += rng.choice((0, 0, 5, 30, 90, 200))
        team = rng.choice("aaabbcd")
        g = rng.choice((0.5, 1, 1, 2, 2, 4))
        if team == "d":
            g = min(g, 2)
        rows.append((f"j{i}", team, t, rng.choice((60, 300, 900, 3600, 7200)) + rng.randint(0, 99), g,
                     rng.randint(0, 2)))
    return scenario, sim.trace_from_rows(rows, scenario)


def test_every_existing_mode_and_option_gives_the_recorded_json():
    scenario, jobs = golden_fixture()
    want = json.loads(GOLDEN.read_text())
    for key, recorded in want.items():
        mode, poll, ckpt = key.split(" ")
        poll_s = float(poll.split("=")[1])
        ckpt_s = None if ckpt.endswith("None") else float(ckpt.split("=")[1])
        got = sim.simulate(scenario, jobs, mode, poll_seconds=poll_s, checkpoint_seconds=ckpt_s).to_dict()
        got.pop("sim_seconds")
        assert json.dumps(got, sort_keys=True) == json.dumps(recorded, sort_keys=True), key
    assert sum(r["preemptions"] for r in want.values()) > 400  # the fixture does reclaim


def test_an_explicit_youngest_order_is_the_default():
    scenario, jobs = golden_fixture()
    plain = sim.simulate(scenario, jobs, "share+reclaim").to_dict()
    explicit = sim.simulate(scenario, jobs, "share+reclaim", victim_order="youngest").to_dict()
    for d in (plain, explicit):
        d.pop("sim_seconds")
    assert plain == explicit and "victim_order" not in plain


def test_with_every_interval_at_most_the_cap_the_checkpoint_order_gives_what_it_gave_uncapped():
    # Every job of the fixture saves every 600 s: caps of 600 s and above change nothing, and a
    # cap no age reaches (10**9) is the order as it was before it had one.
    runs = []
    for cap in (600, 3600, 10**9):
        scenario, jobs = golden_fixture(max_checkpoint_seconds=cap)
        got = sim.simulate(scenario, jobs, "share+reclaim", checkpoint_seconds=600, victim_order="checkpoint").to_dict()
        got.pop("sim_seconds")
        runs.append(json.dumps(got, sort_keys=True))
    assert runs[0] == runs[1] == runs[2]
    assert json.loads(runs[0])["preemptions"] > 50


# ---------------------------------------------------------------------------
# The reclaim contract's worked case, in time: B runs b1 and b2 from 0 (within its
# guarantee of 4), b3 from 1000 and b4 from 1500 (beyond it), 2 GPUs each; A's a1 (2 GPUs)
# arrives at 1995 and the planner's tick at 2000 takes 2 GPUs back.


def worked(team_checkpoint=600, b4_checkpoint="", victim_order=None, checkpoint=None, b3_checkpoint="",
           max_checkpoint_seconds=None):
    sc = sim.parse_scenario({
        "capacity": {"gpu": 8},
        "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0,
                     **({"victim_order": victim_order} if victim_order else {}),
                     **({"max_checkpoint_seconds": max_checkpoint_seconds} if max_checkpoint_seconds else {})},
        "teams": [{"name": "A", "guarantee": {"gpu": 4}},
                  {"name": "B", "guarantee": {"gpu": 4},
                   **({} if team_checkpoint is None else {"checkpoint_seconds": team_checkpoint})}],
    })
    rows = [("b1", "B", 0, 9000, 2, 0, ""), ("b2", "B", 0, 9000, 2, 0, ""), ("b3", "B", 1000, 9000, 2, 0, b3_checkpoint),
            ("b4", "B", 1500, 9000, 2, 0, b4_checkpoint), ("a1", "A", 1995, 100, 2, 0, "")]
    jobs = sim.trace_from_rows(rows, sc, header=("job_id", "team", "submit_time", "duration_s", "gpus", "priority",
                                                 "checkpoint_seconds"))
    return sc, jobs, checkpoint


def run(case, order=None):
    sc, jobs, checkpoint = case
    return sim.simulate(sc, jobs, "share+reclaim", poll_seconds=10, checkpoint_seconds=checkpoint, victim_order=order)


def stopped(result):
    return sorted(o.id for o in result.outcomes if o.stops)


def test_youngest_first_stops_the_latest_start():
    r = run(worked())
    assert stopped(r) == ["b4"]
    assert r.lost_gpu_seconds == 2 * 500  # 500 s since its start, no checkpoint yet
    assert "victim_order" not in r.to_dict()


def test_the_checkpoint_order_stops_the_borrowed_run_with_the_least_lost_work():
    r = run(worked(), "checkpoint")
    assert stopped(r) == ["b3"]
    assert r.lost_gpu_seconds == 2 * 400  # 1000 s run, checkpointed at 600
    assert r.to_dict()["victim_order"] == "checkpoint"


def test_the_scenarios_victim_order_is_used_unless_the_caller_says_otherwise():
    assert stopped(run(worked(victim_order="checkpoint"))) == ["b3"]
    assert stopped(run(worked(victim_order="checkpoint"), "youngest")) == ["b4"]


def test_a_jobs_own_interval_comes_before_its_teams():
    # b4 saves every 100 s: stopping it at 2000 loses nothing.
    r = run(worked(b4_checkpoint="100"), "checkpoint")
    assert stopped(r) == ["b4"] and r.lost_gpu_seconds == 0


def test_the_teams_interval_comes_before_the_global_one():
    # --checkpoint-seconds 50 would make b3's W 0 and b4's 0 too; B's 600 s decides: b3 (W 400).
    r = run(worked(checkpoint=50), "checkpoint")
    assert stopped(r) == ["b3"] and r.lost_gpu_seconds == 2 * 400


def test_the_global_interval_applies_to_jobs_of_teams_without_one():
    r = run(worked(team_checkpoint=None, checkpoint=300), "checkpoint")
    # W: b3 1000 mod 300 = 100, b4 500 mod 300 = 200.
    assert stopped(r) == ["b3"] and r.lost_gpu_seconds == 2 * 100


def test_a_teams_interval_of_zero_means_never_even_with_a_global_one():
    r = run(worked(team_checkpoint=0, checkpoint=300), "checkpoint")
    assert stopped(r) == ["b4"] and r.lost_gpu_seconds == 2 * 500  # W is the age: b4 is younger


@pytest.mark.parametrize("declared", ["0", "604800"])
def test_the_order_believes_no_interval_above_the_cap_but_a_stop_loses_the_jobs_own_work(declared):
    # The contract's E6 and E7 in time: with a cap of 900 s, b3 declaring never (or a week)
    # is ordered as saving every 900 s (W 100 < b4's 500) and goes first; it still restarts
    # from its own last checkpoint: never (none in its 1000 s), a week (none yet).
    r = run(worked(b3_checkpoint=declared, max_checkpoint_seconds=900), "checkpoint")
    assert stopped(r) == ["b3"] and r.lost_gpu_seconds == 2 * 1000
    # Without the cap biting (M above every age), b3 looked the most expensive to stop.
    r = run(worked(b3_checkpoint=declared, max_checkpoint_seconds=10**6), "checkpoint")
    assert stopped(r) == ["b4"] and r.lost_gpu_seconds == 2 * 500


def test_the_default_cap_orders_a_job_that_never_saves_as_saving_every_hour():
    # b3 (never saves) has run 1000 s and b4 (every 600 s) 500 s: below the hour, W is the age
    # and b4 goes; with b3 started 3800 s before the tick (W 200 once counted modulo 3600), b3 goes.
    assert stopped(run(worked(b3_checkpoint="0"), "checkpoint")) == ["b4"]
    sc, jobs, _ = worked(b3_checkpoint="0")
    rows = [("b1", "B", 0, 9000, 2, 0, ""), ("b2", "B", 0, 9000, 2, 0, ""), ("b3", "B", 200, 9000, 2, 0, "0"),
            ("b4", "B", 3500, 9000, 2, 0, ""), ("a1", "A", 3995, 100, 2, 0, "")]
    jobs = sim.trace_from_rows(rows, sc, header=("job_id", "team", "submit_time", "duration_s", "gpus", "priority",
                                                 "checkpoint_seconds"))
    r = sim.simulate(sc, jobs, "share+reclaim", poll_seconds=10, victim_order="checkpoint")
    assert stopped(r) == ["b3"] and r.lost_gpu_seconds == 2 * 3800


def test_a_restarted_job_resumes_from_the_last_multiple_of_its_own_interval():
    r = run(worked(b4_checkpoint="150"), "youngest")
    (b4,) = [o for o in r.outcomes if o.id == "b4"]
    # Stopped at 2000 after 500 s: saved 450, lost 50; restarted, it runs 9000 - 450 more.
    assert r.lost_gpu_seconds == 2 * 50
    assert b4.completion == pytest.approx(b4.final_start + 9000 - 450)


def test_borrowed_is_decided_at_the_start_not_from_the_state_of_the_tick():
    # b3 starts at 1000 beyond B's guarantee (b1 and b2 hold it); b1 ends at 1200, so from
    # the state at 2000 b3 would look within it (b2 and b3 hold 4) and x (from 1500, W 500)
    # and b4 (from 1550, W 450) borrowed: b4 would go. Recorded at its start, b3 borrowed
    # and has the least lost work (400): b3 goes.
    sc, jobs, _ = worked()
    rows = [("b1", "B", 0, 1200, 2, 0, ""), ("b2", "B", 0, 9000, 2, 0, ""), ("b3", "B", 1000, 9000, 2, 0, ""),
            ("x", "B", 1500, 9000, 2, 0, ""), ("b4", "B", 1550, 9000, 2, 0, ""), ("a1", "A", 1995, 100, 2, 0, "")]
    jobs = sim.trace_from_rows(rows, sc, header=("job_id", "team", "submit_time", "duration_s", "gpus", "priority",
                                                 "checkpoint_seconds"))
    r = sim.simulate(sc, jobs, "share+reclaim", poll_seconds=10, victim_order="checkpoint")
    assert stopped(r) == ["b3"] and r.lost_gpu_seconds == 2 * 400


# ---------------------------------------------------------------------------
# Bad input


def test_a_negative_interval_in_the_trace_names_its_line():
    sc = worked()[0]
    with pytest.raises(ConfigError) as info:
        sim.trace_from_rows([("j1", "A", 0, 10, 1, 0, "-5")], sc, header=(
            "job_id", "team", "submit_time", "duration_s", "gpus", "priority", "checkpoint_seconds"))
    (problem,) = info.value.problems
    assert problem.field == "line 2 (job 'j1'), checkpoint_seconds" and problem.value == "-5"
    assert problem.message == "is negative" and "leave the cell empty" in problem.fix


def test_an_unknown_victim_order_is_refused():
    sc, jobs, _ = worked()
    with pytest.raises(ConfigError) as info:
        sim.simulate(sc, jobs, "share+reclaim", victim_order="oldest")
    assert info.value.problems[0].field == "--victim-order"


def test_a_teams_negative_interval_in_the_scenario_is_refused():
    with pytest.raises(ConfigError) as info:
        sim.parse_scenario({"capacity": {"gpu": 1}, "teams": [{"name": "a", "guarantee": {"gpu": 1},
                                                                 "checkpoint_seconds": -1}]})
    assert info.value.problems[0].field == "teams[0].checkpoint_seconds"


# ---------------------------------------------------------------------------
# The command line


@pytest.fixture()
def worked_files(tmp_path):
    scenario = {"capacity": {"gpu": 8}, "settings": {"reclaim_after_seconds": 0},
                "teams": [{"name": "A", "guarantee": {"gpu": 4}}, {"name": "B", "guarantee": {"gpu": 4}}]}
    trace = ("job_id,team,submit_time,duration_s,gpus\n"
             "b1,B,0,9000,2\nb2,B,0,9000,2\nb3,B,1000,9000,2\nb4,B,1500,9000,2\na1,A,1995,100,2\n")
    s, t = tmp_path / "scenario.json", tmp_path / "jobs.csv"
    s.write_text(json.dumps(scenario))
    t.write_text(trace)
    return ["--scenario", str(s), "--trace", str(t), "--poll-seconds", "10"]


def test_compare_with_checkpoints_adds_the_checkpoint_order_and_says_which_won(worked_files, capsys):
    assert main(["simulate", *worked_files, "--compare", "--checkpoint-seconds", "600"]) == 0
    text = capsys.readouterr().out
    assert "share+reclaim, checkpoint order, checkpoints 10m" in text
    assert "victim order, lost work: checkpoint wins, 0.3 -> 0.2 GPU-hours (1.3x lower)" in text
    assert "victim order, wait for own guarantee p99: A 5s -> 5s; B 0s -> 0s (every team within 1m)" in text


def test_compare_json_carries_the_verdict(worked_files, capsys):
    assert main(["simulate", *worked_files, "--compare", "--checkpoint-seconds", "600", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    verdict = out["comparison"]["victim_order"]
    assert verdict["lost_gpu_hours"] == {"youngest": 1000 / 3600, "checkpoint": 800 / 3600,
                                         "ratio": pytest.approx(1.25)}
    assert verdict["bound_s"] == 10 + 0 + 60
    assert verdict["guarantee_wait_p99_s"]["A"] == {"youngest": 5, "checkpoint": 5, "within_bound": True}
    assert list(out["results"])[-1] == "share+reclaim, checkpoint order, checkpoints 10m"
    assert out["results"]["share+reclaim, checkpoint order, checkpoints 10m"]["victim_order"] == "checkpoint"


def test_compare_without_checkpoints_is_unchanged(worked_files, capsys):
    assert main(["simulate", *worked_files, "--compare", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["results"]) == ["static", "share", "share+reclaim"]
    assert "victim_order" not in out["comparison"]


def test_compare_with_youngest_asked_for_has_no_checkpoint_order_column(worked_files, capsys):
    assert main(["simulate", *worked_files, "--compare", "--checkpoint-seconds", "600", "--victim-order", "youngest",
                 "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["results"])[-1] == "share+reclaim, checkpoints 10m"


def test_victim_order_flag_reaches_a_single_run(worked_files, capsys):
    assert main(["simulate", *worked_files, "--mode", "share+reclaim", "--checkpoint-seconds", "600",
                 "--victim-order", "checkpoint", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["victim_order"] == "checkpoint" and out["lost_gpu_seconds"] == 800


@pytest.mark.parametrize("what", [["--mode", "share+reclaim"], ["--compare"]])
def test_an_unknown_victim_order_flag_exits_2_naming_it(worked_files, capsys, what):
    assert main(["simulate", *worked_files, *what, "--victim-order", "oldest"]) == 2
    err = capsys.readouterr().err
    assert "--victim-order" in err and "'oldest'" in err and "youngest, checkpoint" in err
    assert "Traceback" not in err
