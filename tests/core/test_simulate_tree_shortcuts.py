"""The replay of a tree takes shortcuts that change no figure: each one is switched off in turn and
every job's outcome compared, on random trees (groups with pools and limits, reserve and lending
teams, entitlements, fractional jobs) and on the organisation example over the Alibaba trace."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core import frozen
from cdk_gpu_share.core import scenario as sc
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.policy.organisation import as_replayed
from cdk_gpu_share.core.simulate import dispatch, engine, planner_view, tree_dispatch
from cdk_gpu_share.core.simulate.inputs import Scenario
from tests.builders import examples, group, team
from tests.core.test_simulate_tree import ends_in_time
from tests.core.test_simulate_tree_properties import trees
from tests.data import alibaba_trace

ROOT = Path(__file__).resolve().parents[2]
HEADER = "job_id,team,submit_time,duration_s,gpus,priority"

#: Each shortcut: the module and the switch that turns it off.
SHORTCUTS = {"owed thresholds per node": (engine, "OWED_BY_NODE"),
             "no planner without a candidate": (planner_view, "CHECK_CANDIDATES"),
             "quiet ticks passed over": (engine, "SKIP_QUIET_TICKS"),
             "levels at groups": (tree_dispatch, "LEVELS_AT_GROUPS"),
             "levels by bisection": (tree_dispatch, "LEVELS_BY_BISECT"),
             "levels remembered": (tree_dispatch, "LEVELS_REMEMBERED"),
             "owed levels as entitled levels": (tree_dispatch, "OWED_AS_ENTITLED"),
             "no flat heaps in the tree's index": (tree_dispatch, "FLAT_HEAPS_UNUSED"),
             "hopeless ticks passed over": (engine, "PASS_HOPELESS_TICKS"),
             "borrowers and bounds kept": (tree_dispatch, "ABOVE_KEPT"),
             "quotas kept": (tree_dispatch, "QUOTAS_KEPT"),
             "planner specs made without __init__": (frozen, "FAST")}


@contextlib.contextmanager
def without(*names: str) -> Iterator[None]:
    """The named shortcuts switched off for the block."""
    saved = [(getattr(*SHORTCUTS[n]), SHORTCUTS[n]) for n in names]
    try:
        for _, (module, switch) in saved:
            setattr(module, switch, False)
        yield
    finally:
        for value, (module, switch) in saved:
            setattr(module, switch, value)


def figures(result: sim.SimResult) -> dict:
    """Every figure of a replay, each job's outcome included, but its wall time."""
    out = {k: v for k, v in result.to_dict().items() if k != "sim_seconds"}
    out["outcomes"] = [dataclasses.asdict(o) for o in result.outcomes]
    out["series"] = (result.series_log, result.pending_log, result.preemption_events)
    return out


@st.composite
def busy_trees(draw):
    """A tree of :func:`trees` (now and then its teams without groups), some teams promised more
    than their guarantee, reclaim settings, and up to 14 jobs of whole and fractional GPUs arriving
    close together."""
    raw = draw(trees())
    for t in raw["teams"]:
        promised = draw(st.sampled_from([None, None, 1, 2, 3]))
        if promised is not None and promised <= raw["capacity"]["gpu"]:
            t["objectives"] = {"entitlement": {"gpu": promised}}
    raw["settings"] = {"reclaim_after_seconds": draw(st.sampled_from([0, 120])),
                       "min_runtime_seconds": draw(st.sampled_from([0, 300])),
                       "victim_order": draw(st.sampled_from(["youngest", "checkpoint"]))}
    if draw(st.booleans()) and draw(st.booleans()):  # now and then the same teams without groups
        raw["groups"] = []
        for t in raw["teams"]:
            t.pop("group", None)
    names = [t["name"] for t in raw["teams"]]
    rows = [f"j{i},{draw(st.sampled_from(names))},{draw(st.integers(0, 400))},{draw(st.integers(30, 900))},"
            f"{draw(st.sampled_from(['1', '1', '2', '0.5', '0.25', '1.5']))},{draw(st.integers(0, 2))}"
            for i in range(draw(st.integers(1, 14)))]
    return raw, rows


