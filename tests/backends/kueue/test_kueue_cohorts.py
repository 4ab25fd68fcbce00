"""The organisation's tree on Kueue: a Cohort per group under the section's Cohort, each team's
ClusterQueue in its group's Cohort, checked against Kueue's CRD schemas."""

from __future__ import annotations

from typing import Any

import pytest

from cdk_gpu_share.backends.kueue.manifests import GPU, config_objects
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.errors import ConfigError
from tests.backends.kueue.test_kueue_config import base, by_kind, checked, flavor_resources


def grouped() -> dict[str, Any]:
    """Two divisions: ``science`` (its own pool of one p5, at most 1 more) above ``nlp``, and ``product``."""
    raw = base()
    raw["groups"] = [
        {"name": "science", "guarantee": {"p5.48xlarge": 1}, "borrow_limit": {"p5.48xlarge": 1},
         "description": "research and its labs"},
        {"name": "nlp", "parent": "science"},
        {"name": "product"},
    ]
    raw["teams"][0]["group"] = "nlp"
    raw["teams"][1]["group"] = "science"
    raw["teams"][2]["group"] = "product"
    return raw


def test_each_group_is_a_cohort_under_its_parent_and_the_root_under_the_sections_cohort():
    cohorts = by_kind(checked(grouped()), "Cohort")
    assert sorted(cohorts) == ["gpu-share", "nlp", "product", "science"]
    assert "parentName" not in cohorts["gpu-share"]["spec"]
    assert cohorts["science"]["spec"]["parentName"] == "gpu-share"
    assert cohorts["product"]["spec"]["parentName"] == "gpu-share"
    assert cohorts["nlp"]["spec"]["parentName"] == "science"


def test_a_groups_pool_and_borrow_limit_are_its_cohorts_quota_and_limit():
    cohorts = by_kind(checked(grouped()), "Cohort")
    science = flavor_resources(cohorts["science"], "p5.48xlarge")
    assert science[GPU] == {"name": GPU, "nominalQuota": 8, "borrowingLimit": 8}
    assert science["cpu"] == {"name": "cpu", "nominalQuota": 192, "borrowingLimit": 192}
    # No limit on another type, and none at all on a group without borrow_limit.
    assert "borrowingLimit" not in flavor_resources(cohorts["science"], "g5.12xlarge")[GPU]
    assert flavor_resources(cohorts["science"], "g5.12xlarge")[GPU]["nominalQuota"] == 0
    assert all("borrowingLimit" not in r for r in flavor_resources(cohorts["nlp"], "p5.48xlarge").values())
    assert cohorts["science"]["metadata"]["annotations"] == {"gpu-share/description": "research and its labs"}


def test_the_sections_cohort_keeps_what_neither_a_team_nor_a_group_guarantees():
    cohort = by_kind(checked(grouped()), "Cohort")["gpu-share"]
    assert flavor_resources(cohort, "p5.48xlarge")[GPU]["nominalQuota"] == 0  # 32 less 24 (teams) less 8 (science)
    assert flavor_resources(cohort, "p5.48xlarge")["memory"]["nominalQuota"] == "0Gi"
    assert flavor_resources(cohort, "g5.12xlarge")[GPU]["nominalQuota"] == 4


def test_each_teams_cluster_queue_joins_its_groups_cohort():
    cqs = by_kind(checked(grouped()), "ClusterQueue")
    assert {n: q["spec"]["cohortName"] for n, q in cqs.items()} == {
        "research": "nlp", "applied": "science", "inference": "product"}


def test_a_root_team_stays_in_the_sections_cohort_and_only_groups_above_kueue_teams_are_made():
    raw = grouped()
    raw["teams"][2].pop("group")
    raw["groups"] = raw["groups"][:2] + [{"name": "other"}]
    raw["teams"].append({"name": "elsewhere", "guarantee": {"ml.g5.xlarge": 1}, "group": "other"})
    raw["batch_quota"] = {"capacity": {"ml.g5.xlarge": 1}}
    objects = checked(raw)
    assert by_kind(objects, "ClusterQueue")["inference"]["spec"]["cohortName"] == "gpu-share"
    assert sorted(by_kind(objects, "Cohort")) == ["gpu-share", "nlp", "science"]


def test_without_groups_one_cohort_as_before():
    objects = checked(base())
    assert list(by_kind(objects, "Cohort")) == ["gpu-share"]
    assert {q["spec"]["cohortName"] for q in by_kind(objects, "ClusterQueue").values()} == {"gpu-share"}


def test_a_group_named_as_the_sections_cohort_is_refused_in_one_line():
    raw = grouped()
    raw["groups"][2]["name"] = "gpu-share"
    raw["teams"][2]["group"] = "gpu-share"
    with pytest.raises(ConfigError) as err:
        C.parse_config(raw)
    [problem] = err.value.problems
    assert (problem.field, problem.value) == ("groups[2] (gpu-share).name", "gpu-share")
    assert "kueue.cohort" in problem.message and "rename the group" in problem.fix


def test_manifests_command_writes_the_group_cohorts(tmp_path, capsys):
    import yaml

    from cdk_gpu_share.cli import main

    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(grouped()))
    assert main(["kueue", "manifests", str(path), "-o", "-"]) == 0
    written = list(yaml.safe_load_all(capsys.readouterr().out))
    assert written == config_objects(C.load_config(path))
    assert {o["metadata"]["name"] for o in written if o["kind"] == "Cohort"} == {"gpu-share", "science", "nlp",
                                                                                   "product"}
