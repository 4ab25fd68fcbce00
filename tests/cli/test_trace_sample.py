"""`gpu-share trace sample`: a fresh clone tries the simulator without external data; and
examples/state.json, the example input of `gpu-share reclaim plan`."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import shlex

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.cli.init_cmd import init_project
from cdk_gpu_share.core import scenario as sc
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.records import trace
from tests.helpers import ROOT

#: sha256 of `gpu-share trace sample` with the defaults. A change here changes every sample
#: run in the documentation: change it on purpose only.
DEFAULT_SHA256 = "077c9136ff4a9eec2bf6833430a341abdef58e8c250cb9a21c80ed55aee4a406"


@pytest.fixture(autouse=True)
def _in_an_empty_folder(tmp_path, monkeypatch):
    """Without --config, trace sample reads ./platform.yaml: each case starts where there is none."""
    monkeypatch.chdir(tmp_path)


def _sample(capsys, *argv: str) -> str:
    assert main(["trace", "sample", *argv]) == 0
    return capsys.readouterr().out


def _scenario(path=ROOT / "platform.yaml", backend="fairshare"):
    return sim.parse_scenario(sc.scenario_from_config(load_config(path), backend))


def test_the_default_sample_is_the_same_bytes_every_run(capsys, tmp_path):
    first = _sample(capsys)
    assert _sample(capsys) == first
    assert hashlib.sha256(first.encode()).hexdigest() == DEFAULT_SHA256
    out = tmp_path / "jobs.csv"
    assert main(["trace", "sample", "-o", str(out)]) == 0
    assert out.read_bytes() == first.encode()
    err = capsys.readouterr().err
    assert f"wrote 300 jobs to {out}" in err
    assert "these jobs belong to the sample teams team-a, team-b, team-c" in err


def test_the_sample_is_a_trace_of_the_teams_of_platform_yaml(capsys):
    text = _sample(capsys)
    assert text.splitlines()[0] == ",".join(trace.TRACE_COLUMNS)
    for backend in ("batch_quota", "fairshare"):
        jobs = sim.parse_jobs(io.StringIO(text), _scenario(backend=backend))
        assert len(jobs) == 300
    assert {j.team for j in jobs} == {"team-a", "team-b", "team-c"}
    assert {j.gpus for j in jobs} == {1.0}  # whole GPUs of an ml.g5.xlarge, up to the guarantee
    assert min(j.duration_s for j in jobs) >= 300 and max(j.duration_s for j in jobs) <= 8 * 3600
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)
    assert len({j.id for j in jobs}) == 300


def test_seed_jobs_and_config_change_the_sample(capsys):
    default = _sample(capsys)
    assert _sample(capsys, "--seed", "2") != default
    rows = list(csv.reader(io.StringIO(_sample(capsys, "--jobs", "40"))))
    assert len(rows) == 41
    openb = ROOT / "examples" / "alibaba-openb.yaml"
    text = _sample(capsys, "--config", str(openb))
    assert _sample(capsys, str(openb)) == text  # the config positional or as --config
    jobs = sim.parse_jobs(io.StringIO(text), _scenario(openb))
    assert {j.team for j in jobs} == {"ls", "burstable", "be", "guaranteed"}
    guarantees = {"ls": 16, "burstable": 8, "be": 4, "guaranteed": 4}
    assert all(j.gpus <= guarantees[j.team] for j in jobs)


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "0"], "--jobs: must be 1 to 1,000,000"),
    (["--backend", "fairshare"], "--backend: needs a config"),
    (["--config", str(ROOT / "platform.yaml")], "add --backend batch_quota"),
])
def test_bad_arguments_exit_2(capsys, argv, message):
    assert main(["trace", "sample", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err and err.count("\n") == 1


def test_simulate_compare_on_the_sample_shows_what_sharing_and_reclaim_change(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    jobs = tmp_path / "jobs.csv"
    assert main(["trace", "sample", "-o", str(jobs)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--config", "platform.yaml", "--backend", "fairshare", "--trace", str(jobs),
                 "--compare", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    static, share, reclaim = results["static"], results["share"], results["share+reclaim"]
    assert all(r["completed"] == r["jobs"] == 300 for r in (static, share, reclaim))
    # Sharing: teams borrow, and the pool's queue shrinks against static partitions.
    assert static["wait_gpu_hours"] > 5 * share["wait_gpu_hours"]
    assert all(t["borrowed_gpu_seconds"] > 0 for t in share["teams"].values())
    # Reclaim: preemptions give every lender its guarantee back within a few polls,
    # where without them it waits for the borrower's job to end.
    assert static["preemptions"] == share["preemptions"] == 0 < reclaim["preemptions"]
    for name in ("team-a", "team-b", "team-c"):
        assert reclaim["teams"][name]["reclaim_wait_p99_s"] <= 180
        assert share["teams"][name]["reclaim_wait_p99_s"] > 600


def test_the_positional_config_runs_simulate_too(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(trace.trace_text(trace.sample_jobs(jobs=30)))
    assert main(["simulate", "platform.yaml", "--backend", "batch_quota", "--trace", str(jobs),
                 "--mode", "share", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["completed"] == 30


def test_example_state_plans_a_reclaim_for_the_lender(capsys):
    assert main(["reclaim", "plan", str(ROOT / "examples" / "state.json")]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["preemptions"] == [
        {"job": "b-sweep-1", "team": "team-b", "reason": "reclaim", "beneficiary": "a-finetune"}]
    assert plan["served"] == ["a-finetune"]
    assert plan["waiting"] == ["b-sweep-2"]


def test_outside_a_clone_the_hint_names_the_sample_teams_and_gpu_share_init(capsys, tmp_path, monkeypatch):
    """A pip user has no platform.yaml with the sample's teams: the hint says where a config comes from."""
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "sample", "-o", "jobs.csv"]) == 0
    err = capsys.readouterr().err
    assert "gpu-share simulate --config platform.yaml" not in err
    assert ("these jobs belong to the sample teams team-a, team-b, team-c; for your own teams: gpu-share init, "
            "then gpu-share trace sample --config platform.yaml -o jobs.csv") in err


def _hint(err: str) -> list[str]:
    (line,) = [line for line in err.splitlines() if line.startswith("try: ")]
    return shlex.split(line.removeprefix("try: "))


def test_in_an_init_folder_the_sample_is_of_its_teams_and_the_printed_hint_runs(capsys, tmp_path):
    init_project(tmp_path)  # batch_quota: team-a and team-b
    assert main(["trace", "sample", "-o", "jobs.csv"]) == 0
    err = capsys.readouterr().err
    argv = _hint(err)
    assert argv[:6] == ["gpu-share", "simulate", "--config", "platform.yaml", "--trace", "jobs.csv"]
    assert "--backend" not in argv  # the config's only backend
    assert {row["team"] for row in csv.DictReader((tmp_path / "jobs.csv").open())} == {"team-a", "team-b"}
    assert main(argv[1:]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "team team-a" in out and "team team-b" in out
    assert ("--report" in argv) == (tmp_path / "report.html").exists()


def test_a_folder_config_of_several_backends_samples_the_first_and_names_it(capsys, tmp_path):
    (tmp_path / "platform.yaml").write_text((ROOT / "platform.yaml").read_text())
    assert main(["trace", "sample", "-o", "jobs.csv", "--jobs", "20"]) == 0
    argv = _hint(capsys.readouterr().err)
    assert argv[:8] == ["gpu-share", "simulate", "--config", "platform.yaml", "--backend", "batch_quota",
                        "--trace", "jobs.csv"]
    assert main(["trace", "sample", "-o", "jobs.csv", "--jobs", "20", "--backend", "fairshare"]) == 0
    assert _hint(capsys.readouterr().err)[4:6] == ["--backend", "fairshare"]


def test_the_hint_offers_the_report_only_with_matplotlib(capsys, tmp_path, monkeypatch):
    init_project(tmp_path)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else True)
    assert main(["trace", "sample", "-o", "jobs.csv", "--jobs", "20"]) == 0
    argv = _hint(capsys.readouterr().err)
    assert "--report" not in argv and argv[-1] == "--compare"


def _hyperpod(tmp_path, instance_type: str):
    """The HyperPod starter config with its teams guaranteed one accelerator each of ``instance_type``."""
    import yaml

    data = yaml.safe_load((ROOT / "src" / "cdk_gpu_share" / "cli" / "init_templates" / "platform-hyperpod.yaml").read_text())
    for team in data["teams"]:
        team["guarantee"] = {instance_type: {"accelerators": 1}}
        team.pop("borrow_limit_percent", None)
    data["hyperpod"]["capacity"] = {instance_type: 1}
    path = tmp_path / f"hyperpod-{instance_type}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _sizes(capsys, *argv: str) -> tuple[set[float], str]:
    assert main(["trace", "sample", "--jobs", "60", *argv]) == 0
    out, err = capsys.readouterr()
    return {float(row["gpus"]) for row in csv.DictReader(io.StringIO(out))}, err


def test_a_fleet_that_cannot_partition_its_gpus_gets_jobs_of_whole_gpus(capsys, tmp_path):
    init_project(tmp_path / "starter")  # batch_quota on ml.g5.xlarge: one GPU per instance
    sizes, err = _sizes(capsys, "--config", str(tmp_path / "starter" / "platform.yaml"))
    assert sizes == {1.0}
    assert "jobs of whole GPUs: batch_quota does not partition the GPUs of ml.g5.xlarge" in err
    sizes, err = _sizes(capsys, "--config", str(_hyperpod(tmp_path, "ml.g5.12xlarge")))
    assert sizes == {1.0} and "jobs of whole GPUs: ml.g5.12xlarge has no MIG-capable GPU" in err
    sizes, err = _sizes(capsys)
    assert sizes == {1.0} and "jobs of whole GPUs" in err


def test_hyperpod_on_mig_capable_gpus_gets_jobs_of_parts_of_a_gpu(capsys, tmp_path):
    sizes, err = _sizes(capsys, "--config", str(_hyperpod(tmp_path, "ml.p5.48xlarge")))
    assert sizes == {0.25, 0.5, 1.0}
    assert "jobs in quarters of a GPU: hyperpod partitions the GPUs of ml.p5.48xlarge with MIG" in err
