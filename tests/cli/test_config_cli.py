"""`gpu-share validate` and `gpu-share plan` called in-process, beside the subprocess tests.

tests/core/test_config_validation.py runs these commands in a child process (the installed
entry point, end to end). A child runs the code on disk, so those tests cannot notice a
change made in this process (a mutation runner's mutant): these call ``main(argv)`` and
read the output with capsys, with the same assertions.
"""

from __future__ import annotations

import json
from pathlib import Path

from cdk_gpu_share.cli import main
from tests.builders import SIX_MISTAKES

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_reports_six_mistakes_and_exits_2(tmp_path, capsys):
    path = tmp_path / "six.yaml"
    path.write_text(SIX_MISTAKES)
    code, out, err = run(capsys, "validate", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"gpu-share validate: invalid configuration in {path}: ")
    for needle in ("borrow_limit_percent", "teams[1] (team-a).name", "batch_quota.capacity.ml.g5.xlarge", "-3", "300", "cluster_arn"):
        assert needle in err, needle
    assert len([line for line in err.splitlines() if line.strip().startswith("- ")]) >= 6, err


def test_validate_valid_config_prints_one_line(capsys):
    code, out, err = run(capsys, "validate", str(ROOT / "platform.yaml"))
    assert (code, err) == (0, "")
    assert out.count("\n") == 1
    assert "valid" in out and "3 teams" in out


def test_validate_missing_file_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    code, out, err = run(capsys, "validate", str(missing))
    assert (code, out) == (2, "")
    assert err == (
        f"gpu-share validate: invalid configuration: config: file not found (got {str(missing)!r});"
        " pass the path of a platform config (`gpu-share init` writes one: platform.yaml)\n"
    )


def test_validate_non_utf8_file_exits_2(tmp_path, capsys):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    code, _, err = run(capsys, "validate", str(path))
    assert code == 2
    assert err == (
        f"gpu-share validate: invalid configuration: config: is not UTF-8 text (byte 0) (got {str(path)!r});"
        " save the file as UTF-8\n"
    )


def test_validate_invalid_yaml_names_the_line(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("teams:\n  - name: [unclosed\n")
    code, _, err = run(capsys, "validate", str(path))
    assert code == 2
    assert f"invalid configuration in {path}: line 3, column 1: is not valid YAML" in err and "fix the indentation or quoting there" in err


def test_plan_shows_guarantee_strategy_borrow_and_most_usable(capsys):
    code, out, _ = run(capsys, "plan", str(ROOT / "platform.yaml"))
    assert code == 0
    assert "batch_quota:" in out and "fairshare:" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("team-a") and "ml.g5.xlarge" in line)
    assert "lend_and_borrow" in row and "unlimited" in row and row.rstrip().endswith("3 instances (3 GPUs)")
    assert ("fleet ml.g5.xlarge: capacity 3 instances (3 GPUs), guaranteed 3 instances (3 GPUs),"
            " unguaranteed nothing") in out


def test_plan_json_caps_borrowing_by_percent(capsys):
    code, out, _ = run(capsys, "plan", "--json", str(ROOT / "examples" / "hyperpod.yaml"))
    assert code == 0
    rows = {r["team"]: r for r in json.loads(out)["backends"]["hyperpod"]["teams"]}
    assert rows["research"]["borrow_cap"] == 1  # 50% of 2 instances, under the 8-GPU absolute cap
    assert rows["research"]["max_usage"] == 3
    assert rows["applied"]["max_usage"] == 1  # lend: never above its guarantee
    assert rows["inference"]["borrow_cap"] == 0
