"""The advisor with time windows (core.advise.windows, core.advise.window_search): each team's
values per window decided, the advice reproduced by the simulator, the same answer whatever the
executor, never worse than the best static advice, and the refusals in one line."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest

from cdk_gpu_share.core import advise as adv
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.advise.space import Candidate, Choice
from cdk_gpu_share.core.advise.windows import WindowedCandidate, window_moves
from cdk_gpu_share.core.errors import ConfigError

MONDAY = datetime(2026, 1, 5, tzinfo=timezone.utc)
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
#: A small budget keeps each advice to a few seconds; the properties hold at any budget.
BUDGET = 80


def clock_scenario(objectives: dict | None = None) -> dict:
    """Three teams of an 8-GPU pool: a submits at night, b in office hours, c at any hour."""
    objectives = objectives or {"a": {"wait_p95_minutes": 45}, "b": {"wait_p95_minutes": 45}}
    return {
        "capacity": {"gpu": 8},
        "settings": {"reclaim_after_seconds": 60, "min_runtime_seconds": 0},
        "windows": [{"name": "night", "days": EVERY_DAY, "start": "20:00", "end": "08:00"},
                    {"name": "weekend", "days": ["sat"], "start": "10:00", "end": "12:00"}],
        "teams": [{"name": name, "guarantee": {"gpu": g}, **({"objectives": objectives[name]} if name in objectives
                                                             else {})}
                  for name, g in (("a", 3), ("b", 3), ("c", 2))],
    }


def clock_rows(seed: int = 3, days: int = 2) -> list[tuple]:
    rng = random.Random(seed)
    rows = []
    for d in range(days):
        for k in range(6):
            rows.append((f"a{d}_{k}", "a", d * 86400 + 20 * 3600 + rng.randrange(0, 10 * 3600, 60),
                         rng.choice((1800, 3600, 7200)), rng.choice((1, 2, 4))))
            rows.append((f"b{d}_{k}", "b", d * 86400 + 9 * 3600 + rng.randrange(0, 9 * 3600, 60),
                         rng.choice((1800, 3600, 7200)), rng.choice((1, 2, 4))))
            rows.append((f"c{d}_{k}", "c", d * 86400 + rng.randrange(0, 24 * 3600, 60), 1800, 1))
    return rows


def study_of(data: dict, rows: list[tuple] | None = None, origin: datetime | None = MONDAY) -> adv.Study:
    parsed = sim.parse_scenario(data)
    jobs = sim.trace_from_rows(rows or clock_rows(), parsed)
    return adv.study_of(data, jobs, poll=60.0, origin=origin)


def advise(study: adv.Study, executor=None, windows=None) -> adv.Advice:
    space = adv.space_of(study, step=1, fleet="fixed")
    return adv.advise(study, space, executor, budget=BUDGET, windows=windows)


def test_the_advice_decides_values_per_window_and_the_simulator_reproduces_it():
    study = study_of(clock_scenario())
    advice = advise(study)
    doc = adv.advice_json(advice)
    assert [w["name"] for w in doc["windows"]] == ["night", "weekend"] and doc["origin"] == MONDAY.isoformat()
    for team in doc["teams"].values():
        assert set(team["windows"]) == {"night", "weekend"} and set(team["was"]["windows"]) == {"night", "weekend"}
    for w in doc["windows"]:  # a row per window: the advised guarantees' sum within the capacity
        assert w["guarantees"]["gpu"] == sum(t["windows"][w["name"]]["guarantee"]["gpu"] for t in doc["teams"].values())
        assert w["guarantees"]["gpu"] <= doc["capacity"]["gpu"]
    written = adv.advised_scenario(study, advice.best.candidate)
    assert written["windows"] == clock_scenario()["windows"]
    for team in written["teams"]:  # the values the advice gives in each window, and only those
        for name in ("night", "weekend"):
            decided = doc["teams"][team["name"]]["windows"][name]["guarantee"]["gpu"]
            own = team["guarantee"]["gpu"]
            assert team.get("windows", {}).get(name, {}).get("guarantee", {"gpu": own})["gpu"] == decided
    # simulate on the written scenario gives the advice's figures: the replay reads the values in
    # force at each instant, the owed wait against the entitlement
    replayed = sim.simulate(sim.parse_scenario(written), study.jobs, sim.RECLAIM, origin=MONDAY)
    assert replayed.wait_gpu_hours + replayed.lost_gpu_seconds / 3600 == doc["regret_gpu_hours"]
    judged = sim.evaluate_run(sim.parse_scenario(written), study.jobs, replayed, poll_seconds=60.0)
    assert judged == {name: t["objectives"] for name, t in doc["teams"].items() if t["objectives"]}


def test_the_windowed_advice_ranks_at_least_as_well_as_the_best_static_one():
    advice = advise(study_of(clock_scenario()))
    doc = adv.advice_json(advice)
    static = doc["static"]
    assert set(static["teams"]) == {"a", "b", "c"}
    if static["feasible"]:
        assert doc["feasible"] and doc["regret_gpu_hours"] <= static["regret_gpu_hours"]
    elif not doc["feasible"]:
        assert doc["input"] and (advice.best.worst_ratio <= (static["worst_ratio"] or float("inf")))


def test_the_answer_is_the_same_byte_for_byte_with_local_processes():
    from cdk_gpu_share.core.advise.executors import Processes

    study = study_of(clock_scenario())
    alone = json.dumps(adv.advice_json(advise(study)))
    pool = Processes(study, 2)
    try:
        shared = json.dumps(adv.advice_json(advise(study, pool)))
    finally:
        pool.close()
    assert alone == shared


def test_windows_names_the_only_windows_the_advice_gives_values_in():
    study = study_of(clock_scenario())
    advice = advise(study, windows=["weekend"])
    doc = adv.advice_json(advice)
    assert [w["advised"] for w in doc["windows"]] == [False, True]
    for team in doc["teams"].values():  # the night holds the teams' own values
        assert team["windows"]["night"]["guarantee"] == team["guarantee"]
    written = adv.advised_scenario(study, advice.best.candidate)
    assert all("night" not in t.get("windows", {}) for t in written["teams"])


def test_an_unknown_window_is_refused_in_one_line_naming_windows():
    with pytest.raises(ConfigError) as exc:
        advise(study_of(clock_scenario()), windows=["lunch"])
    assert [str(p) for p in exc.value.problems] == [
        "--windows: is not a window of the input (got 'lunch'); name windows the input declares under windows: "
        "(night, weekend)"]


def test_a_scenario_with_windows_and_no_origin_is_refused_naming_origin():
    with pytest.raises(ConfigError) as exc:
        study_of(clock_scenario(), origin=None)
    assert [p.field for p in exc.value.problems] == ["--origin"]


def test_a_team_whose_promise_would_follow_the_advice_is_refused_until_its_entitlement_is_given():
    data = clock_scenario()
    data["teams"][0]["windows"] = {"night": {"guarantee": {"gpu": 5}}}
    data["teams"][1]["windows"] = {"night": {"guarantee": {"gpu": 1}}}
    with pytest.raises(ConfigError) as exc:
        study_of(data)
    assert [p.field for p in exc.value.problems] == ["teams[0].objectives.entitlement",
                                                     "teams[1].objectives.entitlement"]
    assert all("give the team objectives.entitlement" in str(p) for p in exc.value.problems)
    for team in data["teams"][:2]:
        team["objectives"] = {**team["objectives"], "entitlement": {"gpu": 3}}
    study = study_of(data)
    # The input as given (its values in the windows) is what the advice is counted against.
    space = adv.space_of(study, step=1, fleet="fixed")
    assert isinstance(space.input, WindowedCandidate)
    assert [ch.guarantee for ch in space.input.windowed[0]] == [5.0, 1.0, 2.0]
    assert [ch.guarantee for ch in space.input.windowed[1]] == [3.0, 3.0, 2.0]


def test_windows_with_groups_are_refused_in_one_line():
    data = clock_scenario()
    data["groups"] = [{"name": "lab"}]
    for team in data["teams"]:
        team["group"] = "lab"
    with pytest.raises(ConfigError) as exc:
        study_of(data)
    assert len(exc.value.problems) == 1 and exc.value.problems[0].field == "windows"


def test_window_moves_keep_each_window_within_the_capacity_and_above_the_backends_least():
    study = study_of(clock_scenario())
    space = adv.space_of(study, step=1, fleet="fixed", least=1.0)
    base = (Choice(3.0, "lend_and_borrow", -1), Choice(3.0, "lend_and_borrow", -1), Choice(2.0, "lend_and_borrow", -1))
    start = WindowedCandidate(8.0, base, (base, base))
    moves = window_moves(space, start, [0, 1, None], range(3))
    assert moves and len(set(moves)) == len(moves)
    for c in moves:
        for row in (c.choices, *c.windowed):
            assert sum(ch.guarantee for ch in row) <= 8 and min(ch.guarantee for ch in row) >= 1
    # each move changes one slot only: the night, the weekend, or the teams' own values
    changed = {tuple(k for k, (row, was) in enumerate(zip((c.choices, *c.windowed), (base, base, base))) if row != was)
               for c in moves}
    assert changed == {(0,), (1,), (2,)}
    assert not isinstance(Candidate(8.0, base), WindowedCandidate)
