"""``gpu-share mig check`` and ``gpu-share mig layouts``: exit codes and output formats."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.catalog import mig


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- check


def test_check_fits_exits_0_with_one_placement_line(capsys):
    code, out, err = run(capsys, "mig", "check", "--gpu", "H100-80GB", "mig-3g.40gb", "mig-3g.40gb")
    assert code == 0
    assert out == "layout: [mig-3g.40gb, mig-3g.40gb]  # placement: mig-3g.40gb@0 mig-3g.40gb@4\n"
    assert err == ""


def test_check_by_instance_type_uses_its_gpu(capsys):
    code, out, _ = run(
        capsys, "mig", "check", "--instance-type", "ml.p4d.24xlarge", "mig-3g.20gb", "mig-4g.20gb"
    )
    assert code == 0
    assert out == "layout: [mig-4g.20gb, mig-3g.20gb]  # placement: mig-4g.20gb@0 mig-3g.20gb@4\n"


@pytest.mark.parametrize(
    ("gpu", "profiles", "reason"),
    [
        ("H100-80GB", ["mig-4g.40gb", "mig-4g.40gb"], "compute slices sum to 8 > 7"),
        ("A100-40GB", ["mig-3g.20gb", "mig-3g.20gb", "mig-1g.5gb"], "no memory slices left for mig-1g.5gb"),
        ("B200-180GB", ["mig-1g.23gb"] * 8, "more than 7 instances"),
    ],
)
def test_check_does_not_fit_exits_1_with_reason(capsys, gpu, profiles, reason):
    code, out, err = run(capsys, "mig", "check", "--gpu", gpu, *profiles)
    assert code == 1
    assert out.startswith(f"does not fit one {gpu} GPU: ")
    assert reason in out
    assert len(out.splitlines()) == 1 and err == ""


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--gpu", "H100", "mig-3g.40gb"], "'H100'"),
        (["--instance-type", "ml.g5.48xlarge", "mig-3g.40gb"], "'ml.g5.48xlarge'"),
        (["--gpu", "H100-80GB", "mig-3g.20gb"], "on H100-80GB use mig-3g.40gb"),
        (["--gpu", "H100-80GB", "mig-1g.10gb+me"], "not accepted by SageMaker"),
    ],
)
def test_check_unknown_input_exits_2_with_one_line_on_stderr(capsys, argv, named):
    code, out, err = run(capsys, "mig", "check", *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("gpu-share mig: invalid argument: ")
    assert named in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_check_needs_gpu_or_instance_type(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["mig", "check", "mig-3g.40gb"])
    assert exc.value.code == 2
    assert "--gpu" in capsys.readouterr().err


def test_check_refuses_both_gpu_and_instance_type(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["mig", "check", "--gpu", "H100-80GB", "--instance-type", "ml.p5.48xlarge", "mig-3g.40gb"])
    assert exc.value.code == 2


# --------------------------------------------------------------------------- layouts


def test_layouts_json_is_one_array_of_profiles_and_starts(capsys):
    code, out, _ = run(capsys, "mig", "layouts", "--gpu", "H100-80GB", "--json")
    assert code == 0
    data = json.loads(out)
    assert isinstance(data, list) and len(data) == 28
    assert all(set(item) == {"profiles", "starts"} for item in data)
    assert {"profiles": ["mig-4g.40gb", "mig-3g.40gb"], "starts": [0, 4]} in data
    assert data == [layout.to_dict() for layout in mig.layouts("H100-80GB")]


def test_layouts_json_by_instance_type(capsys):
    code, out, _ = run(capsys, "mig", "layouts", "--instance-type", "ml.p6-b200.48xlarge", "--json")
    assert code == 0
    assert json.loads(out)[0] == {"profiles": ["mig-7g.180gb"], "starts": [0]}


def test_layouts_human_list_has_a_header_and_one_line_per_layout(capsys):
    code, out, _ = run(capsys, "mig", "layouts", "--instance-type", "ml.p5e.48xlarge")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("28 maximal MIG layouts on ml.p5e.48xlarge (H200-141GB)")
    assert len(lines) == 29
    assert lines[1] == "  layout: [mig-7g.141gb]  # mig-7g.141gb@0, compute 7/7, memory 8/8"
    assert lines[2].strip().startswith("layout: [mig-4g.71gb, mig-3g.71gb]  # mig-4g.71gb@0 mig-3g.71gb@4")


def test_layouts_unknown_gpu_exits_2(capsys):
    code, out, err = run(capsys, "mig", "layouts", "--gpu", "A100")
    assert code == 2 and out == ""
    assert "A100-40GB" in err and "A100-80GB" in err


def test_module_entry_point_runs_check_end_to_end():
    proc = subprocess.run(
        [sys.executable, "-m", "cdk_gpu_share.cli", "mig", "check", "--gpu", "A100-80GB", "mig-7g.80gb"],
        capture_output=True,
        text=True,
    )
    assert (proc.returncode, proc.stdout) == (0, "layout: [mig-7g.80gb]  # placement: mig-7g.80gb@0\n")


# --------------------------------------------------------------------------- pasted into a config

ENDPOINT = """\
teams:
  - name: team-a
inference:
  endpoints:
    - name: small
      instance_type: {instance_type}
      {line}
      models:
        - name: m
          image: 763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128
          profile: {profile}
          memory_mb: 1024
"""


def _pasted(instance_type: str, line: str, profile: str):
    from cdk_gpu_share.core import validation as V
    from cdk_gpu_share.core.configuration.parse import parse_config

    text = ENDPOINT.format(instance_type=instance_type, line=line, profile=profile)
    return parse_config(V.load_yaml(text, source="pasted.yaml"), source="pasted.yaml").inference.endpoints[0]


@pytest.mark.parametrize(
    ("instance_type", "profiles"),
    [
        ("ml.p4d.24xlarge", ["mig-3g.20gb", "mig-4g.20gb"]),
        ("ml.p5.48xlarge", ["mig-1g.10gb", "mig-3g.40gb", "mig-2g.20gb"]),
        ("ml.p6-b200.48xlarge", ["mig-7g.180gb"]),
    ],
)
def test_the_layout_check_prints_is_taken_by_the_config(capsys, instance_type, profiles):
    code, out, _ = run(capsys, "mig", "check", "--instance-type", instance_type, *profiles)
    assert code == 0
    endpoint = _pasted(instance_type, out.strip(), profiles[0])
    assert sorted(endpoint.layout) == sorted(profiles)


def test_every_layout_layouts_prints_is_taken_by_the_config(capsys):
    code, out, _ = run(capsys, "mig", "layouts", "--instance-type", "ml.p4d.24xlarge")
    assert code == 0
    lines = out.splitlines()[1:]
    assert len(lines) == len(mig.layouts("A100-40GB"))
    for line, layout in zip(lines, mig.layouts("A100-40GB")):
        assert _pasted("ml.p4d.24xlarge", line.strip(), layout.profiles[0]).layout == layout.profiles
