"""``gpu-share reclaim plan [FILE]``: exit codes, output, one-line errors naming the field."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.policy.reclaim import plan

STATE = {
    "now": 1000,
    "capacity": {"gpu": 3},
    "teams": [{"name": n, "guarantee": {"gpu": 1}} for n in ("alpha", "beta", "gamma")],
    "jobs": [
        {"id": "a1", "team": "alpha", "state": "running", "demand": {"gpu": 1}, "since": 10},
        {"id": "a2", "team": "alpha", "state": "running", "demand": {"gpu": 1}, "since": 20},
        {"id": "a3", "team": "alpha", "state": "running", "demand": {"gpu": 1}, "since": 30},
        {"id": "b1", "team": "beta", "state": "pending", "demand": {"gpu": 1}, "since": 900},
    ],
}


@pytest.fixture
def state_file(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(STATE))
    return path


def _write(tmp_path, data, name="bad.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_plan_from_file_prints_the_plan_and_exits_0(state_file, capsys):
    assert main(["reclaim", "plan", str(state_file)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == plan(STATE)
    assert err == ""


def test_plan_reads_standard_input_when_no_file(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(STATE)))
    assert main(["reclaim", "plan"]) == 0
    assert json.loads(capsys.readouterr().out)["preemptions"][0]["job"] == "a3"


def test_dash_means_standard_input(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(STATE)))
    assert main(["reclaim", "plan", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["served"] == ["b1"]


def test_compact_output_is_one_line(state_file, capsys):
    assert main(["reclaim", "plan", "--compact", str(state_file)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == plan(STATE)


def test_output_is_byte_for_byte_deterministic(state_file, capsys):
    main(["reclaim", "plan", str(state_file)])
    first = capsys.readouterr().out
    main(["reclaim", "plan", str(state_file)])
    assert capsys.readouterr().out == first


def _error(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err  # one line
    assert "Traceback" not in err
    return err


def test_not_json_exits_2_with_one_line(tmp_path, capsys):
    err = _error(["reclaim", "plan", _write(tmp_path, "{not json")], capsys)
    assert "is not JSON" in err and "line 1" in err


def test_empty_input_is_not_json(tmp_path, capsys):
    assert "is not JSON" in _error(["reclaim", "plan", _write(tmp_path, "")], capsys)


def test_missing_file_exits_2(tmp_path, capsys):
    err = _error(["reclaim", "plan", str(tmp_path / "nope.json")], capsys)
    assert "cannot read" in err and "nope.json" in err


def test_directory_instead_of_file_exits_2(tmp_path, capsys):
    assert "cannot read" in _error(["reclaim", "plan", str(tmp_path)], capsys)


def test_binary_file_exits_2(tmp_path, capsys):
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "not UTF-8" in _error(["reclaim", "plan", str(path)], capsys)


def test_json_that_is_not_an_object_exits_2(tmp_path, capsys):
    err = _error(["reclaim", "plan", _write(tmp_path, [1, 2])], capsys)
    assert "must be a JSON object" in err


def _mutated(**changes):
    s = json.loads(json.dumps(STATE))
    for path, value in changes.items():
        obj = s
        keys = path.split("__")
        for key in keys[:-1]:
            obj = obj[int(key)] if key.isdigit() else obj[key]
        last = int(keys[-1]) if keys[-1].isdigit() else keys[-1]
        if value is DELETE:
            del obj[last]
        else:
            obj[last] = value
    return s


DELETE = object()

# Every invalid-input case the contract lists, with the field the message must name.
CASES = [
    ("missing field", _mutated(now=DELETE), "now"),
    ("mistyped field", _mutated(jobs__0__since="10:00"), "jobs[0].since"),
    ("mistyped team field", _mutated(teams__0__in_team_preemption="yes"), "teams[0].in_team_preemption"),
    ("negative amount", _mutated(jobs__1__demand={"gpu": -1}), "jobs[1].demand.gpu"),
    ("negative capacity", _mutated(capacity={"gpu": -3}), "capacity.gpu"),
    ("unknown resource in guarantee", _mutated(teams__0__guarantee={"gpu": 1, "tpu": 1}), "teams[0].guarantee.tpu"),
    ("unknown resource in borrow_limit", _mutated(teams__1__borrow_limit={"tpu": 2}), "teams[1].borrow_limit.tpu"),
    ("unknown resource in demand", _mutated(jobs__2__demand={"tpu": 1}), "jobs[2].demand.tpu"),
    ("guarantee sum above capacity", _mutated(capacity={"gpu": 2}), "teams[*].guarantee.gpu"),
    ("duplicate team name", _mutated(teams__2__name="alpha"), "teams[2].name"),
    ("duplicate job id", _mutated(jobs__3__id="a1"), "jobs[3].id"),
    ("job of an unknown team", _mutated(jobs__3__team="delta"), "jobs[3].team"),
    ("state other than running or pending", _mutated(jobs__3__state="RUNNABLE"), "jobs[3].state"),
    ("sharing value", _mutated(teams__1__sharing="borrow"), "teams[1].sharing"),
    ("borrow_limit_percent below -1", _mutated(teams__1__borrow_limit_percent=-5), "teams[1].borrow_limit_percent"),
    ("max_checkpoint_seconds 0", _mutated(settings={"victim_order": "checkpoint", "max_checkpoint_seconds": 0}),
     "settings.max_checkpoint_seconds"),
    ("max_checkpoint_seconds not a number", _mutated(settings={"max_checkpoint_seconds": "1h"}),
     "settings.max_checkpoint_seconds"),
]


@pytest.mark.parametrize(("case", "state", "field"), CASES, ids=[c[0] for c in CASES])
def test_each_invalid_input_exits_2_with_one_line_naming_the_field(case, state, field, tmp_path, capsys):
    err = _error(["reclaim", "plan", _write(tmp_path, state)], capsys)
    assert field in err, (case, err)
    assert err.startswith("gpu-share reclaim: ")


def test_several_problems_stay_on_one_line(tmp_path, capsys):
    state = _mutated(jobs__3__state="queued", teams__1__sharing="borrow")
    err = _error(["reclaim", "plan", _write(tmp_path, state)], capsys)
    assert "2 problems" in err and "jobs[3].state" in err and "teams[1].sharing" in err


def test_message_names_the_value_and_the_fix(tmp_path, capsys):
    err = _error(["reclaim", "plan", _write(tmp_path, _mutated(teams__1__sharing="borrow"))], capsys)
    assert "'borrow'" in err and "use reserve, lend or lend_and_borrow" in err


def test_reclaim_without_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["reclaim"])
    assert info.value.code == 2


# ---------------------------------------------------------------------------
# As a separate process, as a user runs it


def _run(args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "cdk_gpu_share.cli", "reclaim", "plan", *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )


def test_subprocess_plan_from_stdin_exits_0():
    proc = _run([], stdin=json.dumps(STATE))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == plan(STATE)


def test_subprocess_plan_from_file_exits_0(state_file):
    proc = _run([str(state_file)])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["served"] == ["b1"]


def test_subprocess_not_json_exits_2_without_traceback():
    proc = _run([], stdin="definitely not json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "not JSON" in proc.stderr


def test_subprocess_invalid_field_exits_2_naming_it(tmp_path):
    proc = _run([_write(tmp_path, _mutated(jobs__3__team="delta"))])
    assert proc.returncode == 2
    assert "jobs[3].team" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_subprocess_unreadable_file_exits_2(tmp_path):
    proc = _run([str(tmp_path / "missing.json")])
    assert proc.returncode == 2
    assert "cannot read" in proc.stderr and "Traceback" not in proc.stderr
