"""`gpu-share advise`: exit codes, the written scenario and config reproduced by `gpu-share
simulate`, the config's comments kept, bad input refused in one line."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
import yaml

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.advise.executors import default_workers
from tests.core.test_advise import bursty_trace, scenario


def write_trace(path, rows, header=("job_id", "team", "submit_time", "duration_s", "gpus", "priority")):
    path.write_text(",".join(header) + "\n" + "".join(",".join(str(c) for c in r) + "\n" for r in rows))
    return str(path)


def run(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def case(tmp_path):
    data = scenario(4, {"a": {"wait_p95_minutes": 20}, "b": {"wait_p95_minutes": 40}})
    (tmp_path / "scenario.json").write_text(json.dumps(data))
    trace = write_trace(tmp_path / "jobs.csv", bursty_trace(1, ("a", "b")))
    return tmp_path, str(tmp_path / "scenario.json"), trace


def simulate_json(capsys, argv):
    code, out, err = run(capsys, ["simulate", *argv, "--mode", "share+reclaim", "--json"])
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("fleet", ["fixed", "size"])
def test_the_written_scenario_reproduces_the_advice(capsys, case, fleet):
    tmp, scen, trace = case
    out_path = str(tmp / "advised.json")
    code, out, err = run(capsys, ["advise", "--scenario", scen, "--trace", trace, "--fleet", fleet, "--workers", "1",
                                  "--json", "-o", out_path])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["feasible"] and doc["fleet"] == fleet
    assert set(doc) == {"feasible", "fleet", "capacity", "teams", "regret_gpu_hours", "input", "simulations",
                        "frontier", "warnings"}
    assert doc["warnings"] == [] and "warning" not in err  # every team has objectives
    assert (doc["frontier"] == []) == (fleet == "fixed")
    if fleet == "size":
        capacities = [f["capacity"]["gpu"] for f in doc["frontier"]]
        assert capacities == sorted(capacities) and doc["capacity"]["gpu"] in capacities
    written = json.loads(open(out_path).read())
    assert written["capacity"]["gpu"] == doc["capacity"]["gpu"]
    for team in written["teams"]:
        advised = doc["teams"][team["name"]]
        assert team["guarantee"]["gpu"] == advised["guarantee"]["gpu"] and team["sharing"] == advised["sharing"]
        given = json.loads(open(scen).read())["teams"][0 if team["name"] == "a" else 1]
        promised = {} if team["guarantee"] == given["guarantee"] else {"entitlement": given["guarantee"]}
        assert team["objectives"] == {**given["objectives"], **promised}
        assert advised["entitlement"] == given["guarantee"]
    result = simulate_json(capsys, ["--scenario", out_path, "--trace", trace])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]
    for name, team in result["teams"].items():
        assert team["objectives"] == doc["teams"][name]["objectives"]


def test_tables_without_json(capsys, case):
    _, scen, trace = case
    code, out, err = run(capsys, ["advise", "--scenario", scen, "--trace", trace, "--fleet", "size", "--workers", "1"])
    assert code == 0, err
    assert "every objective holds" in out
    assert "guarantee was" in out and "wait_p95_minutes" in out and "frontier" in out


def test_no_feasible_configuration_exits_1_naming_each_unmet_objective(capsys, tmp_path):
    data = scenario(2, {"a": {"wait_p50_minutes": 1, "wait_p99_minutes": 2}, "b": {"wait_p95_minutes": 1}})
    (tmp_path / "s.json").write_text(json.dumps(data))
    trace = write_trace(tmp_path / "jobs.csv", [(f"j{k}", "ab"[k % 2], 0, 3600, 1, 0) for k in range(8)])
    out_path = tmp_path / "closest.json"
    code, out, err = run(capsys, ["advise", "--scenario", str(tmp_path / "s.json"), "--trace", trace, "--workers", "1",
                                  "--json", "-o", str(out_path)])
    assert code == 1, err
    doc = json.loads(out)
    assert doc["feasible"] is False and out_path.exists()  # the closest is still printed and written
    unmet = [(n, k) for n, t in doc["teams"].items() for k, e in t["objectives"].items() if not e["met"]]
    assert len(unmet) == 3
    for name, key in unmet:
        assert f"team {name} {key}" in err
    assert "Traceback" not in err


BAD = [
    (["--step", "0"], "--step"),
    (["--step", "abc"], "--step"),
    (["--step", "3"], "does not divide the capacity"),
    (["--workers", "0"], "--workers"),
    (["--workers", str(4 * default_workers() + 1)], "--workers"),  # more than 4 processes a core
    (["--fleet", "grow"], "--fleet"),
]


@pytest.mark.parametrize(("extra", "needle"), BAD, ids=[b[1] + " " + " ".join(b[0]) for b in BAD])
def test_bad_flags_exit_2_in_one_line(capsys, case, extra, needle):
    _, scen, trace = case
    code, out, err = run(capsys, ["advise", "--scenario", scen, "--trace", trace, *extra])
    assert code == 2
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(("objectives", "needle"), [
    ({"wait_p95_minute": 20}, "wait_p95_minute"),
    ({"wait_p95_minutes": 0}, "wait_p95_minutes"),
    ({"wait_p95_minutes": -5}, "wait_p95_minutes"),
])
def test_bad_objectives_exit_2_naming_the_field(capsys, tmp_path, objectives, needle):
    data = scenario(4, {"a": objectives, "b": {}})
    (tmp_path / "s.json").write_text(json.dumps(data))
    trace = write_trace(tmp_path / "jobs.csv", bursty_trace(1, ("a", "b"), jobs=4))
    code, out, err = run(capsys, ["advise", "--scenario", str(tmp_path / "s.json"), "--trace", trace])
    assert code == 2 and needle in err and "teams[0].objectives" in err and "Traceback" not in err, err


def test_what_simulate_refuses_advise_refuses(capsys, case, tmp_path):
    _, scen, _ = case
    trace = write_trace(tmp_path / "bad.csv", [("j1", "nobody", 0, 60, 1, 0)])
    code, out, err = run(capsys, ["advise", "--scenario", scen, "--trace", trace])
    assert code == 2 and "nobody" in err and "Traceback" not in err


CONFIG = textwrap.dedent("""\
    # The platform: comments above everything
    platform:
      name: advised   # an inline comment

    teams:
      - name: a                 # team a's comment
        description: Research
        guarantee: {g5.12xlarge: 1}     # 4 GPUs
        sharing: lend_and_borrow
        borrow_limit_percent: -1
      - name: b
        # a comment inside team b
        guarantee:
          g5.12xlarge: 1
        sharing: reserve

    fairshare:
      capacity:
        g5.12xlarge: 2   # 8 GPUs
      reclaim:
        schedule_minutes: 1
        reclaim_after_seconds: 60
    """)


def test_the_written_config_keeps_every_comment_and_passes_validate(capsys, tmp_path):
    (tmp_path / "platform.yaml").write_text(CONFIG)
    rows = [(f"j{k}", "ab"[k % 2], (k // 2) * 1800, 3600, 4, 0) for k in range(12)]
    trace = write_trace(tmp_path / "jobs.csv", rows)
    out_path = tmp_path / "advised.yaml"
    code, out, err = run(capsys, ["advise", "--config", str(tmp_path / "platform.yaml"), "--trace", trace,
                                  "--fleet", "size", "--workers", "1", "--json", "-o", str(out_path)])
    assert code == 0, err
    doc = json.loads(out)
    text = out_path.read_text()
    rewritten = 0
    for line in CONFIG.splitlines():
        if "#" not in line:
            continue
        code_part, comment = line[:line.index("#")].rstrip(), line[line.index("#"):]
        same = [out_line for out_line in text.splitlines() if out_line.startswith(code_part + " ")]
        if not code_part.strip() or any(out_line.endswith(comment) for out_line in same):
            assert comment in text, line  # an unchanged value keeps its comment
        else:  # a value the advice changed: its comment now says what it was
            key, was = code_part.strip().split(": ", 1)
            assert re.search(rf"^ *{re.escape(key)}: .*# gpu-share advise: was {re.escape(was)}$", text, re.M), line
            assert comment not in text, line
            rewritten += 1
    assert rewritten, "the advice changes a commented value here"
    assert code == 0, err
    assert doc["capacity"]["gpu"] % 4 == 0  # whole instances of g5.12xlarge
    result = simulate_json(capsys, ["--config", str(out_path), "--trace", trace])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]


def test_a_config_step_is_whole_instances(capsys, tmp_path):
    (tmp_path / "platform.yaml").write_text(CONFIG)
    trace = write_trace(tmp_path / "jobs.csv", [("j1", "a", 0, 60, 1, 0)])
    code, out, err = run(capsys, ["advise", str(tmp_path / "platform.yaml"), "--trace", trace, "--step", "2"])
    assert code == 2 and "instances" in err and "Traceback" not in err, err


def test_the_written_config_changes_only_the_lines_of_decided_fields(capsys, tmp_path):
    import difflib

    (tmp_path / "platform.yaml").write_text(CONFIG)
    rows = [(f"j{k}", "ab"[k % 2], (k // 2) * 1800, 3600, 4, 0) for k in range(12)]
    trace = write_trace(tmp_path / "jobs.csv", rows)
    out_path = tmp_path / "advised.yaml"
    out_path.write_text("# the previous advice, readable by its owner only\n")
    out_path.chmod(0o600)
    code, out, err = run(capsys, ["advise", "--config", str(tmp_path / "platform.yaml"), "--trace", trace,
                                  "--fleet", "size", "--workers", "1", "-o", str(out_path)])
    assert code == 0, err
    assert out_path.stat().st_mode & 0o777 == 0o600, "a replaced file keeps its permissions"
    changed = [line[1:].strip() for line in difflib.ndiff(CONFIG.splitlines(), out_path.read_text().splitlines())
               if line[:1] in "+-" and line[1:].strip()]
    assert changed, "the advice changes something here"
    for line in changed:
        assert line.split(":")[0].lstrip("- ") in ("g5.12xlarge", "guarantee", "sharing", "borrow_limit_percent",
                                                   "objectives", "entitlement"), line


def test_a_comment_on_a_value_the_advice_changed_is_rewritten_or_dropped_with_it():
    from cdk_gpu_share.core.advise.config_file import advised_config_text
    from cdk_gpu_share.core.advise.space import Candidate, Choice
    from cdk_gpu_share.core.configuration.parse import parse_config

    text = textwrap.dedent("""\
        platform:
          name: advised
        teams:
          - name: a
            guarantee:
              g5.xlarge: 2                  # instances of the fleet this team may always use
            sharing: lend_and_borrow        # reserve | lend | lend_and_borrow (also borrow)
            borrow_limit_percent: 100       # may borrow its guarantee again
          - name: b
            guarantee: {g5.xlarge: 2}       # two GPUs
            sharing: lend_and_borrow        # lends and borrows
            borrow_limit_percent: 50        # may borrow half its guarantee again

            # the fleet
        fairshare:
          capacity:
            g5.xlarge: 4                    # 4 GPUs
        """)
    config = parse_config(yaml.safe_load(text))
    was = Candidate(4, (Choice(2, "lend_and_borrow", 100), Choice(2, "lend_and_borrow", 50)))
    new = Candidate(4, (Choice(2, "lend_and_borrow", -1), Choice(1, "reserve")))
    out = advised_config_text(text, config, "fairshare", new, was, ("a", "b"), fleet="fixed")
    lines = out.splitlines()
    # Changed: the comment says what the value was, never what it no longer is.
    assert "    borrow_limit_percent: -1        # gpu-share advise: was 100" in lines
    assert "    guarantee: {g5.xlarge: 1}       # gpu-share advise: was {g5.xlarge: 2}" in lines
    assert "    sharing: reserve                # gpu-share advise: was lend_and_borrow" in lines
    # Dropped: b's borrow limit goes with its comment; the blank line and comment after it stay.
    assert "may borrow" not in out and "borrow_limit_percent: 50" not in out
    assert "\n\n    # the fleet\nfairshare:" in out
    # Unchanged: their comments stay as they were.
    for kept in ("      g5.xlarge: 2                  # instances of the fleet this team may always use",
                 "    sharing: lend_and_borrow        # reserve | lend | lend_and_borrow (also borrow)",
                 "    g5.xlarge: 4                    # 4 GPUs"):
        assert kept in lines, kept
    parse_config(yaml.safe_load(out))


OBJECTIVES_CONFIG = CONFIG.replace(
    "    sharing: lend_and_borrow\n    borrow_limit_percent: -1\n",
    "    sharing: lend_and_borrow\n    borrow_limit_percent: -1\n"
    "    objectives: {wait_p95_minutes: 30, no_worse_than_private: true}   # what team a needs\n").replace(
    "    sharing: reserve\n",
    "    sharing: reserve\n    objectives:\n      max_preempted_per_day: 0\n      wait_p95_minutes: 60\n")


@pytest.mark.parametrize("fleet", ["fixed", "size"])
def test_a_config_with_objectives_is_advised_and_simulate_agrees(capsys, tmp_path, fleet):
    assert OBJECTIVES_CONFIG.count("objectives") == 2
    (tmp_path / "platform.yaml").write_text(OBJECTIVES_CONFIG)
    rows = [(f"j{k}", "ab"[k % 3 == 0], (k // 2) * 1200, 3000, 4, k % 2) for k in range(14)]
    trace = write_trace(tmp_path / "jobs.csv", rows)
    out_path = tmp_path / "advised.yaml"
    code, out, err = run(capsys, ["advise", str(tmp_path / "platform.yaml"), "--trace", trace, "--fleet", fleet,
                                  "--workers", "1", "--json", "-o", str(out_path)])
    doc = json.loads(out)
    assert code == (0 if doc["feasible"] else 1), err
    assert doc["teams"]["b"]["sharing"] in ("reserve", "lend")  # its work must never be stopped
    assert "# what team a needs" in out_path.read_text()
    code, _, err = run(capsys, ["validate", str(out_path)])
    assert code == 0, err
    result = simulate_json(capsys, ["--config", str(out_path), "--trace", trace])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]
    for name, team in result["teams"].items():
        assert team["objectives"] == doc["teams"][name]["objectives"]


HYPERPOD = textwrap.dedent("""\
    platform:
      name: hp
    teams:
      - name: a
        guarantee: {ml.p5.48xlarge: 1}
        sharing: lend_and_borrow
        objectives: {wait_p95_minutes: 30}
      - name: b
        guarantee: {ml.p5.48xlarge: 1}
        sharing: lend
    hyperpod:
      cluster_arn: arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456
      capacity:
        ml.p5.48xlarge: 2
    """)


def test_every_backend_gets_only_the_borrow_limits_it_accepts(capsys, tmp_path):
    """HyperPod takes no -1 (unlimited): the advisor's ladder is what the config's validation accepts."""
    from cdk_gpu_share.core import validation as V
    from cdk_gpu_share.core.advise.config_file import accepted_percents
    from cdk_gpu_share.core.advise.space import PERCENTS

    (tmp_path / "hp.yaml").write_text(HYPERPOD)
    raw = V.load_yaml(HYPERPOD, source="hp.yaml")
    ladder = accepted_percents(raw, "hyperpod", "a", PERCENTS)
    assert -1 not in ladder and 400 in ladder and 0 in ladder
    rows = [(f"j{k}", "ab"[k % 2], (k // 2) * 900, 3600, 8, 0) for k in range(10)]
    trace = write_trace(tmp_path / "jobs.csv", rows)
    out_path = tmp_path / "advised.yaml"
    code, out, err = run(capsys, ["advise", str(tmp_path / "hp.yaml"), "--trace", trace, "--fleet", "size",
                                  "--workers", "1", "--json", "-o", str(out_path)])
    doc = json.loads(out)
    assert code == (0 if doc["feasible"] else 1), err
    assert all(t.get("borrow_limit_percent", 0) != -1 for t in doc["teams"].values())
    assert doc["capacity"]["gpu"] % 8 == 0
    code, _, err = run(capsys, ["validate", str(out_path)])
    assert code == 0, err


def test_a_backend_of_several_instance_types_is_refused_in_one_line(capsys, tmp_path):
    config = HYPERPOD.replace("    ml.p5.48xlarge: 2\n", "    ml.p5.48xlarge: 2\n    ml.p4d.24xlarge: 1\n")
    assert config != HYPERPOD
    (tmp_path / "hp.yaml").write_text(config)
    trace = write_trace(tmp_path / "jobs.csv", [("j1", "a", 0, 60, 1, 0)])
    code, out, err = run(capsys, ["advise", str(tmp_path / "hp.yaml"), "--trace", trace])
    assert code == 2 and "hyperpod.capacity" in err and "one instance type" in err and "Traceback" not in err, err


# ---------------------------------------------------------------------------
# Entitlement: what a team was promised stays what its promises are judged against

# Team a is guaranteed 2 of 3 GPUs and asks that its jobs within them wait at most 30 minutes
# for lent capacity to come back, and no longer than in a private cluster of 2 GPUs. On this
# trace the advice (at 3 GPUs, either fleet) lowers its guarantee to 0: its jobs within the
# 2 GPUs it is still owed then wait 3 minutes (p99), which the promise allows.
PROMISE = {"guarantee_wait_p99_minutes": 30, "no_worse_than_private": True}


def promised_case(tmp_path):
    (tmp_path / "promised.json").write_text(json.dumps(scenario(3, {"a": PROMISE, "b": {}}, {"a": 2, "b": 0})))
    return str(tmp_path / "promised.json"), write_trace(tmp_path / "jobs.csv", bursty_trace(3, ("a", "b")))


def test_a_sized_fleet_never_goes_below_the_largest_entitlement_and_keeps_it_as_the_guarantee(capsys, tmp_path):
    """Sized, the least fleet that holds is team a's entitlement itself (2 GPUs): a keeps it as its
    guarantee, so the written scenario carries no separate entitlement, and simulate agrees."""
    scen, trace = promised_case(tmp_path)
    out_path = str(tmp_path / "advised.json")
    code, out, err = run(capsys, ["advise", "--scenario", scen, "--trace", trace, "--fleet", "size", "--workers", "1",
                                  "--json", "-o", out_path])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["capacity"] == {"gpu": 2} and doc["frontier"][0]["capacity"] == {"gpu": 2}
    assert doc["teams"]["a"]["guarantee"] == doc["teams"]["a"]["entitlement"] == {"gpu": 2}
    written = {t["name"]: t for t in json.loads(open(out_path).read())["teams"]}
    assert written["a"]["objectives"] == PROMISE
    result = simulate_json(capsys, ["--scenario", out_path, "--trace", trace])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]


@pytest.mark.parametrize("fleet", ["fixed"])
def test_a_team_given_less_than_its_entitlement_is_judged_against_it_and_the_output_says_so(capsys, tmp_path, fleet):
    scen, trace = promised_case(tmp_path)
    out_path = str(tmp_path / "advised.json")
    code, out, err = run(capsys, ["advise", "--scenario", scen, "--trace", trace, "--fleet", fleet, "--workers", "1",
                                  "--json", "-o", out_path])
    assert code == 0, err
    doc = json.loads(out)
    a = doc["teams"]["a"]
    assert a["guarantee"] == {"gpu": 0} and a["entitlement"] == {"gpu": 2}
    assert a["objectives"]["guarantee_wait_p99_minutes"]["value"] == 3.0  # its entitled jobs waited
    written = {t["name"]: t for t in json.loads(open(out_path).read())["teams"]}
    assert written["a"]["objectives"] == {**PROMISE, "entitlement": {"gpu": 2}}
    assert "objectives" not in written["b"]  # b's guarantee (0) is what it was promised
    result = simulate_json(capsys, ["--scenario", out_path, "--trace", trace])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]
    assert result["teams"]["a"]["objectives"] == a["objectives"]
    code, out, err = run(capsys, ["advise", "--scenario", scen, "--trace", trace, "--fleet", fleet, "--workers", "1"])
    assert "entitled" in out.splitlines()[out.splitlines().index("") + 1]  # the teams' table shows it


PROMISED_CONFIG = textwrap.dedent("""\
    platform:
      name: promised
    teams:
      - name: a
        guarantee: {g5.xlarge: 2}
        sharing: lend_and_borrow
        objectives: {guarantee_wait_p99_minutes: 30, no_worse_than_private: true}   # what team a needs
      - name: b
        guarantee:
          g5.xlarge: 0
        sharing: lend_and_borrow

    fairshare:
      capacity:
        g5.xlarge: 3
      reclaim:
        schedule_minutes: 1
        reclaim_after_seconds: 60
    """)


@pytest.mark.parametrize("fleet", ["fixed"])  # sized, a keeps its entitlement (the test above)
def test_the_written_config_carries_the_entitlement_and_simulate_agrees(capsys, tmp_path, fleet):
    (tmp_path / "platform.yaml").write_text(PROMISED_CONFIG)
    trace = write_trace(tmp_path / "jobs.csv", bursty_trace(3, ("a", "b")))
    out_path = tmp_path / "advised.yaml"
    code, out, err = run(capsys, ["advise", str(tmp_path / "platform.yaml"), "--trace", trace, "--fleet", fleet,
                                  "--workers", "1", "--json", "-o", str(out_path)])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["teams"]["a"]["guarantee"] == {"gpu": 0} and doc["teams"]["a"]["entitlement"] == {"gpu": 2}
    text = out_path.read_text()
    assert ("    objectives: {guarantee_wait_p99_minutes: 30, no_worse_than_private: true, entitlement: {g5.xlarge: 2}}"
            " # what team a needs") in text
    assert text.count("entitlement") == 1
    code, _, err = run(capsys, ["validate", str(out_path)])
    assert code == 0, err
    result = simulate_json(capsys, ["--config", str(out_path), "--trace", trace])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]
    assert result["teams"]["a"]["objectives"] == doc["teams"]["a"]["objectives"]
    assert result["teams"]["a"]["objectives"]["guarantee_wait_p99_minutes"]["value"] == 3.0


def test_a_team_without_objectives_gets_an_objectives_block_for_its_entitlement(capsys, tmp_path):
    """A config team that had no objectives: the entitlement goes under a new block, the blank line
    after the team stays after it."""
    (tmp_path / "platform.yaml").write_text(CONFIG)
    rows = [(f"j{k}", "ab"[k % 2], (k // 2) * 1800, 3600, 4, 0) for k in range(12)]
    trace = write_trace(tmp_path / "jobs.csv", rows)
    out_path = tmp_path / "advised.yaml"
    code, out, err = run(capsys, ["advise", str(tmp_path / "platform.yaml"), "--trace", trace, "--fleet", "size",
                                  "--workers", "1", "--json", "-o", str(out_path)])
    assert code == 0, err
    assert json.loads(out)["teams"]["b"]["guarantee"] == {"gpu": 0}
    assert ("    sharing: lend_and_borrow\n    borrow_limit_percent: -1\n    objectives:\n      entitlement:\n"
            "        g5.12xlarge: 1\n\nfairshare:\n") in out_path.read_text()


@pytest.mark.parametrize(("entitlement", "needle"), [
    ("{ml.g5.xlarge: 1}", "teams[0] (a).objectives.entitlement.ml.g5.xlarge: is not an instance type of the team's "
                          "guarantee (got 1); entitle the team to what it is guaranteed, in the same types (g5.xlarge)"),
    ("{g5.xlarge: 4}", "teams[0] (a).objectives.entitlement.g5.xlarge: is above the capacity (3 instances in "
                       "fairshare.capacity) (got 4); promise at most 3"),
    ("{g5.xlarge: 1.5}", "teams[0] (a).objectives.entitlement.g5.xlarge: must be a whole number (got 1.5)"),
])
@pytest.mark.parametrize("command", ["validate", "advise"])
def test_a_bad_entitlement_is_one_line_naming_the_field_the_value_and_the_fix(capsys, tmp_path, entitlement, needle,
                                                                             command):
    config = PROMISED_CONFIG.replace("no_worse_than_private: true}", f"entitlement: {entitlement}}}")
    assert config != PROMISED_CONFIG
    (tmp_path / "platform.yaml").write_text(config)
    trace = write_trace(tmp_path / "jobs.csv", [("j1", "a", 0, 60, 1, 0)])
    extra = ["--trace", trace] if command == "advise" else []
    code, out, err = run(capsys, [command, str(tmp_path / "platform.yaml"), *extra])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_without_objectives_the_advice_says_so_in_one_warning(capsys, tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(scenario(4, {"a": {}, "b": {}})))
    trace = write_trace(tmp_path / "jobs.csv", bursty_trace(1, ("a", "b"), jobs=8))
    argv = ["advise", "--scenario", str(tmp_path / "s.json"), "--trace", trace, "--workers", "1"]
    code, out, err = run(capsys, [*argv, "--json"])
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("no team has an objective: every configuration is feasible")
    assert err.splitlines() == [f"warning: {warnings[0]}"]
    code, out, err = run(capsys, argv)
    assert code == 0 and err.splitlines() == [f"warning: {warnings[0]}"] and "every objective holds" in out


def test_the_advisor_docs_worked_example_of_a_team_given_less_than_it_is_owed(capsys, tmp_path):
    """docs/advisor.md's example, run from its own config: the figures it quotes are this run's."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "advisor.md").read_text()
    section = doc[doc.index("## Entitlement and guarantee"):]
    config = re.search(r"```yaml\n(.*?)```", section, re.S)[1]
    (tmp_path / "small.yaml").write_text(config)
    assert main(["trace", "sample", "--config", str(tmp_path / "small.yaml"), "--jobs", "200",
                 "-o", str(tmp_path / "jobs.csv")]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, ["advise", str(tmp_path / "small.yaml"), "--trace", str(tmp_path / "jobs.csv"),
                                  "--workers", "1", "--json"])
    assert code == 0, err
    advice = json.loads(out)
    batch = advice["teams"]["batch"]
    assert (batch["guarantee"], batch["entitlement"]) == ({"gpu": 0}, {"gpu": 2})
    assert advice["teams"]["research"]["guarantee"] == {"gpu": 1}
    assert batch["objectives"]["no_worse_than_private"]["value"] == -1097
    assert f"regret       {advice['regret_gpu_hours']:,.1f} GPU-hours" in section
    assert "batch          no_worse_than_private  private + slack  -1,097 s  yes" in section


