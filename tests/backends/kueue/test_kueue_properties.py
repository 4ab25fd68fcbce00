"""Properties of the objects over many valid configs: they are Kueue's (CRD schema and CEL rules),
the teams' and the cohort's GPUs add up to the capacity, and the sharing mode decides the limits."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cdk_gpu_share.backends.kueue.manifests import GPU, config_objects
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import parse as C
from tests.backends.kueue.schema_check import cel_errors, schema_errors

TYPES = ["p5.48xlarge", "g5.12xlarge", "g6.xlarge"]


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    capacity = {it: draw(st.integers(1, 6)) for it in draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3,
                                                                       unique=True))}
    left = dict(capacity)
    teams = []
    for i in range(draw(st.integers(1, 4))):
        options = [it for it, n in left.items() if n > 0]
        if not options:
            break
        it = draw(st.sampled_from(options))
        n = draw(st.integers(1, left[it]))
        left[it] -= n
        team: dict[str, Any] = {"name": f"team-{i}", "guarantee": {it: n},
                                "sharing": draw(st.sampled_from(["reserve", "lend", "lend_and_borrow"]))}
        percent = draw(st.one_of(st.none(), st.just(-1), st.integers(0, 300)))
        if percent is not None and team["sharing"] == "lend_and_borrow":
            team["borrow_limit_percent"] = percent
        preempt = draw(st.one_of(st.none(), st.booleans()))
        if preempt is not None:
            team["in_team_preemption"] = preempt
        weight = draw(st.one_of(st.none(), st.integers(0, 100)))
        if weight is not None:
            team["fair_share_weight"] = weight
        teams.append(team)
    reclaim = draw(st.sampled_from(["Never", "LowerPriority", "Any"]))
    policy = "Never" if reclaim == "Never" else draw(st.sampled_from(["Never", "LowerPriority"]))
    return {"platform": {"name": "p"}, "teams": teams,
            "kueue": {"eks_cluster_name": "c", "capacity": capacity,
                      "preemption": {"reclaim_within_cohort": reclaim, "borrow_within_cohort": {"policy": policy}}}}


@settings(max_examples=60, deadline=None)
@given(configs())
def test_objects_of_any_valid_config_are_kueues_and_add_up(raw):
    config = C.parse_config(raw)
    objects = config_objects(config)
    assert [e for o in objects for e in schema_errors(o) + cel_errors(o)] == []
    queues = [o for o in objects if o["kind"] in ("ClusterQueue", "Cohort")]
    for it, count in raw["kueue"]["capacity"].items():
        total = 0
        for q in queues:
            (group,) = q["spec"]["resourceGroups"]
            (flavor,) = [f for f in group["flavors"] if f["name"] == it]
            total += {r["name"]: r for r in flavor["resources"]}[GPU]["nominalQuota"]
        assert total == count * instances.get(it).gpus
    for team in raw["teams"]:
        (cq,) = [o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == team["name"]]
        resources = [r for f in cq["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"]]
        if team["sharing"] == "reserve":
            assert all(r["lendingLimit"] == 0 and r["borrowingLimit"] == 0 for r in resources)
        elif team["sharing"] == "lend":
            assert all(r["borrowingLimit"] == 0 and "lendingLimit" not in r for r in resources)
        else:
            assert all("lendingLimit" not in r for r in resources)
            if team.get("borrow_limit_percent", -1) == -1:
                assert all("borrowingLimit" not in r for r in resources)
