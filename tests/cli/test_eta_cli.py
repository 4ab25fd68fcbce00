"""`gpu-share eta --backtest`: the documented JSON keys, the same answer with any number of
workers, --config for every backend simulate supports, bad input refused in one line (exit 2)."""

from __future__ import annotations

import json
import re

import pytest

from cdk_gpu_share.core.configuration import backends
from tests.cli.test_advise_cli import run  # the one way these tests run a command
from tests.core.test_eta import KNOWN


@pytest.fixture
def case(tmp_path):
    scenario = {"capacity": {"gpu": 1}, "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
                "teams": [{"name": "a", "guarantee": {"gpu": 1}}]}
    (tmp_path / "s.json").write_text(json.dumps(scenario))
    rows = "".join(",".join(str(c) for c in r) + "\n" for r in KNOWN)
    (tmp_path / "jobs.csv").write_text("job_id,team,submit_time,duration_s,gpus,priority\n" + rows)
    return ["eta", "--scenario", str(tmp_path / "s.json"), "--trace", str(tmp_path / "jobs.csv"), "--backtest"]


def test_json_has_exactly_the_documented_keys(capsys, case):
    code, out, err = run(capsys, [*case, "--samples", "8", "--seed", "4", "--json", "--workers", "1"])
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"samples", "seed", "jobs", "summary"} and (doc["samples"], doc["seed"]) == (8, 4)
    [job] = doc["jobs"]
    assert set(job) == {"job_id", "team", "submit", "wait_p10_s", "wait_p50_s", "wait_p90_s", "actual_wait_s"}
    assert (job["job_id"], job["wait_p10_s"], job["wait_p90_s"], job["actual_wait_s"]) == ("j", 20, 50, 40)
    s = doc["summary"]
    assert set(s) == {"sampled", "coverage_p10_p90", "mdae_p50_s", "median_actual_wait_s", "no_history",
                      "baseline", "per_team"}
    assert set(s["baseline"]) == {"coverage_p10_p90", "mdae_p50_s"}
    assert set(s["per_team"]["a"]) == {"sampled", "coverage_p10_p90", "mdae_p50_s", "baseline"}
    assert set(s["per_team"]["a"]["baseline"]) == {"coverage_p10_p90", "mdae_p50_s"}


def test_the_same_bytes_whatever_the_workers(capsys, tmp_path):
    import random

    from tests.core.test_eta import random_rows

    scenario = {"capacity": {"gpu": 4}, "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
                "teams": [{"name": "a", "guarantee": {"gpu": 2}}, {"name": "b", "guarantee": {"gpu": 2}}]}
    (tmp_path / "s.json").write_text(json.dumps(scenario))
    rows = random_rows(random.Random(3), 40)
    (tmp_path / "jobs.csv").write_text("job_id,team,submit_time,duration_s,gpus,priority\n"
                                       + "".join(",".join(str(c) for c in r) + "\n" for r in rows))
    argv = ["eta", "--scenario", str(tmp_path / "s.json"), "--trace", str(tmp_path / "jobs.csv"), "--backtest",
            "--samples", "3", "--jobs", "12", "--json"]
    outs = set()
    for workers in ("1", "2"):
        code, out, err = run(capsys, [*argv, "--workers", workers])
        assert code == 0, err
        outs.add(out)
    assert len(outs) == 1
    assert json.loads(outs.pop())["summary"]["sampled"] <= 12


def test_the_table_sets_the_band_beside_the_baseline(capsys, case):
    code, out, err = run(capsys, [*case, "--samples", "4", "--workers", "1"])
    assert code == 0, err
    assert "in p10-p90" in out and "baseline" in out
    overall = next(line for line in out.splitlines() if line.startswith("overall"))
    assert overall.split()[1:3] == ["1", "1.00"]
    # Each team's row has its own baseline beside its band, as the overall row and --json have.
    team = next(line for line in out.splitlines() if line.startswith("a "))
    code, js, _ = run(capsys, [*case, "--samples", "4", "--workers", "1", "--json"])
    b = json.loads(js)["summary"]["per_team"]["a"]["baseline"]
    cells = re.split(r"\s{2,}", team.strip())
    assert cells[1:] == re.split(r"\s{2,}", overall.strip())[1:]  # one team: its figures are the overall ones
    assert cells[4] == f"{b['coverage_p10_p90']:.2f}" == "0.00" and cells[5] == "20 s"