def test_on_the_alibaba_trace_the_advice_keeps_every_promise_and_its_output_reproduces_it(capsys, tmp_path):
    """The four QoS classes of the Alibaba trace with the objectives of docs/advisor.md, --fleet size:
    every objective holds, judged against what each team was given as input, and simulate on -o
    gives the same figures."""
    from pathlib import Path

    import yaml

    from tests.data import alibaba_trace

    raw = alibaba_trace()
    root = Path(__file__).parents[2]
    jobs = tmp_path / "jobs.csv"
    assert main(["trace", "convert", "--from", "alibaba-openb", str(raw), "-o", str(jobs)]) == 0
    config = yaml.safe_load((root / "examples" / "alibaba-openb.yaml").read_text())
    promise = {"no_worse_than_private": True}
    objectives = {"ls": {"wait_p95_minutes": 1440, **promise}, "burstable": {"wait_p95_minutes": 1440, **promise},
                  "be": {"wait_p95_minutes": 120, **promise},
                  "guaranteed": {"wait_p95_minutes": 30, "guarantee_wait_p99_minutes": 10,
                                 "max_preempted_per_day": 0, **promise}}
    given = {t["name"]: t["guarantee"]["g5.12xlarge"] for t in config["teams"]}
    for team in config["teams"]:
        team["objectives"] = objectives[team["name"]]
    (tmp_path / "alibaba.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    out_path = tmp_path / "advised.yaml"
    capsys.readouterr()
    code, out, err = run(capsys, ["advise", str(tmp_path / "alibaba.yaml"), "--trace", str(jobs), "--fleet", "size",
                                  "--workers", "2", "--json", "-o", str(out_path)])
    assert code == 0, err
    advice = json.loads(out)
    assert advice["feasible"] and all(e["met"] for t in advice["teams"].values() for e in t["objectives"].values())
    written = {t["name"]: t for t in yaml.safe_load(out_path.read_text())["teams"]}
    for name, team in advice["teams"].items():
        assert team["entitlement"] == {"gpu": 4 * given[name]}
        changed = team["guarantee"]["gpu"] != 4 * given[name]
        assert written[name]["objectives"].get("entitlement") == ({"g5.12xlarge": given[name]} if changed else None)
    result = simulate_json(capsys, ["--config", str(out_path), "--trace", str(jobs)])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == advice["regret_gpu_hours"]
    for name, team in result["teams"].items():
        assert team["objectives"] == advice["teams"][name]["objectives"]
