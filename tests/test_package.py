"""The installed package: build a wheel, install it in a fresh virtual environment,
and synthesize a tiny user app that imports SharedGpuQuota from cdk_gpu_share."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

USER_APP = '''
import aws_cdk as cdk
from cdk_gpu_share import SharedGpuQuota
from cdk_gpu_share.core.config import Amount, BatchQuotaConfig, TeamConfig

app = cdk.App()
stack = cdk.Stack(app, "UserStack")
SharedGpuQuota(
    stack,
    "Quota",
    batch_quota=BatchQuotaConfig(capacity={"ml.g5.xlarge": 2}),
    teams=[
        TeamConfig(name="alpha", guarantee={"ml.g5.xlarge": Amount(instances=1)}),
        TeamConfig(name="beta", guarantee={"ml.g5.xlarge": Amount(instances=1)}),
    ],
)
app.synth()
import cdk_gpu_share
print("IMPORTED_FROM", cdk_gpu_share.__file__)
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Build from a copy: building in the checkout leaves build/ and *.egg-info there, a stale
    # build/lib can put deleted modules into the wheel, and two xdist workers would race on it.
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (whl,) = out.glob("cdk_gpu_share-*.whl")
    return whl


def test_wheel_ships_the_typed_marker_and_lambda_code(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "cdk_gpu_share/py.typed" in names
    assert any(n.startswith("cdk_gpu_share/lambdas/") and n.endswith(".py") for n in names)
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)
    meta = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpu-share = cdk_gpu_share.cli:main" in zipfile.ZipFile(wheel).read(meta).decode()


def test_installed_wheel_synthesizes_a_user_app(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # The wheel alone, without its dependencies: those come from this test run's environment
    # through a .pth file, so the test needs no network and never sees the source tree.
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], check=True, timeout=300)
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    app = tmp_path / "app.py"
    app.write_text(USER_APP)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CDK_OUTDIR"] = str(tmp_path / "cdk.out")
    result = subprocess.run([py, str(app)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "IMPORTED_FROM " + str(Path(site) / "cdk_gpu_share") in result.stdout
    template = json.loads((tmp_path / "cdk.out" / "UserStack.template.json").read_text())
    types = [r["Type"] for r in template["Resources"].values()]
    assert types.count("AWS::Batch::QuotaShare") == 2
    assert types.count("AWS::Batch::JobQueue") == 1


def test_installed_wheel_provides_the_cli(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], check=True)
    site = subprocess.run(
        [env_dir / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    result = subprocess.run(
        [env_dir / "bin" / "gpu-share", "validate", str(ROOT / "platform.yaml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout
