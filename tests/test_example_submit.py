"""examples/submit_training_job.py: its usage names every required argument; a missing region or
missing credentials end with one clear line (real boto3 client, no AWS account)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "submit_training_job.py"


def load():
    spec = importlib.util.spec_from_file_location("submit_training_job", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_usage_names_every_required_argument():
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    usage = result.stderr.splitlines()[0]
    for flag in ("--team", "--source-dir", "--image-uri"):
        assert flag in usage, usage
    assert "the following arguments are required: --team, --source-dir, --image-uri" in result.stderr


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_missing_region_is_one_line(no_aws):
    module = load()
    with pytest.raises(module.SetupError, match=r"^no AWS region: pass --region"):
        module.stack_outputs("gpu-share-team-team-a", None)


def test_missing_credentials_is_one_line(no_aws):
    module = load()
    with pytest.raises(module.SetupError, match=r"^no AWS credentials"):
        module.stack_outputs("gpu-share-team-team-a", "us-east-1")


def test_missing_stack_names_the_stack(monkeypatch):
    import boto3
    from botocore.stub import Stubber

    module = load()
    client = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    stub.add_client_error("describe_stacks", service_error_code="ValidationError",
                          service_message="Stack with id gpu-share-team-x does not exist",
                          expected_params={"StackName": "gpu-share-team-x"})
    stub.activate()
    monkeypatch.setattr(boto3, "client", lambda *a, **k: client)
    with pytest.raises(module.SetupError, match=r"stack gpu-share-team-x does not exist in us-east-1"):
        module.stack_outputs("gpu-share-team-x", "us-east-1")
