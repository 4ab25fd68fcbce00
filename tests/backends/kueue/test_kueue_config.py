"""The kueue section: its parser, the rules Kueue's webhook and CRD validation enforce (each
accepted and refused), the objects' mapping of the team model, and their validity against
Kueue's own CRD schemas."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdk_gpu_share.backends.kueue import KUEUE_VERSION, KueueConfig, KueueControllers, kueue_configuration
from cdk_gpu_share.backends.kueue.manifests import GPU, config_objects, kueue_objects
from cdk_gpu_share.cli import main
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration.schema import platform_schema
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.plan import fleet_plan, format_plan
from cdk_gpu_share.core.scenario import poll_seconds_of, scenario_from_config
from tests.backends.kueue.schema_check import CRDS, cel_errors, schema_errors, served_versions
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "kueue.yaml"


def base() -> dict[str, Any]:
    """Three teams on Kueue, one of each sharing mode."""
    return {
        "platform": {"name": "gpu-share"},
        "teams": [
            {"name": "research", "guarantee": {"p5.48xlarge": 2}, "sharing": "lend_and_borrow",
             "borrow_limit_percent": 50, "in_team_preemption": True, "fair_share_weight": 60},
            {"name": "applied", "guarantee": {"p5.48xlarge": 1}, "sharing": "lend"},
            {"name": "inference", "guarantee": {"g5.12xlarge": 1}, "sharing": "reserve"},
        ],
        "kueue": {"eks_cluster_name": "gpu-eks", "capacity": {"p5.48xlarge": 4, "g5.12xlarge": 2}},
    }


def problems_of(raw: dict[str, Any]) -> set[tuple[str, Any]]:
    with pytest.raises(ConfigError) as err:
        C.parse_config(raw)
    return {(p.field, p.value) for p in err.value.problems}


def checked(raw: dict[str, Any]) -> list[dict]:
    """The objects of an accepted config, each checked against Kueue's CRD schema and CEL rules."""
    objects = config_objects(C.parse_config(raw))
    assert [e for o in objects for e in schema_errors(o) + cel_errors(o)] == []
    return objects


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def flavor_resources(cq: dict, flavor: str) -> dict[str, dict]:
    (group,) = cq["spec"]["resourceGroups"]
    (f,) = [f for f in group["flavors"] if f["name"] == flavor]
    return {r["name"]: r for r in f["resources"]}


# -- the section.


def test_the_section_is_read_with_kueue_defaults():
    config = C.parse_config(base())
    section = config.backend("kueue")
    assert isinstance(section, KueueConfig)
    assert section.cohort == "gpu-share"
    assert (section.preemption.reclaim_within_cohort, section.preemption.borrow_within_cohort.policy,
            section.preemption.within_cluster_queue) == ("Never", "Never", "Never")
    assert [t.name for t in config.teams_for("kueue")] == ["research", "applied", "inference"]


def test_allowed_runtime_classes_default_to_none_and_are_read_in_order():
    assert C.parse_config(base()).backend("kueue").allowed_runtime_classes == ()
    raw = base()
    raw["kueue"]["allowed_runtime_classes"] = ["gvisor", "kata-qemu", "gvisor"]
    section = C.parse_config(raw).backend("kueue")
    assert section.allowed_runtime_classes == ("gvisor", "kata-qemu")
    assert C.parse_config(C.config_mapping(C.parse_config(raw))).backend("kueue") == section


def test_a_bad_runtime_class_names_the_field_the_value_and_the_fix(capsys, tmp_path):
    raw = base()
    raw["kueue"]["allowed_runtime_classes"] = ["Nvidia"]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "kueue.allowed_runtime_classes[0]" in err and "'Nvidia'" in err and "RuntimeClass" in err
    assert "lower-case" in err and "Traceback" not in err


def test_the_controllers_default_to_each_installations_service_account():
    controllers = C.parse_config(base()).backend("kueue").controllers
    assert controllers.kueue == ("system:serviceaccount:kueue-system:kueue-controller-manager",)
    assert controllers.job == ("system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager")
    assert controllers.jobset == ("system:serviceaccount:jobset-system:jobset-controller-manager",)
    assert controllers.kuberay == ("system:serviceaccount:ray-system:kuberay-operator",)
    assert controllers.training_operator == ("system:serviceaccount:kubeflow:training-operator",)
    assert "controllers" not in C.config_mapping(C.parse_config(base()))["kueue"]  # defaults are not written out


