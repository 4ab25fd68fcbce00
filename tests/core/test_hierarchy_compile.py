"""The tree compiled onto HyperPod and Batch quota management: guarantees, borrow limits, what
``plan`` shows of it, and ``simulate --hierarchy compiled`` replaying the compiled configuration."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.configuration.parse import Amount, check_config, group_tree, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.plan import borrow_cap, fleet_plan, format_plan, instance_equivalent
from cdk_gpu_share.core.policy.organisation import as_replayed, compilation, compile_flat, least_percent
from cdk_gpu_share.core.scenario import scenario_from_config

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


@pytest.mark.parametrize("backend, team_a, team_b, expected, unassigned", [
    # research's Q is 5 (pool 2 + 2 + 1), its bound Q + B 7. HyperPod's default cap is 50 %: team-a
    # may use 2 + 1 = 3 in all, team-b 1 + 0.5, so 1 whole: team-a takes 1 of the pool, team-b none,
    # and the last instance is nobody's. No room is left to borrow beyond the compiled guarantee.
    ("hyperpod", {}, {}, {"team-a": (3, 0, None), "team-b": (1, 0, None), "team-c": (3, None, None)}, 1),
    # team-a's own cap 200 % (2 + 4 = 6): the pool's 2 over nlp (Q 2) and team-b (Q 1) is 1 and 0
    # rounded down, the remainder to nlp: team-a 4, borrowing the least of 6 - 4 and 7 - 4.
    ("hyperpod", {"borrow_limit_percent": 200}, {},
     {"team-a": (4, 2, 200), "team-b": (1, 0, None), "team-c": (3, None, None)}, 0),
    # team-b's own absolute limit of 2 (1 + 2 = 3 in all): its bound 7 - 1 = 6 is looser.
    ("hyperpod", {"borrow_limit_percent": 200}, {"borrow_limit_percent": 300, "borrow_limit": {IT: 2}},
     {"team-a": (4, 2, 200), "team-b": (1, 2, 300), "team-c": (3, None, None)}, 0),
    # Batch's default is no cap: the tree's room as the least whole percentage that gives it,
    # 3 of 4 is 75 %, 6 of 1 is 600 %.
    ("batch_quota", {}, {}, {"team-a": (4, None, 75), "team-b": (1, None, 600), "team-c": (3, None, None)}, 0),
    # team-a's own 50 % of its own 2 lets it use 3: it takes 1 of the pool, team-b the other (its
    # Q would give it none), and team-a borrows nothing more (0 %); team-b 5 of 2 is 250 %.
    ("batch_quota", {"borrow_limit_percent": 50}, {},
     {"team-a": (3, None, 0), "team-b": (2, None, 250), "team-c": (3, None, None)}, 0),
    # Both capped: one instance of the pool is left unassigned.
    ("batch_quota", {"borrow_limit_percent": 50}, {"borrow_limit_percent": 50},
     {"team-a": (3, None, 0), "team-b": (1, None, 0), "team-c": (3, None, None)}, 1),
    # A team that never borrows takes no pool: the whole pool goes to team-a.
    ("batch_quota", {}, {"sharing": "lend"}, {"team-a": (4, None, 75), "team-b": (1, None, None),
                                              "team-c": (3, None, None)}, 0),
])
def test_the_compiled_flat_configuration(backend, team_a, team_b, expected, unassigned):
    raw = org(backend, **team_b)
    raw["teams"][0].update(team_a)
    config = parse_config(raw)
    assert flat(config, backend) == expected
    assert compile_flat(config, backend).unassigned.get(IT, 0) == unassigned


@pytest.mark.parametrize("guarantee, percent, expected", [
    (3, 1, 34), (4, 3, 75), (1, 6, 600), (2, 5, 250), (3, 0, 0), (0, 5, 0),
    # 150 instances: 1 % is 1 instance (floor 1.5), 2 % is 3: no percentage gives 2, 1 % stays below.
    (150, 2, 1), (150, 3, 2),
])
def test_the_least_whole_percentage_that_gives_the_instances(guarantee, percent, expected):
    assert least_percent(guarantee, percent) == expected


def test_a_batch_team_never_uses_more_than_its_own_cap_lets_it():
    """A team with borrow_limit_percent 50 of its own 2 instances, under a group pool of 6: the
    compiled share used to keep 50 % of the compiled 8, letting it use 12 where it may use 3."""
    raw = {"batch_quota": {"capacity": {IT: 12}},
           "groups": [{"name": "lab", "guarantee": {IT: 6}}],
           "teams": [{"name": "team-a", "group": "lab", "guarantee": {IT: 2}, "borrow_limit_percent": 50},
                     {"name": "team-b", "group": "lab", "guarantee": {IT: 2}, "sharing": "lend"}]}
    compiled = compile_flat(parse_config(raw), "batch_quota")
    team_a = compiled.config.team("team-a")
    assert team_a.guarantee[IT].instances == 3 and team_a.borrow_limit_percent == 0
    assert compiled.unassigned == {IT: 5}  # team-b lends and never borrows: nobody can take the rest


def test_a_hyperpod_guarantee_in_accelerators_gets_its_share_in_accelerators():
    """A pool of one p5 (8 GPUs) to a team guaranteed 4 accelerators: 12 accelerators, not
    {Count: 1, Accelerators: 4} (read as 4 GPUs by the replay where HyperPod deploys 12)."""
    p5 = "ml.p5.48xlarge"
    raw = {"hyperpod": {"capacity": {p5: 4}, "cluster_arn": ARN},
           "groups": [{"name": "lab", "guarantee": {p5: 1}}],
           "teams": [{"name": "team-a", "group": "lab", "guarantee": {p5: {"accelerators": 4}},
                      "borrow_limit_percent": 300}]}
    config = parse_config(raw)
    team_a = compile_flat(config, "hyperpod").config.team("team-a")
    assert team_a.guarantee[p5] == Amount(accelerators=12)
    assert team_a.borrow_limit[p5] == Amount(accelerators=4)  # its own 4 + 300 % is 16 in all
    scenario = scenario_from_config(as_replayed(config, "hyperpod", "compiled"), "hyperpod")
    assert scenario["teams"][0]["guarantee"] == {"gpu": 12}
    assert scenario["teams"][0]["borrow_limit"] == {"gpu": 4}


# -- the property: over random trees, no compiled figure is more than the tree allows.

TYPES = {"hyperpod": ("ml.g5.12xlarge", 4), "batch_quota": (IT, 1)}


@st.composite
def trees(draw, backend: str) -> dict:
    it, per = TYPES[backend]
    n_groups = draw(st.integers(1, 4))
    groups = []
    for i in range(n_groups):
        group = {"name": f"g{i}"}
        if i and draw(st.booleans()):
            group["parent"] = f"g{draw(st.integers(0, i - 1))}"
        if draw(st.booleans()):
            group["guarantee"] = {it: draw(st.integers(0, 6))}
        if draw(st.booleans()):
            group["borrow_limit"] = {it: draw(st.integers(0, 6))}
        groups.append(group)
    teams = []
    for i in range(n_groups + draw(st.integers(0, 4))):
        team: dict = {"name": f"t{i}", "guarantee": {it: draw(st.integers(1, 4))},
                      "sharing": draw(st.sampled_from(["lend_and_borrow", "lend_and_borrow", "lend", "reserve"]))}
        if backend == "hyperpod" and draw(st.booleans()):
            team["guarantee"] = {it: {"accelerators": draw(st.integers(1, 4 * per))}}
        if i < n_groups or draw(st.booleans()):
            team["group"] = f"g{i if i < n_groups else draw(st.integers(0, n_groups - 1))}"
        if team["sharing"] == "lend_and_borrow" and draw(st.booleans()):
            low = 0 if backend == "hyperpod" else -1
            team["borrow_limit_percent"] = draw(st.integers(low, 400))
        if backend == "hyperpod" and team["sharing"] == "lend_and_borrow" and draw(st.booleans()):
            team["borrow_limit"] = {it: draw(st.integers(0, 4))}
        teams.append(team)
    total = sum(g.get("guarantee", {}).get(it, 0) for g in groups) + 4 * len(teams)
    section = {"capacity": {it: total}, **({"cluster_arn": ARN} if backend == "hyperpod" else {})}
    return {backend: section, "groups": groups, "teams": teams}


def _most(team, backend: str, it: str, amount) -> float:
    """The most ``team`` may use on ``it`` with ``amount`` guaranteed, as the backend reads it (instances)."""
    g = instance_equivalent(it, amount)
    cap = borrow_cap(team, it, g, backend)
    return math.inf if cap is None else g + cap


@pytest.mark.parametrize("backend", [b for b in ("hyperpod", "batch_quota") if compilation(b) == "approximate"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_compiled_share_lets_a_team_use_more_than_the_tree(backend, data):
    raw = data.draw(trees(backend))
    it, _ = TYPES[backend]
    config = parse_config(raw)
    tree = group_tree(config, backend)
    compiled = compile_flat(config, backend)
    assert check_config(compiled.config) == []
    total = 0.0
    full = set()
    # The split counts accelerators where a team counts them (HyperPod), else whole instances.
    unit = 1 / TYPES[backend][1] if any(t.guarantee[it].accelerators is not None for t in config.teams) else 1
    for team in config.teams:
        deployed = compiled.config.team(team.name)
        own = _most(team, backend, it, team.guarantee[it])
        most = _most(deployed, backend, it, deployed.guarantee[it])
        assert most <= own + 1e-9, (team.name, most, own)
        assert most <= tree.least_bound(team.name, it) + 1e-9, (team.name, most, tree.least_bound(team.name, it))
        g = instance_equivalent(it, deployed.guarantee[it])
        total += g
        if g + unit > own + 1e-9:  # its own cap leaves it no whole unit more
            full.add(team.name)
    pools = sum(tree.groups[g].guarantee.get(it, 0) for g in tree.groups)
    own_total = sum(tree.quota(t).get(it, 0) for t in tree.team_group)
    left = compiled.unassigned.get(it, 0)
    assert total == pytest.approx(own_total + pools - left)
    if left:  # only caps leave a pool unassigned: below some pool, every team is full or under a full group
        under = {g: sum(instance_equivalent(it, compiled.config.team(t).guarantee[it])
                        for t in tree.team_group if g in tree.path(t)) for g in tree.groups}
        blocked = {g for g in tree.groups if under[g] + unit > tree.bound(g, it) + 1e-9}
        assert any(tree.groups[p].guarantee.get(it, 0) and
                   all(t in full or blocked & set(tree.path(t)[:tree.path(t).index(p) + 1])
                       for t in tree.team_group if p in tree.path(t)) for p in tree.groups)


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
    # team-a's own cap (HyperPod's default 50 %) lets it use 3: it takes 1 of the pool and borrows nothing.
    assert ("  compiled team-a on ml.g5.xlarge: guarantee 2 instances (2 GPUs) -> 3 instances (3 GPUs), may borrow"
            " 1 instance (1 GPU) -> nothing (its groups' least bound 7 instances (7 GPUs))") in text
    # The table shows what is deployed, the tree's figure beside it; so does the fleet line.
    assert "  as deployed (the compiled shares), the tree's figure beside where it differs:" in text
    row = next(line for line in text.splitlines() if line.split()[:1] == ["team-a"])
    assert row.split()[2:] == ["3", "instances;", "tree", "2", "instances", "(2", "GPUs)", "lend_and_borrow",
                               "nothing;", "tree", "1", "instance", "(1", "GPU)", "3", "instances", "(3", "GPUs)"]
    assert ("  fleet ml.g5.xlarge: capacity 10 instances (10 GPUs), guaranteed 7 instances (7 GPUs) as deployed (the"
            " tree's quota 8 instances (8 GPUs), of which 1 instance (1 GPU) unassigned), unguaranteed 3 instances"
            " (3 GPUs)") in text
    assert tree["unassigned"] == {IT: 1}
    assert ("  unassigned on ml.g5.xlarge: 1 instance (1 GPU) of the groups' pools, which no team below them may"
            " use under its own borrow cap or its groups' borrow limits") in text


def test_plan_without_groups_has_no_tree():
    raw = org("hyperpod")
    del raw["groups"]
    for t in raw["teams"]:
        t.pop("group", None)
    assert "tree" not in fleet_plan(parse_config(raw))["backends"]["hyperpod"]
    assert "tree (" not in format_plan(fleet_plan(parse_config(raw)))


def _files(tmp_path, backend):
    config = tmp_path / "org.json"
    raw = org(backend)
    raw["teams"][0]["borrow_limit_percent"] = 200  # team-a may use 6: the pool of 2 goes to it
    config.write_text(json.dumps(raw))
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
