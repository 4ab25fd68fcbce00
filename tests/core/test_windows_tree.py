"""Time windows in a tree of groups: each team's values in force at each instant, a group's quota
summed again from them at each boundary, its pool the same at every hour."""

from __future__ import annotations

import contextlib
import re
from datetime import datetime, timezone
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.simulate.engine import _Sim
from tests.builders import examples, group, team

MONDAY = datetime(2026, 1, 5, tzinfo=timezone.utc)
#: Open on Mondays from 01:00 to 02:00 UTC: trace seconds 3600 to 7200 from MONDAY.
HOUR = {"name": "hour", "days": ["mon"], "start": "01:00", "end": "02:00"}
HEADER = "job_id,team,submit_time,duration_s,gpus"


@contextlib.contextmanager
def ends_in_time(jobs, *, weeks: int = 0):
    """Fail a replay whose planner still ticks long after any end these jobs allow (the last
    arrival, a hundred times their whole work, and ``weeks`` weeks of waiting for a window)."""
    horizon = max(j.submit_time for j in jobs) + 100 * sum(j.duration_s for j in jobs) + 3600 + weeks * 8 * 86400
    tick = _Sim._tick

    def bounded(self, t, **kw):
        if t > horizon:
            raise AssertionError(f"the replay still ticks at {t} s, past {horizon} s: it would never end")
        tick(self, t, **kw)

    with mock.patch.object(_Sim, "_tick", bounded):
        yield


def replay(raw: dict, rows: list[str], mode: str = "share+reclaim", **kw):
    scenario = sim.parse_scenario(raw)
    jobs = sim.parse_jobs([HEADER, *rows], scenario)
    with ends_in_time(jobs, weeks=1):
        return sim.simulate(scenario, jobs, mode, origin=MONDAY, **kw)


def outcomes(result) -> dict:
    return {o.id: (o.final_start, o.completion, o.stops) for o in result.outcomes}


def without_windows(raw: dict) -> dict:
    plain = {k: v for k, v in raw.items() if k != "windows"}
    plain["teams"] = [{k: v for k, v in t.items() if k != "windows"} for t in raw["teams"]]
    return plain


# -- at a boundary, by hand ----------------------------------------------------------------------


def siblings(reclaim_after: int = 0) -> dict:
    """3 GPUs: group g with a pool of 1 over a (2, then 1 in the hour) and b (0, then 1)."""
    return {"capacity": {"gpu": 3}, "windows": [HOUR],
            "settings": {"reclaim_after_seconds": reclaim_after},
            "groups": [group("g", 1)],
            "teams": [team("a", 2, group="g", windows={"hour": {"guarantee": {"gpu": 1}}}),
                      team("b", 0, group="g", windows={"hour": {"guarantee": {"gpu": 1}}})]}


SIBLING_JOBS = ["a1,a,0,7200,2", "a2,a,0,7200,1", "b1,b,1800,600,1"]


def test_a_lower_guarantee_makes_a_teams_running_jobs_victims_for_a_siblings_entitled_job() -> None:
    # a runs 3 GPUs (its 2 and the pool). b1 asks for 1 at 1800: b has no guarantee, and g is at
    # its quota (3 of 3), so b1 is entitled nowhere and waits. At 3600 a's guarantee drops to 1
    # and b's rises to 1: b1 is within b's guarantee, a uses 3 above its 1 (the side of a below
    # g, where b and a meet), so the youngest of a's jobs (a2, by id) is stopped at the
    # boundary's tick. b1 runs 3600-4200; a2 restarts from zero at 4200 on the room b1 left.
    result = replay(siblings(), SIBLING_JOBS)
    assert outcomes(result) == {"a1": (0.0, 7200.0, 0), "a2": (4200.0, 11400.0, 1), "b1": (3600.0, 4200.0, 0)}
    assert {o.id: o.owed_s for o in result.outcomes}["b1"] == 0.0
    # Without the window b1 waits for a's jobs to end.
    plain = sim.simulate(sim.parse_scenario(without_windows(siblings())),
                         sim.parse_jobs([HEADER, *SIBLING_JOBS], sim.parse_scenario(siblings())), "share+reclaim")
    assert outcomes(plain)["b1"] == (7200.0, 7800.0, 0) and plain.preemptions == 0


