"""The tree compiled onto HyperPod and Batch quota management: guarantees, borrow limits, what
``plan`` shows of it, and ``simulate --hierarchy compiled`` replaying the compiled configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.config import check_config, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.organisation import as_replayed, compilation, compile_flat
from cdk_gpu_share.core.plan import fleet_plan, format_plan

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
IT = "ml.g5.xlarge"


def org(backend: str, **team_b) -> dict:
    """research (pool 2, borrow limit 2) over nlp (team-a, 2) and team-b (1); team-c (3) a root."""
    section = {"capacity": {IT: 10}, **({"cluster_arn": ARN} if backend == "hyperpod" else {})}
    return {
        backend: section,
        "groups": [{"name": "research", "guarantee": {IT: 2}, "borrow_limit": {IT: 2}},
                   {"name": "nlp", "parent": "research"}],
        "teams": [{"name": "team-a", "group": "nlp", "guarantee": {IT: 2}},
                  {"name": "team-b", "group": "research", "guarantee": {IT: 1}, **team_b},
                  {"name": "team-c", "guarantee": {IT: 3}}],
    }


def flat(config, backend):
    compiled = compile_flat(config, backend).config
    assert compiled.groups == () and check_config(compiled) == []
    return {t.name: (t.guarantee[IT].instances, t.borrow_limit.get(IT) and t.borrow_limit[IT].instances,
                     t.borrow_limit_percent) for t in compiled.teams}


@pytest.mark.parametrize("backend, team_b, expected", [
    # research's Q is 5 (pool 2 + 2 + 1), its bound Q + B 7. The pool: 2 over nlp (Q 2) and team-b
    # (Q 1) is 1 and 0 rounded down, the remainder to nlp: team-a 4. Limits: 7 less the compiled
    # guarantee (team-a 3, team-b 6), absolute on HyperPod.
    ("hyperpod", {}, {"team-a": (4, 3, None), "team-b": (1, 6, None), "team-c": (3, None, None)}),
    # A team's own tighter limit stays.
    ("hyperpod", {"borrow_limit": {IT: 2}}, {"team-a": (4, 3, None), "team-b": (1, 2, None), "team-c": (3, None, None)}),
    # On Batch the same room as a percentage of the compiled guarantee, rounded down: 3/4 is 75 %.
    ("batch_quota", {}, {"team-a": (4, None, 75), "team-b": (1, None, 600), "team-c": (3, None, None)}),
    # A team's own tighter percentage stays.
    ("batch_quota", {"borrow_limit_percent": 100}, {"team-a": (4, None, 75), "team-b": (1, None, 100),
                                                     "team-c": (3, None, None)}),
    # A team that never borrows gets no limit, and its share of the pool all the same.
    ("batch_quota", {"sharing": "lend"}, {"team-a": (4, None, 75), "team-b": (1, None, None),
                                          "team-c": (3, None, None)}),
])
def test_the_compiled_flat_configuration(backend, team_b, expected):
    assert flat(parse_config(org(backend, **team_b)), backend) == expected


def test_backends_that_apply_the_tree_compile_nothing():
    raw = org("hyperpod")
    raw["fairshare"] = {"capacity": {"g5.xlarge": 2}}
    raw["teams"].append({"name": "team-f", "guarantee": {"g5.xlarge": 1}, "group": "nlp"})
    config = parse_config(raw)
    assert compilation("fairshare") == "exact" and compilation("hyperpod") == "approximate"
    assert compile_flat(config, "fairshare").config is config
    assert as_replayed(config, "fairshare", None) is config  # the tree, by default
    assert as_replayed(config, "hyperpod", None).groups == ()  # the compilation, by default
    assert as_replayed(config, "hyperpod", "tree") is config
    with pytest.raises(ConfigError, match="--hierarchy: is not a hierarchy mode"):
        as_replayed(config, "hyperpod", "flat")


def test_plan_draws_the_tree_and_the_compilation():
    config = parse_config(org("hyperpod"))
    tree = fleet_plan(config)["backends"]["hyperpod"]["tree"]
    assert [(n["depth"], n["name"], n["kind"]) for n in tree["nodes"]] == [
        (0, "research", "group"), (1, "nlp", "group"), (2, "team-a", "team"), (1, "team-b", "team"),
        (0, "team-c", "team")]
    research = tree["nodes"][0]["types"][IT]
    assert research == {"quota": 5.0, "borrow_limit": 2, "max_usage": 7.0}
    assert tree["nodes"][2]["types"][IT]["max_usage"] == 3.0  # team-a: its own 50 % default, under research's 7
    text = format_plan(fleet_plan(config))
    assert "  tree (approximate): quota Q, borrow limit B, most it could use" in text
    assert "    research/: ml.g5.xlarge Q 5 instances (5 GPUs), B 2 instances (2 GPUs), at most 7 instances" in text
    assert ("  compiled team-a on ml.g5.xlarge: guarantee 2 instances (2 GPUs) -> 4 instances (4 GPUs), borrow"
            " limit 3 instances (3 GPUs) (tree bound 7 instances (7 GPUs))") in text


def test_plan_without_groups_has_no_tree():
    raw = org("hyperpod")
    del raw["groups"]
    for t in raw["teams"]:
        t.pop("group", None)
    assert "tree" not in fleet_plan(parse_config(raw))["backends"]["hyperpod"]
    assert "tree (" not in format_plan(fleet_plan(parse_config(raw)))


def _files(tmp_path, backend):
    config = tmp_path / "org.json"
    config.write_text(json.dumps(org(backend)))
    trace = tmp_path / "jobs.csv"
    # team-a asks 4 instances at once: beyond its own 2 but within its compiled 4.
    trace.write_text("job_id,team,submit_time,duration_s,gpus\nj1,team-c,0,100,4\nj2,team-a,1,100,4\n")
    return str(config), str(trace)


def test_simulate_replays_the_compiled_configuration(tmp_path, capsys):
    config, trace = _files(tmp_path, "hyperpod")
    assert main(["simulate", "--config", config, "--trace", trace, "--mode", "share", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--config", config, "--trace", trace, "--mode", "share", "--json",
                 "--hierarchy", "compiled"]) == 0
    compiled = json.loads(capsys.readouterr().out)
    # team-a's 4 are all within its compiled guarantee of 4 (its own is 2).
    assert compiled["teams"]["team-a"]["borrowed_gpu_seconds"] == 0
    assert {k: v for k, v in default.items() if k != "sim_seconds"} == \
        {k: v for k, v in compiled.items() if k != "sim_seconds"}


def test_simulate_replays_the_tree_or_its_compilation(tmp_path, capsys):
    config, trace = _files(tmp_path, "hyperpod")
    Path(trace).write_text("job_id,team,submit_time,duration_s,gpus\nj1,team-a,0,100,3\n")
    figures = {}
    for mode in ("tree", "compiled"):
        assert main(["simulate", "--config", config, "--trace", trace, "--mode", "share", "--json",
                     "--hierarchy", mode]) == 0
        figures[mode] = json.loads(capsys.readouterr().out)["teams"]["team-a"]["borrowed_gpu_seconds"]
    # In the tree team-a's own guarantee is 2: its 3 GPUs borrow 1 for 100 s; compiled, its
    # guarantee is 4 (research's pool split to it) and it borrows nothing.
    assert figures == {"tree": 100, "compiled": 0}
