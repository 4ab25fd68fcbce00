"""`make synth` installs the runtime dependencies only: no module of the package, and
nothing `make synth` runs (app.py, `gpu-share summary`), may import a package that only
the dev extra installs. matplotlib (the `plot` extra) is imported inside the functions
that draw, never at import time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

#: Import names of distributions whose import name differs from their normalized name.
IMPORT_NAMES = {"pytest-xdist": ["xdist"], "cfn-lint": ["cfnlint"], "pyyaml": ["yaml"]}


def _dist(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement.strip()).group(0).lower().replace("_", "-")


def _imports(dist: str) -> list[str]:
    return IMPORT_NAMES.get(dist, [dist.replace("-", "_").replace(".", "_")])


def dev_only_modules() -> list[str]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_dist(r) for r in project["dependencies"]}
    dev = {_dist(r) for r in project["optional-dependencies"]["dev"]} - runtime
    return sorted({name for d in dev for name in _imports(d)})


BLOCKER = '''
import sys

BLOCKED = set({blocked!r})


class DevOnly:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}} is installed by the dev extra only", name=name)
        return None


sys.meta_path.insert(0, DevOnly())
for name in list(sys.modules):
    if name.partition(".")[0] in BLOCKED:
        del sys.modules[name]
'''


def _run(blocked: list[str], body: str, *args: str) -> subprocess.CompletedProcess:
    code = BLOCKER.format(blocked=blocked) + textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_dev_extra_is_known():
    blocked = dev_only_modules()
    assert {"pytest", "hypothesis", "moto", "cfnlint", "matplotlib", "mutmut", "jsonschema"} <= set(blocked)
    assert not {"aws_cdk", "constructs", "cdk_nag", "boto3", "yaml"} & set(blocked)


@pytest.mark.slow
def test_every_module_imports_without_the_dev_extra():
    result = _run(dev_only_modules(), """
        import importlib, pkgutil
        try:
            import hypothesis  # the blocker works
        except ModuleNotFoundError:
            pass
        else:
            sys.exit("hypothesis was imported")
        import cdk_gpu_share
        for info in pkgutil.walk_packages(cdk_gpu_share.__path__, "cdk_gpu_share."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
        print("imported", "aws_cdk" in sys.modules, "cdk_gpu_share.backends.fairshare.construct" in sys.modules)
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "imported True True" in result.stdout


def test_summary_runs_without_the_dev_extra(tmp_path):
    template = {"Resources": {"Q": {"Type": "AWS::Batch::QuotaShare", "Properties": {
        "QuotaShareName": "team-a", "CapacityLimits": [{"MaxCapacity": 1, "CapacityUnit": "ml.g5.xlarge"}],
        "ResourceSharingConfiguration": {"Strategy": "LEND_AND_BORROW", "BorrowLimit": -1}}}}}
    (tmp_path / "S.template.json").write_text(json.dumps(template))
    (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": {"S": {
        "type": "aws:cloudformation:stack", "properties": {"templateFile": "S.template.json"}}}}))
    result = _run(dev_only_modules(), """
        from cdk_gpu_share.cli import main
        sys.exit(main(["summary", sys.argv[1]]))
    """, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "team-a: Batch quota share, 1 instance of ml.g5.xlarge" in result.stdout