def test_reclaim_after_counts_from_the_rise_in_a_tree() -> None:
    # b1 was submitted at 1800 and waits 600 s: counted from the rise at 3600, it may reclaim at
    # 4200. Its owed wait is read against the guarantee in force: 600 s (owed from 3600 only).
    result = replay(siblings(reclaim_after=600), SIBLING_JOBS)
    assert outcomes(result) == {"a1": (0.0, 7200.0, 0), "a2": (4800.0, 12000.0, 1), "b1": (4200.0, 4800.0, 0)}
    assert {o.id: o.owed_s for o in result.outcomes}["b1"] == 600.0


def rising_group() -> dict:
    """4 GPUs: group g (no pool) over a (0, then 2 in the hour) and b (0); c at the root (4, then 2)."""
    return {"capacity": {"gpu": 4}, "windows": [HOUR], "groups": [group("g")],
            "teams": [team("a", 0, group="g", windows={"hour": {"guarantee": {"gpu": 2}}}),
                      team("b", 0, group="g"),
                      team("c", 4, windows={"hour": {"guarantee": {"gpu": 2}}})]}


RISING_JOBS = ["c1,c,0,7200,4", "b1,b,1800,600,1"]


@pytest.mark.parametrize("mode", ["share+reclaim"])
def test_a_higher_guarantee_raises_its_groups_quota_and_reclaims_at_once(mode: str) -> None:
    # Before 3600 g's quota is 0: b1 is entitled nowhere. At 3600 a's guarantee rises to 2, so is
    # g's quota: b1 is entitled at g, c uses 4 above its new 2 and its job is stopped at the
    # boundary's tick. b1 runs 3600-4200; c1 (4 GPUs) starts again once b1's GPU is back.
    result = replay(rising_group(), RISING_JOBS, mode)
    assert outcomes(result) == {"b1": (3600.0, 4200.0, 0), "c1": (4200.0, 11400.0, 1)}
    assert result.planner_calls >= 1
    assert {o.id: o.owed_s for o in result.outcomes}["b1"] == 0.0


def test_a_job_entitled_at_a_group_in_force_is_owed_from_the_boundary_in_share() -> None:
    # In share nothing is stopped: b1 waits for c1's end at 7200 (when the window closes, and g's
    # quota with it). It is owed from 3600, when g's quota rises, to 7200: 3600 s.
    result = replay(rising_group(), RISING_JOBS, "share")
    assert outcomes(result) == {"c1": (0.0, 7200.0, 0), "b1": (7200.0, 7800.0, 0)}
    assert {o.id: o.owed_s for o in result.outcomes}["b1"] == 3600.0


def test_the_owed_wait_reads_a_promised_entitlement_in_every_groups_quota_in_a_window() -> None:
    # b is promised 1 GPU at every hour (its objectives), its guarantee 1 outside the hour and 0 in
    # it. a1 waits in the hour behind c1: g's quota with b's promise in place of its guarantee is 1,
    # so a1 is owed from its arrival at 3700 to its start at 7200, though g's quota is 0 then.
    raw = {"capacity": {"gpu": 2}, "windows": [HOUR], "groups": [group("g")],
           "teams": [team("a", 0, group="g"),
                     team("b", 1, group="g", objectives={"entitlement": {"gpu": 1}},
                          windows={"hour": {"guarantee": {"gpu": 0}}}),
                     team("c", 1, windows={"hour": {"guarantee": {"gpu": 2}}})]}
    result = replay(raw, ["c1,c,0,7200,2", "a1,a,3700,100,1"], "share")
    assert outcomes(result)["a1"] == (7200.0, 7300.0, 0)
    assert {o.id: o.owed_s for o in result.outcomes}["a1"] == 3500.0