@pytest.mark.parametrize("backend", backends.keys())
def test_config_runs_for_every_backend_simulate_supports(capsys, tmp_path, backend):
    config = "platform.yaml" if backend in ("fairshare", "batch_quota") else f"examples/{backend}.yaml"
    code, _, err = run(capsys, ["trace", "sample", "--config", config, "--backend", backend, "--jobs", "40",
                                "-o", str(tmp_path / "jobs.csv")])
    assert code == 0, err
    code, out, err = run(capsys, ["eta", "--config", config, "--backend", backend, "--trace",
                                  str(tmp_path / "jobs.csv"), "--backtest", "--samples", "2", "--jobs", "3",
                                  "--workers", "1", "--json"])
    assert code == 0, err
    assert json.loads(out)["summary"]["sampled"] + json.loads(out)["summary"]["no_history"] <= 3


@pytest.mark.parametrize("extra, field", [
    (["--jobs", "0"], "--jobs"),
    (["--jobs", "-3"], "--jobs"),
    (["--jobs", "many"], "--jobs"),
    (["--samples", "0"], "--samples"),
    (["--samples", "2.5"], "--samples"),
    (["--samples", "1001"], "--samples: must be a whole number from 1 to 1,000 (got '1001')"),
    (["--seed", "x"], "--seed"),
    (["--workers", "0"], "--workers"),
])
def test_bad_numbers_are_refused_in_one_line(capsys, case, extra, field):
    code, out, err = run(capsys, [*case, *extra])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in err


def test_without_backtest_it_says_what_to_add(capsys, case):
    code, _, err = run(capsys, case[:-1])
    assert code == 2 and "--backtest" in err and len(err.strip().splitlines()) == 1


def test_an_unknown_team_in_the_trace_names_the_row(capsys, case, tmp_path):
    (tmp_path / "jobs.csv").write_text("job_id,team,submit_time,duration_s,gpus\nx1,nobody,0,10,1\n")
    code, _, err = run(capsys, case)
    assert code == 2 and "nobody" in err and len(err.strip().splitlines()) == 1


def test_a_gzip_trace_is_named_as_one_in_one_line(capsys, case, tmp_path):
    import gzip

    trace = tmp_path / "jobs.csv"
    trace.write_bytes(gzip.compress(trace.read_bytes()))
    code, _, err = run(capsys, case)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--trace: is gzip-compressed, not a CSV file" in err and "gunzip -k" in err


def test_ray_and_workers_are_one_choice(capsys, case):
    code, out, err = run(capsys, [*case, "--workers", "2", "--ray", "auto"])
    assert code == 2 and out == "" and "--ray" in err and "--workers" in err and "Traceback" not in err


def _noon_case(tmp_path, header: str = "") -> list[str]:
    from tests.core.test_eta_windows import NOON_ROWS, noon_scenario

    (tmp_path / "noon.json").write_text(json.dumps(noon_scenario()))
    rows = "".join(",".join(str(c) for c in r) + "\n" for r in NOON_ROWS)
    (tmp_path / "noon.csv").write_text(header + "job_id,team,submit_time,duration_s,gpus,priority\n" + rows)
    return ["eta", "--scenario", str(tmp_path / "noon.json"), "--trace", str(tmp_path / "noon.csv"), "--backtest",
            "--samples", "4", "--workers", "1", "--json"]


def test_time_windows_need_an_origin_and_run_with_one(capsys, tmp_path):
    from tests.core.test_eta_windows import NOON

    case = _noon_case(tmp_path)
    code, out, err = run(capsys, case)
    assert code == 2 and out == "" and "Traceback" not in err
    [line] = err.strip().splitlines()
    assert "--origin: is needed" in line
    # b's guarantee rises at noon on Monday: b1 (submitted at 35000) is predicted to start then.
    code, out, err = run(capsys, [*case, "--origin", "2026-01-05T00:00:00"])
    assert code == 0, err
    [job] = json.loads(out)["jobs"]
    assert job["job_id"] == "b1" and job["wait_p50_s"] == job["actual_wait_s"] == NOON - 35000
    # The origin that trace export writes in its header is the default.
    header = "# gpu-share trace export: origin=2026-01-05T00:00:00Z source=test\n"
    code, out, err = run(capsys, _noon_case(tmp_path, header))
    assert code == 0, err
    assert json.loads(out)["jobs"] == [job]
