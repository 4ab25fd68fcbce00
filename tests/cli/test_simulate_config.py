"""`gpu-share simulate --config` and `--compare`: the scenario built from the platform config,
the side-by-side comparison and its best-value marks, and the CLI's messages."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.core import scenario as sc
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration.parse import Amount, load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.simulate import compare as cmp_mod
from tests.data import alibaba_trace

ROOT = Path(__file__).resolve().parents[2]

HYPERPOD_TEAMS = [
    {"name": "research", "guarantee": {"ml.p5.48xlarge": 2}, "sharing": "lend_and_borrow",
     "borrow_limit_percent": 50, "borrow_limit": {"ml.p5.48xlarge": {"accelerators": 8}},
     "in_team_preemption": True},
    {"name": "applied", "guarantee": {"ml.p5.48xlarge": {"accelerators": 8, "vcpu": 192, "memory_gib": 2048}},
     "sharing": "lend"},
    {"name": "inference", "guarantee": {"ml.p4d.24xlarge": {"mig": {"mig-3g.20gb": 7}}}, "sharing": "reserve"},
    {"name": "adhoc", "guarantee": {"ml.p5.48xlarge": {"vcpu": 96}}},
]


def hyperpod_config():
    return parse_config({
        "teams": HYPERPOD_TEAMS,
        "hyperpod": {"cluster_arn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
                     "capacity": {"ml.p5.48xlarge": 4, "ml.p4d.24xlarge": 1}},
    })


# ---------------------------------------------------------------------------
# amounts in GPUs


@pytest.mark.parametrize("instance_type, amount, gpus", [
    ("ml.p5.48xlarge", Amount(instances=2), 16),
    ("ml.p5.48xlarge", Amount(accelerators=3, vcpu=10), 3),  # accelerators win over vCPU
    ("ml.p4d.24xlarge", Amount(mig=(("mig-3g.20gb", 2), ("mig-1g.5gb", 1))), Fraction(7, 7)),
    ("ml.p4d.24xlarge", Amount(mig=(("mig-2g.10gb", 1),)), Fraction(2, 7)),
    ("ml.p5.48xlarge", Amount(vcpu=96), 4),  # half the vCPUs of a 192-vCPU, 8-GPU instance
    ("ml.p5.48xlarge", Amount(vcpu=48, memory_gib=1024), 4),  # the larger share: half the memory
    ("g5.12xlarge", 3, 12),  # a capacity count: whole instances
    ("unknown.type", 3, 0),
])
def test_amount_gpus(instance_type, amount, gpus):
    assert sc.amount_gpus(instance_type, amount) == gpus


def test_mig_profile_is_its_fraction_of_a_gpu():
    assert sc.mig_fraction("mig-1g.5gb") == Fraction(1, 7)
    assert sc.mig_fraction("mig-7g.80gb") == 1


# ---------------------------------------------------------------------------
# the mapping


def test_hyperpod_scenario_counts_gpus_and_applies_the_service_defaults():
    s = sc.scenario_from_config(hyperpod_config())
    assert s["capacity"] == {"gpu": 40}  # 4 x 8 + 1 x 8
    assert s["settings"] == {"reclaim_after_seconds": 0, "min_runtime_seconds": 0}
    teams = {t["name"]: t for t in s["teams"]}
    assert teams["research"] == {"name": "research", "guarantee": {"gpu": 16}, "sharing": "lend_and_borrow",
                                 "in_team_preemption": True, "borrow_limit_percent": 50,
                                 "borrow_limit": {"gpu": 8}}
    assert teams["applied"]["guarantee"] == {"gpu": 8}
    assert teams["applied"]["sharing"] == "lend" and "borrow_limit_percent" not in teams["applied"]
    assert teams["inference"]["guarantee"] == {"gpu": 3}  # 7 x 3/7
    assert teams["inference"]["sharing"] == "reserve"
    # HyperPod's default BorrowLimit is 50 % when the team sets none.
    assert teams["adhoc"]["borrow_limit_percent"] == 50
    assert teams["adhoc"]["guarantee"] == {"gpu": 4}
    parsed = sim.parse_scenario(s)  # the simulator accepts what the mapping builds
    assert parsed.capacity == 40


def test_fairshare_scenario_takes_the_reclaim_settings_and_period():
    config = load_config(ROOT / "platform.yaml")
    s = sc.scenario_from_config(config, "fairshare")
    assert s["capacity"] == {"gpu": 3}
    assert s["settings"] == {"reclaim_after_seconds": 60, "min_runtime_seconds": 0, "victim_order": "checkpoint"}
    assert [t["guarantee"] for t in s["teams"]] == [{"gpu": 1}] * 3
    assert [t.get("checkpoint_seconds") for t in s["teams"]] == [None, 600, None]
    assert [t["in_team_preemption"] for t in s["teams"]] == [True, False, False]
    assert all(t["borrow_limit_percent"] == -1 for t in s["teams"])  # unlimited in platform.yaml
    assert sc.poll_seconds_of(config, "fairshare") == 60
    assert sc.poll_seconds_of(config, "batch_quota") is None


def test_batch_quota_default_borrow_limit_is_unlimited():
    config = parse_config({"teams": [{"name": "a", "guarantee": {"ml.g5.xlarge": 1}},
                                     {"name": "b", "guarantee": {"ml.g5.xlarge": 1}, "sharing": "reserve"}],
                           "batch_quota": {"capacity": {"ml.g5.xlarge": 2}}})
    s = sc.scenario_from_config(config)
    assert s["teams"][0]["borrow_limit_percent"] == -1
    assert "borrow_limit_percent" not in s["teams"][1]


def test_only_the_backends_teams_are_simulated():
    config = load_config(ROOT / "platform.yaml")
    assert [t["name"] for t in sc.scenario_from_config(config, "batch_quota")["teams"]] == ["team-a", "team-b", "team-c"]


def test_backend_must_be_chosen_when_the_config_has_several():
    config = load_config(ROOT / "platform.yaml")
    with pytest.raises(ConfigError) as err:
        sc.scenario_from_config(config)
    text = str(err.value)
    assert "--backend" in text and "batch_quota, fairshare" in text and "add --backend batch_quota" in text


@pytest.mark.parametrize("backend, message", [
    ("hyperpod", "is not declared by the config"),
    ("slurm", "is not a backend"),
])
def test_backend_must_exist(backend, message):
    with pytest.raises(ConfigError, match=message):
        sc.scenario_from_config(load_config(ROOT / "platform.yaml"), backend)


# ---------------------------------------------------------------------------
# the comparison


def two_team_runs(checkpoint=None):
    s = sim.parse_scenario({"capacity": {"gpu": 8}, "teams": [{"name": "a", "guarantee": {"gpu": 4}},
                                                               {"name": "b", "guarantee": {"gpu": 4}}]})
    jobs = sim.trace_from_rows([("B1", "b", 0, 1000, 4), ("B2", "b", 0, 1000, 4), ("A1", "a", 100, 50, 4)], s,
                               header=("job_id", "team", "submit_time", "duration_s", "gpus"))
    runs = [(m, sim.simulate(s, jobs, m)) for m in sim.MODES]
    return runs, jobs


def test_compare_rows_and_best_marks():
    runs, jobs = two_team_runs()
    c = cmp_mod.compare(runs, jobs)
    assert c.modes == ("static", "share", "share+reclaim")
    a = {r.key: r for r in c.teams["a"]}
    b = {r.key: r for r in c.teams["b"]}
    # a, the lender, waits in share until b's borrowed job ends (1000), in share+reclaim until
    # the planner's first tick (120), and not at all in static.
    assert a["wait_p50_s"].values == (0, 900, 20)
    assert a["wait_p50_s"].best == (0,)
    assert a["lender_wait_p99_s"].values == (0, 900, 20)
    # b borrows in share and share+reclaim; more borrowed is better.
    assert b["borrowed_gpu_hours"].values[0] == 0 and b["borrowed_gpu_hours"].values[1] > 0
    assert 0 not in b["borrowed_gpu_hours"].best
    assert b["preemptions"].values == (0, 0, 1)
    assert b["preemptions"].best == (0, 1)
    # B2 was stopped at the first tick (120) after 120 s on 4 GPUs, no checkpoints.
    assert b["lost_gpu_hours"].values[2] == pytest.approx(480 / 3600)
    pool = {r.key: r for r in c.pool}
    u = pool["utilization"].values
    assert pool["utilization"].best == tuple(i for i, v in enumerate(u) if v == max(u))  # highest wins
    assert u[0] < max(u)
    # per-team lost work adds up to the pool's
    for (_, r) in runs:
        assert sum(cmp_mod.lost_by_team(r, jobs).values()) == pytest.approx(r.lost_gpu_seconds)


def test_equal_rows_have_no_best_and_missing_modes_do_not_compete():
    row = cmp_mod.Row("x", "x", "count", cmp_mod.LOWER, (3.0, 3.0, 3.0))
    assert row.best == ()
    row = cmp_mod.Row("x", "x", "count", cmp_mod.LOWER, (None, 5.0, 2.0))
    assert row.best == (2,)
    row = cmp_mod.Row("x", "x", "%", cmp_mod.HIGHER, (None, 5.0, 2.0))
    assert row.best == (1,)
    assert cmp_mod.Row("x", "x", "%", cmp_mod.HIGHER, (None, 5.0)).best == ()


# ---------------------------------------------------------------------------
# the command line


def small_trace(tmp_path, teams=("team-a", "team-b", "team-c")):
    rows = ["job_id,team,submit_time,duration_s,gpus,priority"]
    rows += [f"b{i},{teams[1]},0,1000,1,0" for i in range(3)]
    rows += [f"a{i},{teams[0]},{100 + i},50,1,0" for i in range(2)]
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_cli_compare_from_the_platform_config(tmp_path, capsys):
    code = main(["simulate", "--config", str(ROOT / "platform.yaml"), "--backend", "fairshare",
                 "--trace", str(small_trace(tmp_path)), "--compare", "--checkpoint-seconds", "30"])
    out = capsys.readouterr().out
    assert code == 0
    assert "backend fairshare (3 GPUs)" in out
    assert "team team-a: guarantee 1 GPU" in out and "team team-c: guarantee 1 GPU" in out
    assert "share+reclaim, checkpoints 30s" in out
    assert "reclaim planner runs every 60 s" in out  # the fair-share schedule, 1 minute
    lines = {line.split("  ")[1].strip(): line for line in out.splitlines() if line.startswith("  wait for own")}
    assert lines  # the lenders' wait row is there
    assert "*" in out


def test_cli_compare_json(tmp_path, capsys):
    code = main(["simulate", "--config", str(ROOT / "platform.yaml"), "--backend", "batch_quota",
                 "--trace", str(small_trace(tmp_path)), "--compare", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    assert d["comparison"]["modes"] == ["static", "share", "share+reclaim"]
    assert d["poll_seconds"] == 60
    a = d["comparison"]["teams"]["team-a"]
    assert a["wait_p50_s"]["values"]["share"] > 0 and a["wait_p50_s"]["values"]["share+reclaim"] <= 60
    assert "static" in a["wait_p50_s"]["best"]
    assert set(d["results"]) == {"static", "share", "share+reclaim"}


def test_cli_compare_static_impossible_is_a_note(tmp_path, capsys):
    trace = tmp_path / "big.csv"
    trace.write_text("job_id,team,submit_time,duration_s,gpus\nx,team-a,0,10,2\n")
    code = main(["simulate", "--config", str(ROOT / "platform.yaml"), "--backend", "fairshare",
                 "--trace", str(trace), "--compare"])
    out = capsys.readouterr().out
    assert code == 0
    assert "note: static: not possible" in out and "line 2" in out


def test_cli_raw_alibaba_trace_says_convert_first(capsys):
    raw = alibaba_trace("openb_pod_list_gpushare100.csv")
    code = main(["simulate", "--config", str(ROOT / "examples" / "alibaba-openb.yaml"), "--trace", str(raw),
                 "--mode", "share"])
    err = capsys.readouterr().err
    assert code == 2
    assert "is an Alibaba OpenB pod list" in err
    assert f"gpu-share trace convert --from alibaba-openb {raw} -o jobs.csv" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--scenario", "S.json", "--backend", "fairshare", "--mode", "share"], "--backend"),
    (["--config", "platform.yaml"], "--mode"),
    (["--config", "platform.yaml", "--backend", "hyperpod", "--mode", "share"], "is not declared by the config"),
    (["--config", "platform.yaml", "--mode", "share"], "add --backend batch_quota"),
    (["--config", "platform.yaml", "--backend", "fairshare", "--compare", "--report", "out.txt"], ".html"),
])
def test_cli_bad_usage_names_the_flag(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(ROOT)
    (tmp_path / "S.json").write_text("{}")
    argv = [str(tmp_path / a) if a == "S.json" else a for a in argv]
    code = main(["simulate", *argv, "--trace", str(small_trace(tmp_path))])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err


def test_scenario_and_config_are_exclusive(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--scenario", "s.json", "--config", "p.yaml", "--trace", "t.csv", "--mode", "share"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# the plot


def _waiting_gpu_seconds(result) -> float:
    times, values = result.series_waiting
    ends = [*times[1:], result.window[1]]
    return sum((end - t) * sum(v) for t, end, v in zip(times, ends, values))


@pytest.mark.parametrize("mode", sim.MODES)
def test_waiting_series_is_the_simulators_pending_set(mode):
    """Integrated, the waiting band is the simulator's queued GPU-seconds (JSON ``wait_gpu_hours``,
    final start minus submit) less what preempted jobs ran before their final start: without
    checkpoints, exactly ``lost_gpu_seconds``."""
    s = sim.parse_scenario({"capacity": {"gpu": 8}, "teams": [{"name": "a", "guarantee": {"gpu": 4}},
                                                               {"name": "b", "guarantee": {"gpu": 2}},
                                                               {"name": "c", "guarantee": {"gpu": 2}, "sharing": "reserve"}]})
    rows = []
    for i in range(60):
        team = "abc"[i % 3]
        rows.append((f"J{i}", team, (i * 37) % 900, 60 + (i * 53) % 700, [1, 2, 4][(i * 7) % 3] if team == "a" else [1, 2][i % 2]))
    jobs = sim.trace_from_rows(rows, s, header=("job_id", "team", "submit_time", "duration_s", "gpus"))
    result = sim.simulate(s, jobs, mode)
    assert result.completed == len(jobs)
    times, values = result.series_waiting
    assert times == sorted(set(times)) and all(x >= 0 for v in values for x in v)
    assert values[-1] == (0.0, 0.0, 0.0)  # every job started in the end
    expected = result.wait_gpu_seconds - result.lost_gpu_seconds
    assert _waiting_gpu_seconds(result) == pytest.approx(expected, rel=1e-12, abs=1e-6)
    if mode == "share+reclaim":
        assert result.preemptions > 0 and result.lost_gpu_seconds > 0  # the case the old band got wrong
    assert "pending" not in json.dumps(result.to_dict())  # the JSON output is unchanged


def test_plot_shares_one_scale_keeps_the_legend_off_the_data_and_shows_waits_and_preemptions():
    from cdk_gpu_share.cli.simulate_report import usage_figure, waiting_series

    runs, jobs = two_team_runs()
    result = dict(runs)["share+reclaim"]
    assert result.preemption_events == [(120.0, 1)]  # B2 of team b, stopped at the first tick
    t, v = waiting_series(result)
    # The simulator's own pending set: B1 and B2 start at once (never shown waiting); A1 waits from
    # its submit (100) to the tick (120); B2 waits from its stop at that tick to its restart at 170.
    assert list(zip(t, v)) == [(0.0, (0.0, 0.0)), (100.0, (4.0, 0.0)), (120.0, (0.0, 4.0)), (170.0, (0.0, 0.0))]
    assert waiting_series(result, jobs) == (t, v)  # the old signature still works
    fig = usage_figure(result, jobs)
    try:
        team_axes = fig.axes[:2]
        assert team_axes[0].get_ylim() == team_axes[1].get_ylim()  # one GPU scale for every team
        assert fig.legends and not any(ax.get_legend() for ax in fig.axes)  # the legend is the figure's
        legend_box = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
        for ax in fig.axes:
            assert not legend_box.overlaps(ax.get_window_extent(fig.canvas.get_renderer()))
        labels = [text.get_text() for text in fig.legends[0].get_texts()]
        assert "waiting: GPUs of pending jobs" in labels and "preemption of the team's job" in labels
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_cli_report_is_written_whole_and_never_through_a_link(tmp_path, capsys):
    """--report goes through the one writer of command outputs: an unwritable path is one line
    naming --report, and a link named like the report is replaced, not followed."""
    trace = str(small_trace(tmp_path))
    argv = ["simulate", "--config", str(ROOT / "platform.yaml"), "--backend", "fairshare", "--trace", trace, "--compare"]
    (tmp_path / "a-folder.html").mkdir()
    assert main([*argv, "--report", str(tmp_path / "a-folder.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--report" in err[0], err
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (tmp_path / "report.html").symlink_to(outside)
    assert main([*argv, "--report", str(tmp_path / "report.html")]) == 0
    assert outside.read_text() == "keep me"
    assert not (tmp_path / "report.html").is_symlink()
    assert "<html" in (tmp_path / "report.html").read_text().lower()


@pytest.mark.parametrize("flag, target", [("--report", "report.html"), ("--plot", "usage.png")])
def test_a_plot_without_matplotlib_is_refused_before_the_simulation_runs(flag, target, tmp_path, capsys,
                                                                          monkeypatch):
    from cdk_gpu_share.cli import simulate_cmd

    for name in ("matplotlib", "matplotlib.pyplot"):
        monkeypatch.setitem(__import__("sys").modules, name, None)  # import matplotlib raises ImportError

    def simulated(*args, **kwargs):
        raise AssertionError("the simulation ran before the missing matplotlib was reported")

    monkeypatch.setattr(simulate_cmd, "_run_compare", simulated)
    monkeypatch.setattr(simulate_cmd, "_run_one", simulated)
    code = main(["simulate", "--config", str(ROOT / "platform.yaml"), "--backend", "fairshare",
                 "--trace", str(small_trace(tmp_path)), "--compare", flag, str(tmp_path / target)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert f"{flag} needs matplotlib: install it with  pip install 'cdk-gpu-share[plot]'" in err
    assert not (tmp_path / target).exists()


def test_simulate_help_names_both_ways_to_get_a_trace(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = "".join(capsys.readouterr().out.split())  # argparse wraps lines at hyphens too
    assert "`gpu-sharetracesample`" in out and "`gpu-sharetraceconvert`" in out