def test_a_job_that_only_the_base_admits_waits_for_it_with_nothing_running() -> None:
    # In the hour, b may borrow nothing beyond its 0 (its cap 0 %); outside it, anything. b1 arrives
    # at 3700 with nothing running: it starts when the hour closes, not "never".
    raw = {"capacity": {"gpu": 2}, "windows": [HOUR], "groups": [group("g")],
           "teams": [team("a", 2, group="g"),
                     team("b", 0, group="g", windows={"hour": {"borrow_limit_percent": 0}})]}
    result = replay(raw, ["b1,b,3700,100,1"], "share")
    assert outcomes(result) == {"b1": (7200.0, 7300.0, 0)}


@pytest.mark.parametrize("groups", [[], [group("g")]])
def test_a_replay_that_starts_inside_a_window_has_the_base_back_when_it_closes(groups: list) -> None:
    # From Monday 01:30 a (which lends and never borrows) has no guarantee until 02:00, trace second
    # 1800: its job starts then, on its own guarantee again.
    raw = {"capacity": {"gpu": 2}, "windows": [HOUR], "groups": groups,
           "teams": [team("a", 2, sharing="lend", windows={"hour": {"guarantee": {"gpu": 0}}},
                          **({"group": "g"} if groups else {})),
                     team("b", 0, **({"group": "g"} if groups else {}))]}
    scenario = sim.parse_scenario(raw)
    for mode in sim.MODES:
        result = sim.simulate(scenario, sim.parse_jobs([HEADER, "a1,a,0,100,2"], scenario), mode,
                              origin=datetime(2026, 1, 5, 1, 30, tzinfo=timezone.utc))
        assert outcomes(result) == {"a1": (1800.0, 1900.0, 0)}, mode


def test_a_groups_windows_in_a_scenario_are_refused_in_one_line() -> None:
    raw = rising_group()
    raw["groups"][0]["windows"] = {"hour": {"guarantee": {"gpu": 1}}}
    with pytest.raises(ConfigError) as exc:
        sim.parse_scenario(raw)
    assert [str(p) for p in exc.value.problems] == [
        "groups[0].windows: a group's pool is the same at every hour (got {'hour': {'guarantee': {'gpu': 1}}}); "
        "give the windows to the teams below it"]


def test_a_groups_windows_in_a_config_are_refused_in_one_line() -> None:
    from cdk_gpu_share.core.configuration.parse import parse_config

    raw = platform()
    raw["groups"][0]["windows"] = {"night": {"guarantee": {IT: 1}}}
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert [str(p) for p in exc.value.problems] == [
        "groups[0] (research).windows: a group's pool is the same at every hour (got {'night': {'guarantee': "
        "{'ml.g5.xlarge': 1}}}); give the windows to the teams below it"]


def test_guarantees_and_pools_above_the_capacity_in_a_window_are_refused() -> None:
    raw = siblings()
    raw["teams"][1]["windows"]["hour"]["guarantee"] = {"gpu": 2}
    with pytest.raises(ConfigError) as exc:
        sim.parse_scenario(raw)
    (problem,) = exc.value.problems
    assert "the groups' pools" in str(problem) and "in window hour" in str(problem)
    from cdk_gpu_share.core.configuration.parse import parse_config

    raw = platform()
    raw["teams"][1]["windows"]["night"]["guarantee"] = {IT: 3}
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert [str(p) for p in exc.value.problems] == [
        "batch_quota.capacity.ml.g5.xlarge: the teams' guarantees and the groups' pools sum to 7 instances of "
        "ml.g5.xlarge, above the 6 the capacity declares in window night (got 6); raise "
        "batch_quota.capacity.ml.g5.xlarge or lower the teams' guarantees and the groups' pools"]


# -- random trees with random windows ------------------------------------------------------------

GROUPS = ("g0", "g1", "g2")


