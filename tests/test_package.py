"""The installed package: build a wheel, install it in a fresh virtual environment,
and synthesize a tiny user app that imports SharedGpuQuota from cdk_gpu_share."""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

#: sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the canonical text.
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

USER_APP = '''
import aws_cdk as cdk
from cdk_gpu_share import SharedGpuQuota
from cdk_gpu_share.core.configuration.parse import Amount, BatchQuotaConfig, TeamConfig

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
def built(tmp_path_factory) -> tuple[Path, str]:
    """The wheel, and what the build printed (standard output and error)."""
    out = tmp_path_factory.mktemp("dist")
    # Build from a copy: building in the checkout leaves build/ and *.egg-info there, a stale
    # build/lib can put deleted modules into the wheel, and two xdist workers would race on it.
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    (whl,) = out.glob("cdk_gpu_share-*.whl")
    return whl, result.stdout + result.stderr


@pytest.fixture(scope="module")
def wheel(built) -> Path:
    return built[0]


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as whl:
        name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(whl.read(name).decode())


def test_the_build_prints_no_deprecation_warning(built):
    _, output = built
    for word in ("Deprecat", "deprecat", "BuildBackendWarning", "SetuptoolsWarning"):
        assert word not in output, output[-3000:]


def test_wheel_metadata_names_the_license_classifiers_and_project_urls(wheel):
    meta = _metadata(wheel)
    assert meta["Name"] == "cdk-gpu-share"
    assert meta["Version"] == "0.1.0"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License"] is None  # the expression replaces the free-text field
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Author"] == "cdk-gpu-share maintainers"
    assert "aws-cdk" in meta["Keywords"].split(",")
    classifiers = meta.get_all("Classifier")
    for expected in (
        "Framework :: AWS CDK :: 2",
        "Typing :: Typed",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.13",
    ):
        assert expected in classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert any(c.startswith("Topic :: ") for c in classifiers)
    assert any(c.startswith("Intended Audience :: ") for c in classifiers)
    # PEP 639: a license expression and a License :: classifier may not be combined.
    assert not any(c.startswith("License :: ") for c in classifiers)
    repo = "https://github.com/cdk-gpu-share/cdk-gpu-share"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Repository", "Issues", "Documentation", "Changelog"}
    assert urls["Repository"] == urls["Homepage"] == repo
    assert urls["Issues"] == f"{repo}/issues"
    assert urls["Changelog"] == f"{repo}/blob/main/CHANGELOG.md"
    assert urls["Documentation"].startswith("https://")
    requires = meta.get_all("Requires-Dist")
    runtime = [r for r in requires if "extra ==" not in r]
    assert sorted(r.split("<")[0].split(">")[0].lower() for r in runtime) == [
        "aws-cdk-lib", "boto3", "cdk-nag", "constructs", "pyyaml", "ruamel.yaml", "tzdata"]


def test_the_long_description_is_the_readme_as_it_is(wheel):
    """What the package index shows is README.md unchanged (so tests/test_long_description.py,
    which reads README.md, checks what ships)."""
    meta = _metadata(wheel)
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().strip() == (ROOT / "README.md").read_text().strip()


def test_wheel_ships_the_full_apache_license(wheel):
    with zipfile.ZipFile(wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        text = whl.read(name).decode()
    assert text == (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert hashlib.sha256(text.encode()).hexdigest() == APACHE_2_0_SHA256


def test_wheel_ships_the_typed_marker_and_lambda_code(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "cdk_gpu_share/py.typed" in names
    assert any(n.startswith("cdk_gpu_share/lambdas/") and n.endswith(".py") for n in names)
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)
    meta = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpu-share = cdk_gpu_share.cli:main" in zipfile.ZipFile(wheel).read(meta).decode()


def test_wheel_ships_every_example_init_writes(wheel):
    from cdk_gpu_share.cli.init_cmd import EXAMPLES

    names = set(zipfile.ZipFile(wheel).namelist())
    for file, _ in EXAMPLES.values():
        assert f"cdk_gpu_share/examples/{file}" in names, file


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
    version = subprocess.run([env_dir / "bin" / "gpu-share", "--version"], capture_output=True, text=True)
    assert version.stdout == "gpu-share 0.1.0\n"  # from the installed wheel's metadata
    # init's templates are package data: a starter project from the wheel alone, which validates
    project = tmp_path / "project"
    wheel_only = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([env_dir / "bin" / "gpu-share", "init", "--backend", "kueue", str(project)],
                            capture_output=True, text=True, env=wheel_only)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in project.iterdir()) == [".gitignore", "app.py", "cdk.json", "platform.yaml"]
    result = subprocess.run([env_dir / "bin" / "gpu-share", "validate", "platform.yaml"], cwd=project,
                            capture_output=True, text=True, env=wheel_only)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def wheel_bin(wheel, tmp_path_factory) -> Path:
    """The bin folder of a fresh virtual environment holding the wheel alone (its dependencies come
    from this test run's environment through a .pth file: no network, never the source tree)."""
    env_dir = tmp_path_factory.mktemp("wheel-venv")
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], check=True, timeout=300)
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir / "bin"


def _wheel_env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def _readme_quick_start() -> list[str]:
    """The commands of the README's pip quick start, in order."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("## Quick start with pip"):]
    block = block[block.index("```sh\n") + len("```sh\n"):]
    return block[:block.index("```")].strip().splitlines()


def test_the_readme_quick_start_runs_from_the_wheel_in_an_empty_folder(wheel_bin, tmp_path):
    """Every command of the quick start, as printed, in an empty folder, with the installed wheel only."""
    commands = _readme_quick_start()
    assert commands[0].startswith("pip install ")  # what the test has done already: a test installs nothing
    script = "\n".join(["set -euo pipefail", *commands[1:]])
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_wheel_env(wheel_bin), capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    folder = tmp_path / "my-gpus"
    for name in ("platform.yaml", "app.py", "jobs.csv", "report.html", "advised.yaml"):
        assert (folder / name).is_file(), name
    assert "next: who submits for each team: set assumed_by" in result.stderr


#: A model for `mig fit`, with nothing but what estimates its memory (no price anywhere).
MODELS = """models:
  - name: llama3-8b
    copies: 2
    params_billion: 8.03
    weight_dtype: bf16
    layers: 32
    kv_heads: 8
    head_dim: 128
    kv_dtype: bf16
    context_tokens: 8192
    concurrent_sequences: 4
"""


def test_a_newcomer_goes_from_the_wheel_to_a_first_answer_with_no_stumble(wheel_bin, tmp_path):
    """init, validate, plan, trace sample, the simulate command it prints, advise with objectives and -o,
    mig fit on a type without a price: each answers (exit 0), none with a traceback, and none needs a
    file the wheel does not ship."""
    env = _wheel_env(wheel_bin)

    def run(*argv: str) -> subprocess.CompletedProcess:
        result = subprocess.run(list(argv), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, f"{' '.join(argv)}:\n{(result.stdout + result.stderr)[-3000:]}"
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        return result

    assert "next: gpu-share validate platform.yaml" in run("gpu-share", "init").stdout
    assert "valid" in run("gpu-share", "validate", "platform.yaml").stdout
    plan = run("gpu-share", "plan", "platform.yaml")
    assert [line for line in plan.stderr.splitlines() if line.strip()] == [
        line for line in plan.stderr.splitlines() if line.startswith("next: who submits for each team")]
    sample = run("gpu-share", "trace", "sample", "-o", "jobs.csv")
    (hint,) = [line.removeprefix("try: ") for line in sample.stderr.splitlines() if line.startswith("try: ")]
    simulated = run(*shlex.split(hint))
    assert "team team-a" in simulated.stdout and "team team-b" in simulated.stdout
    # The user gives a team its objectives, then asks for the configuration that meets them.
    config = tmp_path / "platform.yaml"
    text = config.read_text()
    # 8 hours: the sample of whole GPUs keeps team-a's p95 above 5 hours on the starter's 2 GPUs
    # whatever the split, so a tighter target would (rightly) exit 1 with the closest advice.
    config.write_text(text.replace("    description: Research\n",
                                   "    description: Research\n    objectives: {wait_p95_minutes: 480}\n", 1))
    advised = run("gpu-share", "advise", "platform.yaml", "--trace", "jobs.csv", "-o", "advised.yaml")
    assert "advice written to advised.yaml" in advised.stdout + advised.stderr
    run("gpu-share", "validate", "advised.yaml")
    (tmp_path / "models.yaml").write_text(MODELS)
    fit = run("gpu-share", "mig", "fit", "models.yaml", "--instance-type", "ml.p5.48xlarge")
    assert "ml.p5.48xlarge" in fit.stdout and "unpriced" in fit.stdout
