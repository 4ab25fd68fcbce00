"""`gpu-share status` with time windows: the window in force and when it ends, and per team
whether the deployed quota shares (DescribeQuotaShare) and compute quotas (DescribeComputeQuota)
are that window's, read through real boto3 clients answered by in-memory models; on fair share
the values match by construction, on Kueue status cannot check."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml

from cdk_gpu_share.backends.batch_quota import share_values
from cdk_gpu_share.backends.hyperpod import quota_values
from cdk_gpu_share.cli import main, status_cmd
from cdk_gpu_share.cli.status_windows import FAIRSHARE_NOTE, KUEUE_NOTE, MISMATCH_FIX
from cdk_gpu_share.core.configuration.model import team_in_window
from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.configuration.windows import window_at
from cdk_gpu_share.lambdas.quota_switcher import handler as switcher
from tests.batch_model import BatchModel, Clock
from tests.builders import FAIRSHARE_NIGHT
from tests.quota_model import QUEUE_NAME, ComputeQuotaModel, QuotaQueueModel

CLUSTER = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
CONFIG = {
    "platform": {"name": "gpu-share"},
    "windows": [{"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00", "end": "08:00",
                 "timezone": "Europe/Berlin"}],
    "teams": [
        {"name": "research", "guarantee": {"ml.g5.xlarge": 2, "ml.p4d.24xlarge": 2}, "borrow_limit_percent": 100,
         "windows": {"night": {"guarantee": {"ml.g5.xlarge": 1, "ml.p4d.24xlarge": 1}, "borrow_limit_percent": 50}}},
        {"name": "nightly", "guarantee": {"ml.g5.xlarge": 1, "ml.p4d.24xlarge": 1},
         "windows": {"night": {"guarantee": {"ml.g5.xlarge": 2, "ml.p4d.24xlarge": 2}}}},
    ],
    "batch_quota": {"capacity": {"ml.g5.xlarge": 3}, "queue_name": QUEUE_NAME},
    "hyperpod": {"cluster_arn": CLUSTER, "capacity": {"ml.p4d.24xlarge": 3}},
}
#: Tuesday 2026-01-06 02:00 UTC: the night is open (it closes at 07:00 UTC, 08:00 in Berlin).
NIGHT = datetime(2026, 1, 6, 2, tzinfo=timezone.utc).timestamp()
DAY = datetime(2026, 1, 6, 12, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return path


def deployed_base(config) -> tuple[QuotaQueueModel, ComputeQuotaModel]:
    """The shares and quotas as a deploy leaves them: every team at its own values."""
    shares = QuotaQueueModel(shares={}, clock=Clock())
    quotas = ComputeQuotaModel(quotas={}, cluster_arn=CLUSTER)
    for i, team in enumerate(config.teams):
        if config.batch_quota is not None:
            values = share_values(team, config.batch_quota.capacity)
            shares.shares[team.name] = {c["capacityUnit"]: c["maxCapacity"] for c in values["capacityLimits"]}
            shares.borrow_limits[team.name] = values["resourceSharingConfiguration"].get("borrowLimit", -1)
        qid = f"q{i:011d}"
        quotas.quotas[qid] = quota_values(team, config.hyperpod.capacity)["ComputeQuotaConfig"]
        quotas.versions[qid] = 1
        quotas.teams[qid] = team.name
    return shares, quotas


def status(monkeypatch, capsys, config_path, shares, quotas, now, *extra):
    monkeypatch.setattr(status_cmd, "make_client", lambda region: shares.batch)
    monkeypatch.setattr(status_cmd, "make_sagemaker_client", lambda region: quotas.client)
    monkeypatch.setattr(status_cmd, "_now", lambda: now)
    code = main(["status", "--config", str(config_path), "--region", "us-east-1", *extra])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return out


def test_outside_the_window_the_deployed_base_matches(monkeypatch, capsys, config_path):
    shares, quotas = deployed_base(load_config(config_path))
    report = json.loads(status(monkeypatch, capsys, config_path, shares, quotas, DAY, "--json"))["windows"]
    assert report["window"] == "base"
    assert report["until"] == "2026-01-06T19:00:00+00:00"  # Tuesday 20:00 in Berlin
    assert report["backends"]["batch_quota"]["state"] == "match"
    assert report["backends"]["hyperpod"]["state"] == "match"
    assert "fix" not in report["backends"]["batch_quota"]


def test_in_a_window_the_base_left_deployed_is_named_team_by_team_and_field_by_field(monkeypatch, capsys,
                                                                                    config_path):
    shares, quotas = deployed_base(load_config(config_path))
    report = json.loads(status(monkeypatch, capsys, config_path, shares, quotas, NIGHT, "--json"))["windows"]
    assert (report["window"], report["until"]) == ("night", "2026-01-06T07:00:00+00:00")
    batch = report["backends"]["batch_quota"]
    assert batch["state"] == "mismatch" and batch["fix"] == MISMATCH_FIX
    assert batch["teams"]["research"]["differences"] == [
        {"field": "capacityLimits.ml.g5.xlarge", "deployed": 2, "expected": 1},
        {"field": "resourceSharingConfiguration.borrowLimit", "deployed": 100, "expected": 50}]
    assert batch["teams"]["nightly"]["differences"] == [
        {"field": "capacityLimits.ml.g5.xlarge", "deployed": 1, "expected": 2}]
    hyperpod = report["backends"]["hyperpod"]
    assert hyperpod["teams"]["research"]["differences"] == [
        {"field": "ComputeQuotaResources.ml.p4d.24xlarge.Count", "deployed": 2, "expected": 1},
        {"field": "ResourceSharingConfig.BorrowLimit", "deployed": 100, "expected": 50}]
    assert hyperpod["teams"]["nightly"]["differences"] == [
        {"field": "ComputeQuotaResources.ml.p4d.24xlarge.Count", "deployed": 1, "expected": 2}]
    # Each share and quota read with the Describe call of its API.
    assert [op for op, _ in quotas.requests].count("DescribeComputeQuota") == 2
    assert sum(1 for op, _ in shares.requests if op == "DescribeQuotaShare") == 2


def test_the_table_says_the_window_each_difference_and_what_to_do(monkeypatch, capsys, config_path):
    shares, quotas = deployed_base(load_config(config_path))
    out = status(monkeypatch, capsys, config_path, shares, quotas, NIGHT)
    assert "Window in force: night until Tue 2026-01-06 07:00 UTC" in out
    assert "    nightly: capacityLimits.ml.g5.xlarge deployed 1, expected 2" in out
    assert "    research: ResourceSharingConfig.BorrowLimit deployed 100, expected 50" in out
    assert out.count("    fix: the quota window switcher has not applied the window in force") == 2


def test_once_the_switcher_has_run_every_team_matches(monkeypatch, capsys, config_path):
    config = load_config(config_path)
    shares, quotas = deployed_base(config)
    ids = {team: qid for qid, team in quotas.teams.items()}
    targets = []
    for team in config.teams:
        night = team_in_window(team, "night")
        targets.append(switcher.Target("batch", team.name, shares.share_arn(team.name),
                                       share_values(team, config.batch_quota.capacity),
                                       {"night": share_values(night, config.batch_quota.capacity)}))
        targets.append(switcher.Target("hyperpod", team.name, ids[team.name],
                                       quota_values(team, config.hyperpod.capacity),
                                       {"night": quota_values(night, config.hyperpod.capacity)}))
    at = datetime.fromtimestamp(NIGHT, timezone.utc)
    clients = {"batch": shares.batch, "hyperpod": quotas.client}
    switcher.switch(targets, window_at(config.windows, at), clients.__getitem__, now=at)
    capsys.readouterr()  # the switcher's log lines
    report = json.loads(status(monkeypatch, capsys, config_path, shares, quotas, NIGHT, "--json"))["windows"]
    assert report["backends"]["batch_quota"]["state"] == "match"
    assert report["backends"]["hyperpod"]["state"] == "match"
    out = status(monkeypatch, capsys, config_path, shares, quotas, NIGHT)
    assert "    nightly: match" in out and "fix:" not in out


def test_a_team_without_its_share_is_a_mismatch(monkeypatch, capsys, config_path):
    shares, quotas = deployed_base(load_config(config_path))
    del shares.shares["nightly"]
    report = json.loads(status(monkeypatch, capsys, config_path, shares, quotas, DAY, "--json"))["windows"]
    assert report["backends"]["batch_quota"]["teams"]["nightly"]["differences"] == [
        {"field": "quota share", "deployed": None, "expected": "nightly"}]


def test_a_backend_that_cannot_be_read_is_one_line_and_the_rest_stands(monkeypatch, capsys, config_path):
    shares, quotas = deployed_base(load_config(config_path))
    quotas.script["ListComputeQuotas"] = ["error"] * 3
    report = json.loads(status(monkeypatch, capsys, config_path, shares, quotas, DAY, "--json"))["windows"]
    assert report["backends"]["hyperpod"]["state"] == "unread"
    assert report["backends"]["hyperpod"]["note"].startswith("could not be read: ClientError")
    assert report["backends"]["batch_quota"]["state"] == "match"




def test_on_fair_share_the_values_match_by_construction_and_the_next_cycle_is_the_windows(
        monkeypatch, capsys, tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(FAIRSHARE_NIGHT)
    model = BatchModel(clock=Clock(t=NIGHT))
    model.add_job("research", "RUNNING", started=NIGHT - 7200)
    newest = model.add_job("research", "RUNNING", started=NIGHT - 5400)["jobId"]
    model.add_job("nightly", "RUNNING", started=NIGHT - 9000)
    model.add_job("nightly", "RUNNABLE", created=NIGHT - 600)
    monkeypatch.setattr(status_cmd, "make_client", lambda region: model.batch)
    monkeypatch.setattr(status_cmd, "_now", lambda: NIGHT)
    assert main(["status", "--config", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["windows"]["backends"] == {"fairshare": {"state": "by_construction", "note": FAIRSHARE_NOTE}}
    # What the reclaim Lambda's next cycle would do, with the night's guarantees.
    assert report["teams"]["nightly"]["guarantee"] == {"gpu": 2}
    assert report["teams"]["research"]["next_cycle"]["stop"] == [newest]
    assert main(["status", "--config", str(path)]) == 0
    assert f"  fairshare: {FAIRSHARE_NOTE}" in capsys.readouterr().out


def test_on_kueue_status_says_what_it_cannot_check(monkeypatch, capsys, tmp_path):
    raw = yaml.safe_load(FAIRSHARE_NIGHT)
    raw["kueue"] = {"eks_cluster_name": "gpu-eks", "capacity": {"p4d.24xlarge": 2}}
    for team in raw["teams"]:
        team["guarantee"]["p4d.24xlarge"] = 1
        team["windows"]["night"]["guarantee"]["p4d.24xlarge"] = 1
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    model = BatchModel(clock=Clock(t=DAY))
    monkeypatch.setattr(status_cmd, "make_client", lambda region: model.batch)
    monkeypatch.setattr(status_cmd, "_now", lambda: DAY)
    assert main(["status", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"  kueue: {KUEUE_NOTE}" in out and out.count("\n  kueue:") == 1


def test_without_a_batch_queue_status_prints_the_windows_alone(monkeypatch, capsys, tmp_path):
    raw = {**CONFIG, "teams": [{**t, "guarantee": {"ml.p4d.24xlarge": t["guarantee"]["ml.p4d.24xlarge"]},
                                "windows": {"night": {**t["windows"]["night"], "guarantee": {
                                    "ml.p4d.24xlarge": t["windows"]["night"]["guarantee"]["ml.p4d.24xlarge"]}}}}
                               for t in CONFIG["teams"]]}
    del raw["batch_quota"]
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    _, quotas = deployed_base(load_config(path))
    monkeypatch.setattr(status_cmd, "make_sagemaker_client", lambda region: quotas.client)
    monkeypatch.setattr(status_cmd, "_now", lambda: NIGHT)
    assert main(["status", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Window in force: night until Tue 2026-01-06 07:00 UTC\n  hyperpod: some teams'")
    assert "    nightly: ComputeQuotaResources.ml.p4d.24xlarge.Count deployed 1, expected 2" in out


def test_why_a_job_waits_counts_its_wait_from_the_rise_of_its_teams_guarantee(monkeypatch, capsys, tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(FAIRSHARE_NIGHT)
    rise = datetime(2026, 1, 5, 19, tzinfo=timezone.utc).timestamp()  # Monday 20:00 in Berlin
    model = BatchModel(clock=Clock(t=rise + 30))
    model.add_job("research", "RUNNING", started=rise - 7200)
    model.add_job("research", "RUNNING", started=rise - 5400)
    model.add_job("nightly", "RUNNING", started=rise - 9000)
    job = model.add_job("nightly", "RUNNABLE", created=rise - 3600)["jobId"]  # an hour before the rise
    monkeypatch.setattr(status_cmd, "make_client", lambda region: model.batch)
    monkeypatch.setattr(status_cmd, "_now", lambda: rise + 30)
    assert main(["status", "--config", str(path), "--job", job, "--json"]) == 0
    reasons = json.loads(capsys.readouterr().out)["reasons"]
    # 30 s of the 60 it must wait after the rise are left, then the next cycle (every 60 s).
    assert [r["code"] for r in reasons] == ["lent_out"]
    assert "within about 90 s" in reasons[0]["text"]


def test_with_groups_the_values_checked_are_the_trees_compilation_in_force(monkeypatch, capsys, tmp_path):
    import copy

    from cdk_gpu_share.core.policy.organisation import compile_flat

    raw = copy.deepcopy(CONFIG)
    raw["groups"] = [{"name": "ml", "guarantee": {"ml.g5.xlarge": 1, "ml.p4d.24xlarge": 1}}]
    for team in raw["teams"]:
        team["group"] = "ml"
    raw["batch_quota"]["capacity"] = {"ml.g5.xlarge": 4}
    raw["hyperpod"]["capacity"] = {"ml.p4d.24xlarge": 4}
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = load_config(path)
    # A deploy leaves each share and quota at the base's compilation (the pool in some team's share).
    shares, _ = deployed_base(compile_flat(config, "batch_quota").config)
    _, quotas = deployed_base(compile_flat(config, "hyperpod").config)
    report = json.loads(status(monkeypatch, capsys, path, shares, quotas, DAY, "--json"))["windows"]
    assert report["backends"]["batch_quota"]["state"] == "match"
    assert report["backends"]["hyperpod"]["state"] == "match"
    # At night nightly's compiled share holds the pool too (research's cap, 50 % of 1, takes none).
    report = json.loads(status(monkeypatch, capsys, path, shares, quotas, NIGHT, "--json"))["windows"]
    assert {"field": "capacityLimits.ml.g5.xlarge", "deployed": 1, "expected": 3} in \
        report["backends"]["batch_quota"]["teams"]["nightly"]["differences"]