@st.composite
def windowed_trees(draw, same: bool = False):
    """1 to 3 groups, 2 to 4 teams, and one or two windows on Monday's first half hour, each team
    with its own values in each (``same``: the team's own values, written again)."""
    n_groups = draw(st.integers(1, len(GROUPS)))
    groups = [group(GROUPS[i], draw(st.sampled_from([None, 1, 2])), parent=draw(st.sampled_from([None, *GROUPS[:i]])),
                    limit=draw(st.sampled_from([None, 0, 1, 3]))) for i in range(n_groups)]
    first = draw(st.integers(0, 10))
    cut = first + draw(st.integers(1, 10))
    windows = [{"name": "w0", "days": ["mon"], "start": f"00:{first:02d}", "end": f"00:{cut:02d}"}]
    if draw(st.booleans()):
        windows.append({"name": "w1", "days": ["mon"], "start": f"00:{cut + draw(st.integers(0, 5)):02d}",
                        "end": f"00:{cut + 20:02d}"})
    teams = []
    for i in range(draw(st.integers(2, 4))):
        sharing = draw(st.sampled_from(["lend_and_borrow", "lend_and_borrow", "reserve", "lend"]))
        own = draw(st.sampled_from([0, 1, 2]))
        extra: dict = {"sharing": sharing}
        home = draw(st.sampled_from([None, *GROUPS[:n_groups]]))
        if home is not None:
            extra["group"] = home
        values = {}
        for w in windows:
            if draw(st.booleans()):
                inside = {"guarantee": {"gpu": own if same else draw(st.sampled_from([0, 1, 2, 3]))}}
                if sharing == "lend_and_borrow" and draw(st.booleans()):
                    inside["borrow_limit_percent"] = -1 if same else draw(st.sampled_from([0, 50, 100]))
                values[w["name"]] = inside
        if values:
            extra["windows"] = values
        teams.append(team(f"t{i}", own, **extra))
    used = {t.get("group") for t in teams}
    for g in groups:
        if g["name"] not in used and not any(o.get("parent") == g["name"] for o in groups):
            teams.append(team(f"x{g['name']}", 1, group=g["name"]))
    pools = sum(g.get("guarantee", {}).get("gpu", 0) for g in groups)
    most = max(sum(t.get("windows", {}).get(name, t)["guarantee"]["gpu"] for t in teams)
               for name in (None, *[w["name"] for w in windows]))
    capacity = most + pools + draw(st.sampled_from([0, 0, 1]))
    return {"capacity": {"gpu": max(capacity, 1)}, "groups": groups, "teams": teams, "windows": windows}


@st.composite
def windowed_cases(draw, same: bool = False):
    scenario = draw(windowed_trees(same))
    names = [t["name"] for t in scenario["teams"]]
    rows = [f"j{i},{draw(st.sampled_from(names))},{draw(st.integers(0, 1500))},{draw(st.integers(1, 900))},"
            f"{draw(st.integers(1, 2))},{draw(st.integers(0, 2))}" for i in range(draw(st.integers(1, 7)))]
    return scenario, rows


def _replayed(raw: dict, rows: list[str], mode: str, **kw):
    """The replay's figures, the jobs refused as input (which could never start in the base) left out."""
    scenario = sim.parse_scenario(raw)
    while True:
        try:
            jobs = sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus,priority", *rows], scenario)
            with ends_in_time(jobs, weeks=len(rows)):
                return rows, sim.simulate(scenario, jobs, mode, origin=MONDAY, **kw)
        except ConfigError as exc:
            problem = str(exc.problems[0])
            # Refused as input, never left waiting at the end of a replay.
            assert "could never start" in problem and "the replay ended" not in problem, problem
            refused = re.search(r"\(job '(j\d+)'\)", problem)
            assert refused is not None, problem
            rows = [row for row in rows if not row.startswith(refused.group(1) + ",")]
            if not rows:
                return rows, None


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windowed_cases(), st.sampled_from(sim.MODES))
def test_every_replay_of_a_tree_with_windows_ends_with_every_job_completed(case, mode):
    raw, rows = case
    rows, result = _replayed(raw, rows, mode)
    if result is not None:
        assert result.completed == result.jobs == len(rows)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windowed_cases(same=True), st.sampled_from(sim.MODES))
def test_windows_that_give_the_base_values_replay_a_tree_as_without_them(case, mode):
    raw, rows = case
    rows, result = _replayed(raw, rows, mode)
    if result is None:
        return
    scenario = sim.parse_scenario(without_windows(raw))
    plain = sim.simulate(scenario, sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus,priority", *rows],
                                                  scenario), mode)
    figures = [{k: v for k, v in r.to_dict().items() if k not in ("sim_seconds", "simulation_seconds")}
               for r in (result, plain)]
    assert figures[0] == figures[1]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windowed_cases(), st.sampled_from([0, 120]), st.sampled_from([0, 300]))
