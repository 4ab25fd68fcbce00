"""Every command that reads AWS takes its region as the AWS SDKs do: ``--region``, then
``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the AWS configuration; with none, one line
naming both variables."""

from __future__ import annotations

import pytest
import yaml
from botocore.exceptions import NoCredentialsError, NoRegionError

from cdk_gpu_share.cli import main, status_cmd, trace_export_cmd, usage_cmd
from cdk_gpu_share.cli._region import resolve_region

G5 = "ml.g5.12xlarge"


@pytest.fixture
def empty_aws(monkeypatch, tmp_path):
    """No region, profile or credentials anywhere: only what a case sets."""
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump({
        "platform": {"name": "gpu-share"},
        "teams": [{"name": "team-a", "guarantee": {G5: 1}}],
        "batch_quota": {"capacity": {G5: 1}}}))
    return str(path)


def _commands(config: str) -> dict[str, list[str]]:
    return {
        "status": ["status", "--queue", "gpu-share-training"],
        "usage": ["usage", config, "--from", "2027-01-19", "--to", "2027-01-20"],
        "trace export": ["trace", "export", config, "--from", "2026-11-02", "--to", "2026-11-03", "--source", "batch"],
    }


@pytest.fixture
def regions(monkeypatch):
    """The region each command builds its client for; as boto3's, the client then finds no region
    (None) or no credentials."""
    seen: list[str | None] = []

    def make(*args):
        seen.append(args[-1])
        raise NoRegionError() if args[-1] is None else NoCredentialsError()

    monkeypatch.setattr(status_cmd, "make_client", make)
    monkeypatch.setattr(usage_cmd, "make_client", make)
    monkeypatch.setattr(usage_cmd, "_now", lambda: 1_800_000_000.0 + 6 * 86400)  # 2027-01-21, after --to
    monkeypatch.setattr(trace_export_cmd, "make_client", make)
    return seen


@pytest.mark.parametrize("command", ["status", "usage", "trace export"])
@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_each_region_variable_is_honoured(command, variable, empty_aws, config, regions, monkeypatch, capsys):
    monkeypatch.setenv(variable, "eu-north-1")
    assert main(_commands(config)[command]) == 2
    err = capsys.readouterr().err.strip()
    assert regions == ["eu-north-1"]
    assert "no AWS credentials" in err and "in region eu-north-1" in err and "\n" not in err


@pytest.mark.parametrize("command", ["status", "usage", "trace export"])
def test_no_region_names_both_variables(command, empty_aws, config, regions, capsys):
    assert main(_commands(config)[command]) == 2
    err = capsys.readouterr().err.strip()
    assert regions in ([], [None]) and "\n" not in err
    assert "no AWS region to read" in err
    assert err.endswith("pass --region (such as --region us-east-1) or set AWS_REGION or AWS_DEFAULT_REGION")


def test_aws_region_comes_before_aws_default_region_and_region_before_both(empty_aws, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert resolve_region() == "eu-west-1"
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    assert resolve_region() == "us-west-2"
    assert resolve_region("ap-south-1") == "ap-south-1"


def test_the_profile_region_is_the_last_resort(empty_aws, tmp_path, monkeypatch):
    (tmp_path / "aws-config").write_text("[default]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    assert resolve_region() == "sa-east-1"