def test_the_controllers_given_replace_their_defaults_and_round_trip():
    raw = base()
    helm = "system:serviceaccount:default:kuberay-operator"
    raw["kueue"]["controllers"] = {"kuberay": [helm, helm], "jobset": []}
    section = C.parse_config(raw).backend("kueue")
    assert section.controllers.kuberay == (helm,) and section.controllers.jobset == ()
    assert section.controllers.job == KueueControllers().job  # a key left out keeps its default
    assert C.parse_config(C.config_mapping(C.parse_config(raw))).backend("kueue") == section


@pytest.mark.parametrize("identity", ["argocd", "arn:aws:iam::111122223333:role/Deployer", "system:serviceaccount:argocd",
                                      "system:serviceaccount:Argo:x", "system:masters", "system:anonymous", ""])
def test_an_identity_that_is_no_controller_is_refused_in_one_line(capsys, tmp_path, identity):
    raw = base()
    raw["kueue"]["controllers"] = {"job": [identity]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "kueue.controllers.job[0]" in err and "system:serviceaccount:NAMESPACE:NAME" in err
    assert "Traceback" not in err


def test_a_controller_may_not_run_as_a_teams_service_account(capsys, tmp_path):
    raw = base()
    raw["kueue"]["controllers"] = {"kuberay": ["system:serviceaccount:research:kuberay"]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "kueue.controllers.kuberay[0]" in err and "'system:serviceaccount:research:kuberay'" in err
    assert "team research" in err and "impersonate" in err and len(err.strip().splitlines()) == 1


def test_device_classes_default_to_none_and_every_claim_is_refused():
    config = C.parse_config(base())
    section = config.backend("kueue")
    assert section.device_classes == {} and kueue_configuration(section) is None
    assert "every DRA resource claim refused" in fleet_plan(config)["backends"]["kueue"]["dra"]


def test_a_mapped_device_class_is_what_kueues_configuration_must_map():
    raw = base()
    raw["kueue"]["capacity"]["p4d.24xlarge"] = 1
    raw["teams"][2]["guarantee"] = {"p4d.24xlarge": {"mig": {"mig-3g.20gb": 2}}}
    raw["kueue"]["device_classes"] = {"gpu.nvidia.com": "nvidia.com/gpu", "gpu.example.com": "nvidia.com/gpu",
                                      "mig.nvidia.com": "nvidia.com/mig-3g.20gb"}
    config = C.parse_config(raw)
    section = config.backend("kueue")
    assert kueue_configuration(section) == {
        "featureGates": {"DynamicResourceAllocation": True},
        "resources": {"deviceClassMappings": [
            {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com", "gpu.example.com"]},
            {"name": "nvidia.com/mig-3g.20gb", "deviceClassNames": ["mig.nvidia.com"]}]}}
    dra = fleet_plan(config)["backends"]["kueue"]["dra"]
    assert '"deviceClassMappings":[{"name":"nvidia.com/gpu"' in dra
    assert any("deviceClassMappings" in line for line in format_plan(fleet_plan(config)).splitlines())
    assert C.parse_config(C.config_mapping(config)).backend("kueue") == section


@pytest.mark.parametrize("mapping, field, words", [
    ({"gpu.nvidia.com": "example.com/gpu"}, "kueue.device_classes.gpu.nvidia.com", "nvidia.com/gpu"),
    ({"gpu.nvidia.com": "nvidia.com/mig-1g.5gb"}, "kueue.device_classes.gpu.nvidia.com", "not a GPU resource"),
    ({"gpu.nvidia.com": "cpu"}, "kueue.device_classes.gpu.nvidia.com", "not a GPU resource"),
    ({"gpu.nvidia.com": "nvidia.com/GPU!"}, "kueue.device_classes.gpu.nvidia.com", "is not a resource name"),
    ({"GPU_Class": "nvidia.com/gpu"}, "kueue.device_classes.GPU_Class", "DeviceClass"),
    ("gpu.nvidia.com", "kueue.device_classes", "must be a mapping"),
])
def test_a_bad_device_class_mapping_is_refused_in_one_line(capsys, tmp_path, mapping, field, words):
    raw = base()
    raw["kueue"]["device_classes"] = mapping
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert field in err and words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_section_round_trips_through_its_mapping():
    config = C.load_config(EXAMPLE)
    again = C.parse_config(C.config_mapping(config))
    assert again.backend("kueue") == config.backend("kueue")


@pytest.mark.parametrize("key,value,field", [
    ("eks_cluster_name", "-bad", "kueue.eks_cluster_name"),
    ("kubectl_role_arn", "arn:aws:iam::1:role/x", "kueue.kubectl_role_arn"),
    ("cohort", "Not_A_Name", "kueue.cohort"),
    ("capacity", {"ml.p5.48xlarge": 1}, "kueue.capacity.ml.p5.48xlarge"),
    ("preemption", {"reclaim_within_cohort": "Sometimes"}, "kueue.preemption.reclaim_within_cohort"),
    ("preemption", {"within_cluster_queue": "Always"}, "kueue.preemption.within_cluster_queue"),
    ("preemption", {"borrow_within_cohort": {"policy": "Any"}}, "kueue.preemption.borrow_within_cohort.policy"),
    ("adopt_namespaces", "research", "kueue.adopt_namespaces"),
    ("adopt_namespaces", ["reserch"], "kueue.adopt_namespaces[0]"),
    ("allowed_runtime_classes", "nvidia", "kueue.allowed_runtime_classes"),
    ("allowed_runtime_classes", ["Bad_Name"], "kueue.allowed_runtime_classes[0]"),
    ("allowed_runtime_classes", [7], "kueue.allowed_runtime_classes[0]"),
    ("controllers", "system:serviceaccount:argocd:x", "kueue.controllers"),
    ("controllers", {"argocd": None}, "kueue.controllers.argocd"),
    ("controllers", {"job": "system:serviceaccount:kube-system:job-controller"}, "kueue.controllers.job"),
    ("controllers", {"kueue": [7]}, "kueue.controllers.kueue[0]"),
    ("priority_classes", [{"name": "High", "value": 1}], "kueue.priority_classes[0].name"),
    ("priority_classes", [{"name": "high", "value": 2**31}], "kueue.priority_classes[0].value"),
    ("priority_classes", [{"name": "a", "value": 1}, {"name": "a", "value": 2}], "kueue.priority_classes[1].name"),
    ("nodes", 3, "kueue.nodes"),
])
def test_a_bad_value_is_refused_naming_the_field(key, value, field):
    raw = base()
    raw["kueue"][key] = value
    assert field in {f for f, _ in problems_of(raw)}


def test_a_problem_names_the_value_and_the_fix(capsys, tmp_path):
    raw = base()
    raw["kueue"]["preemption"] = {"reclaim_within_cohort": "Sometimes"}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "kueue.preemption.reclaim_within_cohort" in err and "'Sometimes'" in err
    assert "use one of Never, LowerPriority, Any" in err and "Traceback" not in err


# -- the rules of Kueue's webhook and CRD validation: one test each, accepted and refused.


def test_rule_reclaim_never_refuses_a_borrow_within_cohort_policy():
    raw = base()
    raw["kueue"]["preemption"] = {"borrow_within_cohort": {"policy": "LowerPriority"}}
    assert ("kueue.preemption.borrow_within_cohort.policy", "LowerPriority") in problems_of(raw)
    raw["kueue"]["preemption"]["reclaim_within_cohort"] = "LowerPriority"
    objects = checked(raw)
    cq = by_kind(objects, "ClusterQueue")["applied"]
    assert cq["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority"}
    assert not cel_errors(cq)


def test_rule_a_priority_threshold_needs_a_borrow_policy():
    raw = base()
    raw["kueue"]["preemption"] = {"borrow_within_cohort": {"max_priority_threshold": 100}}
    assert ("kueue.preemption.borrow_within_cohort.max_priority_threshold", 100) in problems_of(raw)
    raw["kueue"]["preemption"] = {"reclaim_within_cohort": "Any",
                                  "borrow_within_cohort": {"policy": "LowerPriority", "max_priority_threshold": 100}}
    cq = by_kind(checked(raw), "ClusterQueue")["research"]
    assert cq["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority", "maxPriorityThreshold": 100}


@pytest.mark.parametrize("name,ok", [("team-a", True), ("a" * 63, True), ("a" * 64, False), ("Team-A", False),
                                     ("team-", False)])
def test_rule_a_team_name_is_a_namespace_and_a_local_queue(name, ok):
    raw = base()
    raw["teams"][1]["name"] = name
    if ok:
        assert name in by_kind(checked(raw), "LocalQueue")
    else:
        assert any(f.startswith("teams[1]") and f.endswith(".name") for f, _ in problems_of(raw))


@pytest.mark.parametrize("name", ["kube-system", "kube-public", "kube-node-lease", "default", "kueue-system",
                                  "kube-anything"])
def test_rule_a_team_name_is_not_a_namespace_the_cluster_owns(name):
    raw = base()
    raw["teams"][1]["name"] = name
    with pytest.raises(ConfigError) as err:
        C.parse_config(raw)
    [p] = err.value.problems
    assert (p.field, p.value) == (f"teams[1] ({name}).name", name)
    assert "edit rights" in p.message and "rename the team" in p.fix


def test_a_namespace_to_adopt_names_a_kueue_team_with_a_suggestion():
    raw = base()
    raw["kueue"]["adopt_namespaces"] = ["reserch", "inference"]
    with pytest.raises(ConfigError) as err:
        C.parse_config(raw)
    [p] = err.value.problems
    assert (p.field, p.value, p.fix) == ("kueue.adopt_namespaces[0]", "reserch", "did you mean 'research'?")
    raw["kueue"]["adopt_namespaces"] = ["inference"]
    assert C.parse_config(raw).backend("kueue").adopt_namespaces == ("inference",)


@pytest.mark.parametrize("name", ["defaults", "kueue", "my-kube-system", "ray", "jobset"])
def test_names_near_the_reserved_ones_are_teams_like_any(name):
    raw = base()
    raw["teams"][1]["name"] = name
    assert name in by_kind(checked(raw), "Namespace")


def test_a_team_named_like_an_operators_namespace_needs_the_operator_elsewhere():
    # The training operator runs in kubeflow by default: a team named so would own its service account.
    raw = base()
    raw["teams"][1]["name"] = "kubeflow"
    [(field, value)] = problems_of(raw)
    assert (field, value) == ("kueue.controllers.training_operator[0]", "system:serviceaccount:kubeflow:training-operator")
    raw["kueue"]["controllers"] = {"training_operator": ["system:serviceaccount:training:training-operator"]}
    assert "kubeflow" in by_kind(checked(raw), "Namespace")


def test_rule_a_mig_profile_is_one_the_gpu_has():
    raw = base()
    raw["kueue"]["capacity"]["p4d.24xlarge"] = 1
    raw["teams"][2]["guarantee"] = {"p4d.24xlarge": {"mig": {"mig-3g.99gb": 2}}}
    assert ("teams[2] (inference).guarantee.p4d.24xlarge.mig.mig-3g.99gb", "mig-3g.99gb") in problems_of(raw)
    raw["teams"][2]["guarantee"] = {"p4d.24xlarge": {"mig": {"mig-3g.20gb": 2}}}
    cq = by_kind(checked(raw), "ClusterQueue")["inference"]
    assert flavor_resources(cq, "p4d.24xlarge")["nvidia.com/mig-3g.20gb"]["nominalQuota"] == 2


def test_rule_a_borrow_cap_names_a_declared_flavor():
    raw = base()
    raw["teams"][0]["borrow_limit"] = {"p4d.24xlarge": 1}
    assert ("teams[0] (research).borrow_limit.p4d.24xlarge", "p4d.24xlarge") in problems_of(raw)
    raw["teams"][0]["borrow_limit"] = {"p5.48xlarge": {"accelerators": 4}}
    cq = by_kind(checked(raw), "ClusterQueue")["research"]
    assert flavor_resources(cq, "p5.48xlarge")[GPU]["borrowingLimit"] == 4
    # a cap on a type the team guarantees on another backend is that backend's business
    raw["fairshare"] = {"capacity": {"g5.xlarge": 2}}
    raw["teams"][0]["guarantee"]["g5.xlarge"] = 1
    raw["teams"][0]["borrow_limit"] = {"g5.xlarge": 1}
    assert "g5.xlarge" not in by_kind(checked(raw), "ResourceFlavor")


def test_a_borrow_percent_of_minus_one_is_no_borrowing_limit():
    raw = base()
    raw["teams"][0]["borrow_limit_percent"] = -5
    assert ("teams[0] (research).borrow_limit_percent", -5) in problems_of(raw)
    raw["teams"][0]["borrow_limit_percent"] = -1  # unlimited: no borrowingLimit at all
    cq = by_kind(checked(raw), "ClusterQueue")["research"]
    assert "borrowingLimit" not in flavor_resources(cq, "p5.48xlarge")[GPU]


def test_rule_the_guarantees_fit_the_capacity():
    raw = base()
    raw["teams"][1]["guarantee"] = {"p5.48xlarge": 3}
    assert ("kueue.capacity.p5.48xlarge", 4) in problems_of(raw)


def test_an_instance_type_of_two_backends_is_refused():
    raw = base()
    raw["fairshare"] = {"capacity": {"g5.12xlarge": 1}}
    assert ("kueue.capacity.g5.12xlarge", "g5.12xlarge") in problems_of(raw)


# -- what the objects say.


def test_the_team_model_maps_to_kueue_fields():
    objects = config_objects(C.parse_config(base()))
    cqs = by_kind(objects, "ClusterQueue")
    research = flavor_resources(cqs["research"], "p5.48xlarge")
    assert research[GPU] == {"name": GPU, "nominalQuota": 16, "borrowingLimit": 8}
    assert research["cpu"]["nominalQuota"] == 384 and research["memory"]["nominalQuota"] == "4096Gi"
    assert cqs["research"]["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert cqs["research"]["spec"]["fairSharing"] == {"weight": 60}
    applied = flavor_resources(cqs["applied"], "p5.48xlarge")[GPU]
    assert applied == {"name": GPU, "nominalQuota": 8, "borrowingLimit": 0}  # lend
    inference = flavor_resources(cqs["inference"], "g5.12xlarge")[GPU]
    assert inference == {"name": GPU, "nominalQuota": 4, "borrowingLimit": 0, "lendingLimit": 0}  # reserve
    assert "fairSharing" not in cqs["applied"]["spec"]
    assert cqs["applied"]["spec"]["preemption"]["withinClusterQueue"] == "Never"
    for name, cq in cqs.items():
        assert cq["spec"]["cohortName"] == "gpu-share"
        assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": name}}


def test_each_team_has_a_namespace_and_a_local_queue_and_each_type_a_flavor():
    objects = config_objects(C.parse_config(base()))
    assert sorted(by_kind(objects, "Namespace")) == ["applied", "inference", "research"]
    assert {n: q["spec"]["clusterQueue"] for n, q in by_kind(objects, "LocalQueue").items()} == {
        "research": "research", "applied": "applied", "inference": "inference"}
    assert all(q["metadata"]["namespace"] == n for n, q in by_kind(objects, "LocalQueue").items())
    flavors = by_kind(objects, "ResourceFlavor")
    assert flavors["g5.12xlarge"]["spec"] == {
        "nodeLabels": {"node.kubernetes.io/instance-type": "g5.12xlarge"},
        # What Kueue admits tolerates the GPU nodes' taint, which the admission policy refuses to Pods outside it.
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}


def test_the_cohort_holds_the_capacity_no_team_guarantees():
    cohort = by_kind(config_objects(C.parse_config(base())), "Cohort")["gpu-share"]
    assert flavor_resources(cohort, "p5.48xlarge")[GPU]["nominalQuota"] == 8   # 4 nodes x 8, 24 guaranteed
    assert flavor_resources(cohort, "g5.12xlarge")[GPU]["nominalQuota"] == 4   # 2 nodes x 4, 4 guaranteed


def test_a_team_without_in_team_preemption_gets_the_sections_within_cluster_queue():
    raw = base()
    raw["kueue"]["preemption"] = {"within_cluster_queue": "LowerOrNewerEqualPriority"}
    raw["teams"][1]["in_team_preemption"] = False
    cqs = by_kind(checked(raw), "ClusterQueue")
    assert [cqs[n]["spec"]["preemption"]["withinClusterQueue"] for n in ("research", "applied", "inference")] == [
        "LowerPriority", "Never", "LowerOrNewerEqualPriority"]


def test_priority_classes_become_workload_priority_classes():
    raw = base()
    raw["kueue"]["priority_classes"] = [{"name": "high", "value": 1000, "description": "urgent"},
                                        {"name": "low", "value": -5}]
    wpcs = by_kind(checked(raw), "WorkloadPriorityClass")
    assert wpcs["high"]["value"] == 1000 and wpcs["high"]["description"] == "urgent"
    assert wpcs["low"]["value"] == -5 and "description" not in wpcs["low"]


def test_teams_on_other_backends_get_no_objects():
    raw = base()
    raw["fairshare"] = {"capacity": {"g5.xlarge": 2}}
    raw["teams"].append({"name": "batch-team", "guarantee": {"g5.xlarge": 1}})
    objects = checked(raw)
    assert "batch-team" not in by_kind(objects, "Namespace")
    assert "batch-team" not in by_kind(objects, "ClusterQueue")


# -- the objects against Kueue's own CRD schemas.


def _declares_kueue(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and "kueue" in data and "teams" in data


#: Every config file of the repository that declares the section, and every config of this module.
CONFIG_FILES = sorted(p for pattern in ("examples/*.yaml", "tests/**/*.yaml", "docs/**/*.yaml", "*.yaml")
                      for p in ROOT.glob(pattern) if CRDS not in p.parents and _declares_kueue(p))


def _module_configs() -> list[dict[str, Any]]:
    mig = base()
    mig["kueue"]["capacity"]["p4d.24xlarge"] = 1
    mig["teams"][2]["guarantee"] = {"p4d.24xlarge": {"mig": {"mig-3g.20gb": 4, "mig-1g.5gb": 2}}}
    full = copy.deepcopy(base())
    full["kueue"]["preemption"] = {"reclaim_within_cohort": "Any", "within_cluster_queue": "LowerPriority",
                                   "borrow_within_cohort": {"policy": "LowerPriority", "max_priority_threshold": 10}}
    full["kueue"]["priority_classes"] = [{"name": "high", "value": 1000, "description": "x"}]
    full["teams"][0]["borrow_limit"] = {"p5.48xlarge": {"accelerators": 4, "vcpu": 10.5}}
    full["teams"][1]["guarantee"] = {"p5.48xlarge": {"accelerators": 3, "memory_gib": 100.5}}
    return [base(), mig, full]


def test_the_example_and_other_config_files_are_found():
    assert EXAMPLE in CONFIG_FILES


@pytest.mark.parametrize("source", [*CONFIG_FILES, *range(len(_module_configs()))],
                         ids=[*(str(p.relative_to(ROOT)) for p in CONFIG_FILES),
                              *(f"module-config-{i}" for i in range(len(_module_configs())))])
def test_every_object_validates_against_kueues_crd_schema(source):
    config = C.load_config(source) if isinstance(source, Path) else C.parse_config(_module_configs()[source])
    objects = config_objects(config)
    assert {o["kind"] for o in objects} >= {"Namespace", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"}
    errors = [e for o in objects for e in schema_errors(o) + cel_errors(o)]
    assert errors == []


def test_the_schema_check_refuses_what_kueue_refuses():
    objects = config_objects(C.parse_config(base()))
    cq = copy.deepcopy(by_kind(objects, "ClusterQueue")["research"])
    cq["spec"]["preemption"]["reclaimWithinCohort"] = "Sometimes"
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    cq["spec"]["queueingMode"] = "fast"
    errors = schema_errors(cq)
    assert len(errors) == 3, errors
    cq = copy.deepcopy(by_kind(objects, "ClusterQueue")["research"])
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    del cq["spec"]["cohortName"]
    assert len(cel_errors(cq)) == 3  # resource count, names, borrowingLimit without cohort
    lq = copy.deepcopy(by_kind(objects, "LocalQueue")["research"])
    lq["apiVersion"] = "kueue.x-k8s.io/v1alpha1"
    with pytest.raises(KeyError):
        schema_errors(lq)


def test_the_pinned_release_serves_the_api_version_the_objects_use():
    assert KUEUE_VERSION in (CRDS / "README.md").read_text()
    for kind in ("ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass"):
        assert "v1beta2" in served_versions(kind)
    assert {o["apiVersion"] for o in config_objects(C.load_config(EXAMPLE)) if o["kind"] != "Namespace"} == {
        "kueue.x-k8s.io/v1beta2", "admissionregistration.k8s.io/v1"}


def test_the_builder_is_pure_and_stable():
    config = C.load_config(EXAMPLE)
    first = json.dumps(config_objects(config))
    assert json.dumps(config_objects(config)) == first
    assert kueue_objects(config.backend("kueue"), config.teams) == config_objects(config)


# -- plan, schema, simulate and the manifests command.


def test_the_json_schema_describes_the_section():
    props = platform_schema()["properties"]["kueue"]["properties"]
    assert props["preemption"]["properties"]["reclaim_within_cohort"]["enum"] == ["Never", "LowerPriority", "Any"]
    assert set(props) == {"eks_cluster_name", "kubectl_role_arn", "capacity", "cohort", "preemption", "priority_classes",
                          "adopt_namespaces", "allowed_runtime_classes", "controllers", "device_classes", "windows_image"}
    controllers = props["controllers"]["properties"]
    assert set(controllers) == {"kueue", "job", "jobset", "kuberay", "training_operator"}
    assert controllers["job"]["default"] == list(KueueControllers().job)


def test_plan_shows_the_kueue_teams_and_unlimited_default_borrowing():
    raw = base()
    del raw["teams"][0]["borrow_limit_percent"]
    plan = fleet_plan(C.parse_config(raw))["backends"]["kueue"]
    assert plan["strategy"].startswith("Kueue on Amazon EKS")
    rows = {r["team"]: r for r in plan["teams"]}
    assert rows["research"]["borrow_cap"] is None  # no borrowingLimit: unlimited
    assert rows["applied"]["borrow_cap"] == 0
    assert "reclaim_within_cohort: Never" in plan["kueue"]
    # The GPU-node settings no admission policy can enforce: one line of the plan.
    text = [line for line in format_plan(fleet_plan(C.parse_config(raw))).splitlines() if "gpu_nodes:" in line]
    assert len(text) == 1 and "cannot enforce" in text[0]
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in text[0]
    assert "deviceListStrategy volume-mounts" in text[0]


def test_simulate_runs_the_example(tmp_path, capsys):
    config = C.load_config(EXAMPLE)
    scenario = scenario_from_config(config, "kueue")
    assert scenario["capacity"] == {"gpu": 40}
    assert poll_seconds_of(config, "kueue") is None
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,team,submit_time,duration_s,gpus\nj1,research,0,600,24\nj2,applied,60,600,8\n"
                     "j3,inference,0,300,2\n")
    assert main(["simulate", "--config", str(EXAMPLE), "--backend", "kueue", "--trace", str(trace),
                 "--mode", "share+reclaim", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["completed"] == 3 and report["preemptions"] == 0
    # research runs 24 GPUs on a guarantee of 16: 8 borrowed (its cap, 50 %) for 600 s.
    assert report["teams"]["research"]["borrowed_gpu_seconds"] == 8 * 600
    assert report["teams"]["applied"]["borrowed_gpu_seconds"] == 0


def test_kueue_manifests_writes_one_file_per_kind(tmp_path, capsys):
    out = tmp_path / "manifests"
    assert main(["kueue", "manifests", str(EXAMPLE), "-o", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["01-namespace.yaml", "02-resourceflavor.yaml", "03-cohort.yaml",
                     "04-workloadpriorityclass.yaml", "05-clusterqueue.yaml", "06-localqueue.yaml",
                     "07-validatingadmissionpolicy.yaml", "08-validatingadmissionpolicybinding.yaml"]
    written = [o for f in sorted(out.iterdir()) for o in yaml.safe_load_all(f.read_text())]
    assert written == config_objects(C.load_config(EXAMPLE))
    assert "wrote 21 objects to 8 files" in capsys.readouterr().out


def test_kueue_manifests_removes_the_file_of_a_kind_the_config_no_longer_has(tmp_path, capsys):
    out = tmp_path / "manifests"
    assert main(["kueue", "manifests", str(EXAMPLE), "-o", str(out)]) == 0
    (out / "notes.md").write_text("kept")
    raw = yaml.safe_load(EXAMPLE.read_text())
    del raw["kueue"]["priority_classes"]
    config = tmp_path / "kueue.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["kueue", "manifests", str(config), "-o", str(out)]) == 0
    assert not (out / "04-workloadpriorityclass.yaml").exists()
    assert (out / "notes.md").read_text() == "kept" and (out / "05-clusterqueue.yaml").exists()


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    return err


def test_kueue_manifests_refuses_an_output_it_cannot_create(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    err = _refused(capsys, ["kueue", "manifests", str(EXAMPLE), "-o", str(tmp_path / "file" / "sub")])
    assert "--output" in err and "cannot be created" in err and "name a directory you can write to" in err


def test_kueue_manifests_refuses_a_directory_named_like_a_manifest_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "manifests"
    (out / "05-clusterqueue.yaml").mkdir(parents=True)
    err = _refused(capsys, ["kueue", "manifests", str(EXAMPLE), "-o", str(out)])
    assert "--output" in err and "holds a directory named 05-clusterqueue.yaml" in err and "rename" in err
    assert sorted(p.name for p in out.iterdir()) == ["05-clusterqueue.yaml"]


def test_kueue_manifests_replaces_a_link_named_like_a_manifest_and_never_writes_through_it(tmp_path, capsys):
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    out = tmp_path / "manifests"
    out.mkdir()
    (out / "05-clusterqueue.yaml").symlink_to(outside)
    (out / "04-workloadpriorityclass.yaml").symlink_to(outside)  # a kind the config will not have
    raw = yaml.safe_load(EXAMPLE.read_text())
    del raw["kueue"]["priority_classes"]
    config = tmp_path / "kueue.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["kueue", "manifests", str(config), "-o", str(out)]) == 0
    assert outside.read_text() == "not yours"
    written = out / "05-clusterqueue.yaml"
    assert not written.is_symlink() and "kind: ClusterQueue" in written.read_text()
    assert not (out / "04-workloadpriorityclass.yaml").exists() and not (out / "04-workloadpriorityclass.yaml").is_symlink()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_kueue_manifests_to_standard_output(capsys):
    assert main(["kueue", "manifests", str(EXAMPLE), "-o", "-"]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == config_objects(C.load_config(EXAMPLE))


def test_kueue_manifests_refuses_a_config_without_the_section(tmp_path, capsys):
    assert main(["kueue", "manifests", str(ROOT / "examples" / "hyperpod.yaml"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "kueue: is not in the config" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


# -- bad input of every shape: a ConfigError naming a field, never a traceback.

_BAD_VALUES = [None, 0, -1, 1.5, True, "", "x", [], {}, [1], {"x": 1}, [None], [{"name": 1}]]


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


@pytest.mark.parametrize("path", [p for p in _paths(yaml.safe_load(EXAMPLE.read_text())["kueue"]) if p],
                         ids=lambda p: ".".join(map(str, p)))
def test_every_field_of_the_section_refuses_bad_values_with_a_config_error(path):
    for bad in _BAD_VALUES:
        raw = yaml.safe_load(EXAMPLE.read_text())
        node = raw["kueue"]
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = copy.deepcopy(bad)
        try:
            config = C.parse_config(raw)
        except ConfigError as err:
            assert all(p.field and p.fix for p in err.problems), err.problems
            continue
        for o in config_objects(config):  # accepted: the objects are still Kueue's
            assert schema_errors(o) + cel_errors(o) == [], (path, bad)


def test_summary_lines_name_kueue_objects_only():
    from cdk_gpu_share.backends.kueue import describe_resource

    objects = config_objects(C.parse_config(base()))
    resource = {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"Manifest": json.dumps(objects)}}
    lines = describe_resource(resource)
    assert "Namespace research" not in " ".join(lines)  # not a Kueue object
    assert "ClusterQueue research: p5.48xlarge 16 GPUs (borrowing limit 8)" in lines
    assert "ClusterQueue inference: g5.12xlarge 4 GPUs (borrowing limit 0)" in lines
    assert "ResourceFlavor g5.12xlarge" in lines
    assert describe_resource({"Type": "AWS::IAM::Role"}) == []
    assert describe_resource({"Type": resource["Type"], "Properties": {"Manifest": {"Fn::Join": []}}}) == []
    assert describe_resource({"Type": resource["Type"], "Properties": {"Manifest": "not json"}}) == []