def test_the_ticks_a_windowed_tree_replay_skips_change_nothing(case, reclaim_after, min_runtime):
    # Ticks skipped as unable to choose a victim (reclaim_after_seconds counted from a rise at a
    # boundary included): every figure is the one of a replay that calls the planner at every tick.
    raw, rows = case
    raw = {**raw, "settings": {"reclaim_after_seconds": reclaim_after, "min_runtime_seconds": min_runtime}}
    rows, skipped = _replayed(raw, rows, "share+reclaim")
    if skipped is None:
        return
    every = _replayed(raw, rows, "share+reclaim", skip_idle_ticks=False)[1]
    figures = [{k: v for k, v in r.to_dict().items() if k not in ("sim_seconds", "simulation_seconds")}
               for r in (skipped, every)]
    assert figures[0] == figures[1]


# -- the compiled reading: the tree compiled once per window -------------------------------------

IT = "ml.g5.xlarge"  # one GPU an instance
ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"


def platform(backend: str = "batch_quota") -> dict:
    """6 instances: group research (a pool of 2, a borrow limit of 2) over a (2, then 1 at night)
    and b (1, then 2 at night); c (1) at the root."""
    return {
        "platform": {"name": "gpu-share"},
        "windows": [{"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00",
                     "end": "08:00"}],
        "groups": [{"name": "research", "guarantee": {IT: 2}, "borrow_limit": {IT: 2}}],
        "teams": [
            {"name": "a", "group": "research", "guarantee": {IT: 2}, "borrow_limit_percent": 100,
             "windows": {"night": {"guarantee": {IT: 1}}}},
            {"name": "b", "group": "research", "guarantee": {IT: 1}, "windows": {"night": {"guarantee": {IT: 2}}}},
            {"name": "c", "guarantee": {IT: 1}},
        ],
        backend: {"capacity": {IT: 6}, **({"cluster_arn": ARN} if backend == "hyperpod" else {})},
    }


FIELDS = ("guarantee", "borrow_limit", "borrow_limit_percent")


@pytest.mark.parametrize("backend", ["batch_quota", "hyperpod"])
def test_each_window_deploys_the_compilation_of_its_own_tree(backend: str) -> None:
    import dataclasses

    from cdk_gpu_share.core.configuration.parse import parse_config, team_in_window
    from cdk_gpu_share.core.policy.organisation import compile_flat

    config = parse_config(platform(backend))
    compiled = compile_flat(config, backend)
    assert not compiled.config.groups and compiled.config.windows == config.windows
    for window in (None, "night"):
        alone = dataclasses.replace(config, windows=(), teams=tuple(
            dataclasses.replace(team_in_window(t, window), windows={}) for t in config.teams))
        expected = compile_flat(alone, backend).config
        for member in compiled.config.teams:
            deployed = team_in_window(member, window)
            assert {k: getattr(deployed, k) for k in FIELDS} == {k: getattr(expected.team(member.name), k)
                                                                  for k in FIELDS}, (window, member.name)
        # Every window's compiled guarantees sum to the tree's quota then: the pool is split each time.
        assert sum(team_in_window(t, window).guarantee[IT].instances for t in compiled.config.teams) == 6
    assert list(compiled.windows) == ["night"]


def test_batch_quota_shares_per_window_are_the_compiled_ones() -> None:
    # The night: a 1 and b 2 in the tree, the pool of 2 split in proportion (b's Q 2 against a's 1:
    # b 1, and the remainder to the largest, b): b 4. a may borrow 100 % of its own 1; b, with no
    # cap of its own, what research's Q + B (5 + 2) leaves beyond its 4: 3, 75 % of 4.
    from cdk_gpu_share.backends.batch_quota.construct import share_values
    from cdk_gpu_share.core.configuration.parse import parse_config, team_in_window
    from cdk_gpu_share.core.policy.organisation import compile_flat

    compiled = compile_flat(parse_config(platform()), "batch_quota").config
    capacity = {IT: 6}
    night = {t.name: share_values(team_in_window(t, "night"), capacity) for t in compiled.teams}
    assert {n: (v["capacityLimits"][0]["maxCapacity"], v["resourceSharingConfiguration"].get("borrowLimit"))
            for n, v in night.items()} == {"a": (1, 100), "b": (4, 75), "c": (1, -1)}
    base = {t.name: share_values(team_in_window(t, None), capacity) for t in compiled.teams}
    assert {n: v["capacityLimits"][0]["maxCapacity"] for n, v in base.items()} == {"a": 4, "b": 1, "c": 1}