def replays(scenario: Scenario, rows: list[str], mode: str, off: tuple[str, ...]) -> tuple[dict, dict] | None:
    """The figures of the replay with every shortcut and with ``off`` switched off (None: a job
    could never start, the input's problem)."""
    try:
        jobs = sim.parse_jobs([HEADER, *rows], scenario)
        with ends_in_time(jobs):
            fast = sim.simulate(scenario, jobs, mode)
            with without(*off):
                slow = sim.simulate(scenario, jobs, mode)
    except ConfigError:
        return None
    return figures(fast), figures(slow)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_trees(), st.sampled_from(sim.MODES), st.sampled_from(sorted(SHORTCUTS)))
def test_each_shortcut_changes_no_figure_of_a_random_tree(case, mode, shortcut):
    raw, rows = case
    pair = replays(sim.parse_scenario(raw), rows, mode, (shortcut,))
    if pair is not None:
        assert pair[0] == pair[1]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_trees())
def test_all_shortcuts_together_change_no_figure_of_a_random_tree(case):
    raw, rows = case
    pair = replays(sim.parse_scenario(raw), rows, "share+reclaim", tuple(SHORTCUTS))
    if pair is not None:
        assert pair[0] == pair[1]


#: What a shortcut saves: the function it spares (module or class, and its name), called less often
#: with the shortcut than without it.
SPARED = {"hopeless ticks passed over": (engine._Sim, "_tick"),
          "levels remembered": (tree_dispatch, "_level"),
          "owed levels as entitled levels": (tree_dispatch.TreeUsage, "promised_quota"),
          "no flat heaps in the tree's index": (dispatch.DispatchIndex, "_index"),
          "quotas kept": (hierarchy.Tree, "quota")}


def calls(owner: object, name: str, scenario: Scenario, jobs: list) -> int:
    """How often ``owner.name`` is called in the ``share+reclaim`` replay of ``jobs``."""
    original = getattr(owner, name)
    count = 0

    def counted(*args, **kw):
        nonlocal count
        count += 1
        return original(*args, **kw)
    with mock.patch.object(owner, name, counted):
        sim.simulate(scenario, jobs, "share+reclaim")
    return count


def test_each_shortcut_spares_work_while_a_job_waits_that_no_stop_could_serve():
    # o runs one job after another, two at a time for half of each 100 s, borrowing t's idle GPU.
    # t's job of 2 GPUs is beyond its guarantee and its group's quota (entitled nowhere): it waits
    # for the pool to drain, and no stop could be made for it, whenever a tick came.
    scenario = sim.parse_scenario({"capacity": {"gpu": 2}, "groups": [group("g")],
                                   "teams": [team("t", 1, group="g"), team("o", 1)]})
    rows = ["t1,t,5,100,2,0", *(f"o{i},o,{i * 100},150,1,0" for i in range(40))]
    jobs = sim.parse_jobs([HEADER, *rows], scenario)
    assert sim.simulate(scenario, jobs, "share+reclaim").outcomes[0].final_start == 4_050
    spared = {}
    for shortcut, (owner, name) in SPARED.items():
        fast = calls(owner, name, scenario, jobs)
        with without(shortcut):
            slow = calls(owner, name, scenario, jobs)
        spared[shortcut] = (fast, slow)
    assert all(fast < slow for fast, slow in spared.values()), spared
    assert spared["hopeless ticks passed over"][0] == 0  # no tick visited: none could call the planner
    assert spared["no flat heaps in the tree's index"][0] == 0


def test_the_organisation_example_over_the_alibaba_trace_is_the_same_job_for_job(tmp_path):
    from cdk_gpu_share.cli import main

    openb = alibaba_trace()
    converted = tmp_path / "openb.csv"
    assert main(["trace", "convert", "--from", "alibaba-openb", str(openb), "-o", str(converted)]) == 0
    config = load_config(ROOT / "examples" / "organisation.yaml")
    names = [t.name for t in config.teams]
    with converted.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows):  # the trace's jobs given to the example's teams in turn
        row["team"] = names[i % len(names)]
    backend = sc.choose_backend(config, None)
    scenario = sim.parse_scenario(sc.scenario_from_config(as_replayed(config, backend, "tree"), backend))
    jobs = sim.parse_jobs([",".join(rows[0]), *(",".join(r.values()) for r in rows)], scenario)
    fast = sim.simulate(scenario, jobs, "share+reclaim")
    with without(*SHORTCUTS):
        slow = sim.simulate(scenario, jobs, "share+reclaim")
    assert fast.completed == len(rows)
    assert figures(fast) == figures(slow)