def test_hyperpod_compute_quotas_per_window_are_the_compiled_ones() -> None:
    from cdk_gpu_share.backends.hyperpod.construct import quota_values
    from cdk_gpu_share.core.configuration.parse import parse_config, team_in_window
    from cdk_gpu_share.core.policy.organisation import compile_flat

    # The night on HyperPod: b's default cap (50 % of its 2) lets it use 3 in all, so it takes one
    # instance of the pool and a (1, using 2 at most under its 100 %) the other.
    compiled = compile_flat(parse_config(platform("hyperpod")), "hyperpod").config
    night = {t.name: quota_values(team_in_window(t, "night"), {IT: 6})["ComputeQuotaConfig"] for t in compiled.teams}
    assert {n: v["ComputeQuotaResources"] for n, v in night.items()} == {
        "a": [{"InstanceType": IT, "Count": 2}], "b": [{"InstanceType": IT, "Count": 3}],
        "c": [{"InstanceType": IT, "Count": 1}]}


def test_the_compiled_replay_reads_each_windows_compilation() -> None:
    from cdk_gpu_share.core.configuration.parse import parse_config
    from cdk_gpu_share.core.policy.organisation import as_replayed
    from cdk_gpu_share.core.scenario import scenario_from_config

    config = parse_config(platform())
    data = scenario_from_config(as_replayed(config, "batch_quota", "compiled"), "batch_quota")
    assert "groups" not in data
    assert {t["name"]: t.get("windows", {}).get("night", {}).get("guarantee") for t in data["teams"]} == {
        "a": {"gpu": 1}, "b": {"gpu": 4}, "c": None}
    scenario = sim.parse_scenario(data)
    night = scenario.state_at(datetime(2026, 1, 5, 21, tzinfo=timezone.utc))
    assert sum(t.guarantee["gpu"] for t in night.teams) == 6  # the pool is not lost at night
    # The tree's own reading keeps the groups and the tree's values in the window.
    tree = scenario_from_config(as_replayed(config, "batch_quota", "tree"), "batch_quota")
    assert tree["groups"] and tree["teams"][1]["windows"] == {"night": {"guarantee": {"gpu": 2}}}


def test_simulate_compares_the_tree_and_its_compilation_with_windows(tmp_path, capsys) -> None:
    import json

    import yaml

    from cdk_gpu_share.cli import main

    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(platform()))
    trace = tmp_path / "jobs.csv"
    trace.write_text("job_id,team,submit_time,duration_s,gpus\na1,a,0,7200,2\nb1,b,1800,600,1\n")
    code = main(["simulate", "--config", str(path), "--trace", str(trace), "--compare", "--json",
                 "--origin", "2026-01-05T19:00:00Z"])
    out, err = capsys.readouterr()
    assert code == 0, err
    gap = json.loads(out)["hierarchy"]
    assert set(gap) == {"tree", "compiled"}


def test_plan_prints_each_windows_compiled_values_beside_the_trees_quota() -> None:
    from cdk_gpu_share.core.configuration.parse import parse_config, team_in_window
    from cdk_gpu_share.core.plan import fleet_plan, format_plan
    from cdk_gpu_share.core.policy.organisation import compile_flat

    config = parse_config(platform())
    plan = fleet_plan(config, now=MONDAY)
    compiled = compile_flat(config, "batch_quota").config
    for period in (plan["windows"]["base"], *plan["windows"]["windows"]):
        rows = period["backends"]["batch_quota"]["teams"]
        assert [(r["team"], r["guarantee"]) for r in rows] == [
            (t.name, float(team_in_window(t, period["name"]).guarantee[IT].instances)) for t in compiled.teams]
        assert period["backends"]["batch_quota"]["guaranteed"][IT] == {
            "instances": 6.0, "capacity": 6, "tree_guaranteed": 6.0, "unassigned": 0.0}
    text = format_plan(plan)
    assert ("    batch_quota: a 1 instance (1 GPU) (may borrow 1 instance (1 GPU)), b 4 instances (4 GPUs)"
            in text)
    assert "guaranteed ml.g5.xlarge 6 of 6 as deployed (the tree's quota 6)" in text


@st.composite
def windowed_platforms(draw):
    """A valid config with 1 or 2 groups, 2 or 3 teams and one window, on Batch or HyperPod."""
    backend = draw(st.sampled_from(["batch_quota", "hyperpod"]))
    groups = [{"name": "g0", "guarantee": {IT: draw(st.integers(0, 2))}}]
    if draw(st.booleans()):
        groups.append({"name": "g1", "parent": draw(st.sampled_from([None, "g0"])),
                       "guarantee": {IT: draw(st.integers(0, 2))}})
        if groups[1]["parent"] is None:
            del groups[1]["parent"]
    for g in groups:
        limit = draw(st.sampled_from([None, 0, 1, 3]))
        if limit is not None:
            g["borrow_limit"] = {IT: limit}
        if not g["guarantee"][IT]:
            del g["guarantee"]
    teams = []
    for i in range(draw(st.integers(2, 3))):
        t: dict = {"name": f"t{i}", "guarantee": {IT: draw(st.integers(1, 2))},
                   "group": draw(st.sampled_from([g["name"] for g in groups]))}
        percent = draw(st.sampled_from([None, 0, 50, 100, 200]))
        if percent is not None:
            t["borrow_limit_percent"] = percent
        if draw(st.booleans()):
            inside: dict = {"guarantee": {IT: draw(st.integers(1, 3))}}
            if draw(st.booleans()):
                inside["borrow_limit_percent"] = draw(st.sampled_from([0, 50, 100]))
            t["windows"] = {"night": inside}
        teams.append(t)
    for g in groups:  # every group holds a team
        if not any(t["group"] == g["name"] for t in teams) and not any(o.get("parent") == g["name"] for o in groups):
            teams.append({"name": f"x{g['name']}", "guarantee": {IT: 1}, "group": g["name"]})
    pools = sum(g.get("guarantee", {}).get(IT, 0) for g in groups)
    most = max(sum(t["guarantee"][IT] for t in teams),
               sum(t.get("windows", {}).get("night", t)["guarantee"][IT] for t in teams))
    section: dict = {"capacity": {IT: most + pools + draw(st.integers(0, 1))}}
    if backend == "hyperpod":
        section["cluster_arn"] = ARN
    raw = {"platform": {"name": "gpu-share"}, "groups": groups, "teams": teams, backend: section,
           "windows": [{"name": "night", "days": ["mon"], "start": "20:00", "end": "08:00"}]}
    return backend, raw


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windowed_platforms())
def test_a_compiled_replays_window_is_the_compilation_of_that_windows_tree_alone(case):
    # In GPUs, as the compiled replay reads them: each window's values are those of the tree with
    # the window's values compiled on its own, and the base's those of the tree without windows.
    import dataclasses

    from cdk_gpu_share.core.configuration.parse import parse_config, team_in_window
    from cdk_gpu_share.core.policy.organisation import as_replayed, compile_flat
    from cdk_gpu_share.core.scenario import scenario_from_config

    backend, raw = case
    try:
        config = parse_config(raw)
    except ConfigError:
        return  # a tree the config refuses (a backend's minimum, a bound below a guarantee...)
    scenario = sim.parse_scenario(scenario_from_config(as_replayed(config, backend, "compiled"), backend))
    night = datetime(2026, 1, 5, 21, tzinfo=timezone.utc)
    for window, state in ((None, scenario.state), ("night", scenario.state_at(night))):
        alone = dataclasses.replace(config, windows=(), teams=tuple(
            dataclasses.replace(team_in_window(t, window), windows={}) for t in config.teams))
        expected = sim.parse_scenario(scenario_from_config(compile_flat(alone, backend).config, backend))
        assert state.teams == expected.state.teams, window
